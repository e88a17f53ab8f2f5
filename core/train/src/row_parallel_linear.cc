#include "testbed/train/row_parallel_linear.h"

namespace testbed::train {
namespace {

// "block1.fc2.weight" -> "block1.fc2"
std::string BaseName(const std::string& weight_name) { return weight_name.substr(0, weight_name.size() - 7); }

template <typename T>
Linear<T> RowShard(const Linear<T>& full, const ShardRange& rows) {
  Linear<T> shard(BaseName(full.weight().name), full.weight().value.middleRows(rows.offset, rows.count), std::nullopt);
  shard.weight().grad = full.weight().grad.middleRows(rows.offset, rows.count);
  return shard;
}

}  // namespace

template <typename T>
RowParallelLinear<T>::RowParallelLinear(const Linear<T>& full, int rank, int size)
    : rows_(EvenShard(full.in(), rank, size)), shard_(RowShard(full, rows_)) {}

template <typename T>
Linear<T> RowParallelLinear<T>::Unshard(const std::vector<const RowParallelLinear*>& shards) {
  std::vector<const Matrix<T>*> w, wg;
  for (const RowParallelLinear* s : shards) {
    w.push_back(&s->shard_.weight().value);
    wg.push_back(&s->shard_.weight().grad);
  }
  Linear<T> full(BaseName(shards[0]->shard_.weight().name), ConcatRows(w), std::nullopt);
  full.weight().grad = ConcatRows(wg);
  return full;
}

template class RowParallelLinear<float>;
template class RowParallelLinear<double>;

}  // namespace testbed::train
