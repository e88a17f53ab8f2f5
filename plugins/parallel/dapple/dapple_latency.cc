#include "dapple_latency.h"

#include <algorithm>

namespace testbed::dapple {

Latency PipelineLatency(const std::vector<StageLoad>& st, int m) {
  const int n = static_cast<int>(st.size());
  if (n == 0) return {};
  const double steady = std::max(m - 1, 0);
  auto fb = [&](int s) { return st[static_cast<size_t>(s)].f + st[static_cast<size_t>(s)].b; };
  int q = n - 1;
  for (int j = n - 2; j >= 0; --j) {
    double between = 0;
    for (int s = j + 1; s <= q; ++s) between += fb(s) + 2 * st[static_cast<size_t>(s - 1)].send;
    if (steady * fb(j) > steady * fb(q) + between) q = j;
  }
  double warm_and_end = 0;
  for (int s = 0; s <= q; ++s) warm_and_end += fb(s) + (s < q ? 2 * st[static_cast<size_t>(s)].send : 0.0);
  // Stage s's all-reduce starts after its last backward; the stages before it still run their
  // last backwards (and receive the gradient) meanwhile.
  double exposed = 0, behind = 0;
  for (int s = 0; s < n; ++s) {
    exposed = std::max(exposed, st[static_cast<size_t>(s)].allreduce - behind);
    behind += st[static_cast<size_t>(s)].b + st[static_cast<size_t>(s)].send;
  }
  return {warm_and_end + steady * fb(q) + exposed, q};
}

}  // namespace testbed::dapple
