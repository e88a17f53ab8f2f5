// Simulates a schedule of bare transfers and collectives (no compute time) on a ring
// collective model, with the given way of bringing transfer rates up to date: the link
// sharing and link priority tests.
#pragma once

#include <gtest/gtest.h>

#include "ring.h"
#include "sim/simulator.h"
#include "sim_fixtures.h"

namespace testbed::testing {

inline SimResult SimulateTraffic(const Schedule& s, const Cluster& cluster,
                                 RateUpdates mode = RateUpdates::kIncremental) {
  const ModelGraph model = Gpt(1);
  const ConstantDeviceModel dm(0);
  const collectives::Ring ring(collectives::CommTuning{});
  SimOptions opt;
  opt.rate_updates = mode;
  auto r = Simulate(s, SimInputs{model, cluster, dm, ring}, opt);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? *std::move(r) : SimResult{};
}

}  // namespace testbed::testing
