#include "testbed/train/column_parallel_linear.h"

namespace testbed::train {
namespace {

template <typename T>
Linear<T> ColumnShard(const Linear<T>& full, const ShardRange& cols) {
  std::optional<Matrix<T>> bias;
  if (full.has_bias()) bias = Matrix<T>(full.bias().value.middleCols(cols.offset, cols.count));
  const std::string& wname = full.weight().name;
  Linear<T> shard(wname.substr(0, wname.size() - 7), full.weight().value.middleCols(cols.offset, cols.count), bias);
  shard.weight().grad = full.weight().grad.middleCols(cols.offset, cols.count);
  if (full.has_bias()) shard.bias().grad = full.bias().grad.middleCols(cols.offset, cols.count);
  return shard;
}

}  // namespace

template <typename T>
ColumnParallelLinear<T>::ColumnParallelLinear(const Linear<T>& full, int rank, int size)
    : columns_(EvenShard(full.out(), rank, size)), shard_(ColumnShard(full, columns_)) {}

template <typename T>
Linear<T> ColumnParallelLinear<T>::Unshard(const std::vector<const ColumnParallelLinear*>& shards) {
  std::vector<const Matrix<T>*> w, wg, b, bg;
  for (const ColumnParallelLinear* s : shards) {
    w.push_back(&s->shard_.weight().value);
    wg.push_back(&s->shard_.weight().grad);
    b.push_back(&s->shard_.bias().value);
    bg.push_back(&s->shard_.bias().grad);
  }
  const Linear<T>& first = shards[0]->shard_;
  std::optional<Matrix<T>> bias;
  if (first.has_bias()) bias = ConcatColumns(b);
  const std::string& wname = first.weight().name;
  Linear<T> full(wname.substr(0, wname.size() - 7), ConcatColumns(w), bias);
  full.weight().grad = ConcatColumns(wg);
  if (first.has_bias()) full.bias().grad = ConcatColumns(bg);
  return full;
}

template class ColumnParallelLinear<float>;
template class ColumnParallelLinear<double>;

}  // namespace testbed::train
