#include "collective_engine.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "testbed/reduce_elements.h"

namespace testbed::local {
namespace {

using Bytes = unsigned char;

std::int64_t Offset(const std::vector<std::int64_t>& counts, int upto) {
  std::int64_t sum = 0;
  for (int i = 0; i < upto; ++i) sum += counts[static_cast<size_t>(i)];
  return sum;
}

// Reduces elements [begin, begin + n) of every member's `send` (in rank order) and writes the
// result at `out_offset` of each buffer in `outputs`. Works through a small block that stays
// in L1, so in-place use (an output aliasing an input) is safe: only this rank touches these
// elements of any member.
void ReduceSegment(const std::vector<const CollectiveArgs*>& all, std::int64_t begin, std::int64_t n,
                   const std::vector<Bytes*>& outputs, std::int64_t out_offset) noexcept {
  constexpr std::size_t kBlockBytes = 16384;
  alignas(64) Bytes block[kBlockBytes];
  const DataType type = all[0]->type;
  const ReduceOp op = all[0]->op;
  const auto size = static_cast<std::int64_t>(DataTypeSize(type));
  const std::int64_t per_block = static_cast<std::int64_t>(kBlockBytes) / size;
  for (std::int64_t done = 0; done < n; done += per_block) {
    const std::int64_t m = std::min(per_block, n - done);
    const std::int64_t in = (begin + done) * size;
    std::memcpy(block, static_cast<const Bytes*>(all[0]->send) + in, static_cast<size_t>(m * size));
    for (std::size_t k = 1; k < all.size(); ++k) {
      ReduceElements(block, static_cast<const Bytes*>(all[k]->send) + in, m, type, op);
    }
    for (Bytes* out : outputs) {
      std::memcpy(out + (out_offset + done) * size, block, static_cast<size_t>(m * size));
    }
  }
}

void Copy(void* dst, const void* src, std::int64_t count, DataType type) noexcept {
  if (count > 0 && dst != src) std::memcpy(dst, src, static_cast<size_t>(count) * DataTypeSize(type));
}

std::string Disagree(int a, int b, const std::string& what) {
  return absl::StrCat("ranks ", a, " and ", b, " disagree on ", what);
}

}  // namespace

const char* CollectiveKindName(CollectiveKind kind) noexcept {
  switch (kind) {
    case CollectiveKind::kAllReduce: return "all_reduce";
    case CollectiveKind::kBroadcast: return "broadcast";
    case CollectiveKind::kAllGatherV: return "all_gather_v";
    case CollectiveKind::kReduceScatterV: return "reduce_scatter_v";
    case CollectiveKind::kAllToAllV: return "all_to_all_v";
    case CollectiveKind::kBarrier: return "barrier";
  }
  return "?";
}

absl::Status CheckAgreement(const std::vector<const CollectiveArgs*>& all) {
  const CollectiveArgs& a = *all[0];
  const int n = static_cast<int>(all.size());
  for (int r = 1; r < n; ++r) {
    const CollectiveArgs& b = *all[static_cast<size_t>(r)];
    if (b.kind != a.kind) {
      return absl::InvalidArgumentError(absl::StrCat("rank 0 called ", CollectiveKindName(a.kind), " but rank ", r,
                                                     " called ", CollectiveKindName(b.kind)));
    }
    if (a.kind == CollectiveKind::kBarrier) continue;
    if (b.type != a.type) return absl::InvalidArgumentError(Disagree(0, r, "the element type"));
    const bool reduces = a.kind == CollectiveKind::kAllReduce || a.kind == CollectiveKind::kReduceScatterV;
    if (reduces && b.op != a.op) return absl::InvalidArgumentError(Disagree(0, r, "the reduction"));
    if ((a.kind == CollectiveKind::kAllReduce || a.kind == CollectiveKind::kBroadcast) && b.count != a.count) {
      return absl::InvalidArgumentError(Disagree(0, r, absl::StrCat("the count (", a.count, " vs ", b.count, ")")));
    }
    if (a.kind == CollectiveKind::kBroadcast && b.root != a.root) {
      return absl::InvalidArgumentError(Disagree(0, r, "the root"));
    }
    if ((a.kind == CollectiveKind::kAllGatherV || a.kind == CollectiveKind::kReduceScatterV) && b.counts != a.counts) {
      return absl::InvalidArgumentError(Disagree(
          0, r, absl::StrCat("the counts ([", absl::StrJoin(a.counts, ", "), "] vs [", absl::StrJoin(b.counts, ", "), "])")));
    }
  }
  if (a.kind == CollectiveKind::kAllToAllV) {
    for (int src = 0; src < n; ++src) {
      for (int dst = 0; dst < n; ++dst) {
        const std::int64_t sent = all[static_cast<size_t>(src)]->counts[static_cast<size_t>(dst)];
        const std::int64_t expected = all[static_cast<size_t>(dst)]->recv_counts[static_cast<size_t>(src)];
        if (sent != expected) {
          return absl::InvalidArgumentError(absl::StrCat("all_to_all_v: rank ", src, " sends ", sent, " elements to rank ",
                                                         dst, " which expects ", expected));
        }
      }
    }
  }
  return absl::OkStatus();
}

void DoShare(int rank, const std::vector<const CollectiveArgs*>& all) noexcept {
  const CollectiveArgs& mine = *all[static_cast<size_t>(rank)];
  const int n = static_cast<int>(all.size());
  const DataType type = mine.type;
  const auto esize = static_cast<std::int64_t>(DataTypeSize(type));
  switch (mine.kind) {
    case CollectiveKind::kBarrier:
      return;
    case CollectiveKind::kAllReduce: {
      const std::vector<std::int64_t> counts = CommGroup::EvenCounts(mine.count, n);
      std::vector<Bytes*> outputs;
      outputs.reserve(static_cast<size_t>(n));
      for (const CollectiveArgs* a : all) outputs.push_back(static_cast<Bytes*>(a->recv));
      const std::int64_t begin = Offset(counts, rank);
      ReduceSegment(all, begin, counts[static_cast<size_t>(rank)], outputs, begin);
      return;
    }
    case CollectiveKind::kReduceScatterV: {
      const std::int64_t begin = Offset(mine.counts, rank);
      ReduceSegment(all, begin, mine.counts[static_cast<size_t>(rank)], {static_cast<Bytes*>(mine.recv)}, 0);
      return;
    }
    case CollectiveKind::kBroadcast:
      if (rank != mine.root) Copy(mine.recv, all[static_cast<size_t>(mine.root)]->recv, mine.count, type);
      return;
    case CollectiveKind::kAllGatherV: {
      std::int64_t offset = 0;
      for (int k = 0; k < n; ++k) {
        const std::int64_t count = mine.counts[static_cast<size_t>(k)];
        Copy(static_cast<Bytes*>(mine.recv) + offset * esize, all[static_cast<size_t>(k)]->send, count, type);
        offset += count;
      }
      return;
    }
    case CollectiveKind::kAllToAllV: {
      std::int64_t offset = 0;
      for (int k = 0; k < n; ++k) {
        const CollectiveArgs& from = *all[static_cast<size_t>(k)];
        const std::int64_t count = mine.recv_counts[static_cast<size_t>(k)];
        Copy(static_cast<Bytes*>(mine.recv) + offset * esize,
             static_cast<const Bytes*>(from.send) + Offset(from.counts, rank) * esize, count, type);
        offset += count;
      }
      return;
    }
  }
}

}  // namespace testbed::local
