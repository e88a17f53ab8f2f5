// Pass 1: gradient buckets. Per stage, the layers in the order their gradients become final
// (last chunk first, each chunk's layers descending), grouped greedily into buckets of at
// least ExpandOptions::dp_bucket_bytes (a bucket closes once it reaches the size, as in
// PyTorch DDP and Megatron-LM); a compressed layer is a bucket of its own. With dp_overlap,
// the final backward of a chunk ends at every layer that closes a bucket, so the bucket's
// exchange starts there and not after the whole stage's backward.
#include "expand/expansion.h"
#include "expand/sparse_embedding.h"

namespace testbed::expand {

absl::Status PlanBuckets(Expansion& e) {
  e.buckets.assign(static_cast<size_t>(e.pp), {});
  e.bucket_ends.assign(static_cast<size_t>(e.pp), {});
  for (int s = 0; s < e.pp; ++s) {
    const Stage& st = e.StageAt(s);
    std::vector<int> order;
    for (int c = e.chunks - 1; c >= 0; --c) {
      const StageSpec& ch = st.chunks[static_cast<size_t>(c)];
      for (int l = ch.end_layer - 1; l >= ch.first_layer; --l) order.push_back(l);
    }
    auto& out = e.buckets[static_cast<size_t>(s)];
    std::vector<int> plain;
    for (int l : order) {
      if (SparseEmbedding(e, l)) continue;  // its rows go to their owners (sparse_embedding.h)
      if (e.Compressed(l)) {
        out.push_back(Bucket{{l}, true});
      } else {
        plain.push_back(l);
      }
    }
    // A bucket holds layers of one tensor-parallel degree (per-layer degrees shard their
    // gradients over different groups).
    size_t i = 0;
    while (i < plain.size()) {
      double bytes = 0;
      Bucket b;
      const int tp = e.plan.LayerTp(plain[i]);
      while (i < plain.size() && (b.layers.empty() || bytes < static_cast<double>(e.opt.dp_bucket_bytes)) &&
             e.plan.LayerTp(plain[i]) == tp) {
        bytes += e.ReplicatedParams(plain[i]) * e.GradientElementBytes(plain[i]);
        b.layers.push_back(plain[i]);
        ++i;
      }
      if (bytes > 0) out.push_back(std::move(b));
    }
    // Split points of the final backward: the lowest layer of each bucket within each chunk.
    if (st.dp() < 2 || !e.opt.dp_overlap) continue;
    for (const Bucket& b : out) {
      for (const StageSpec& ch : st.chunks) {
        int lowest = -1;
        for (int l : b.layers) {
          if (l >= ch.first_layer && l < ch.end_layer && (lowest < 0 || l < lowest)) lowest = l;
        }
        if (lowest > ch.first_layer) e.bucket_ends[static_cast<size_t>(s)].insert(lowest);
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace testbed::expand
