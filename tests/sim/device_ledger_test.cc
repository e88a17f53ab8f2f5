// The device ledger's shared gang books (sim/device_ledger.h) against books kept apart for
// every member: on random event sequences over gangs of consecutive devices, groups in any
// order, single devices and micro-batch holds, every device's closing books are the same
// doubles, bit for bit, and the gangs did share their books along the way.
#include "sim/device_ledger.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <random>
#include <vector>

#include "testbed/schedule.h"

namespace testbed::sim {
namespace {

void ExpectSameBits(const std::vector<SimDeviceStats>& got, const std::vector<SimDeviceStats>& want) {
  ASSERT_EQ(got.size(), want.size());
  const auto bits = [](double x) { return std::bit_cast<std::uint64_t>(x); };
  for (size_t d = 0; d < want.size(); ++d) {
    SCOPED_TRACE(testing::Message() << "device " << d);
    EXPECT_EQ(bits(got[d].compute_s), bits(want[d].compute_s));
    EXPECT_EQ(bits(got[d].comm_s), bits(want[d].comm_s));
    EXPECT_EQ(bits(got[d].exposed_comm_s), bits(want[d].exposed_comm_s));
    EXPECT_EQ(bits(got[d].idle_s), bits(want[d].idle_s));
    EXPECT_EQ(bits(got[d].static_bytes), bits(want[d].static_bytes));
    EXPECT_EQ(bits(got[d].memory_peak_bytes), bits(want[d].memory_peak_bytes));
    EXPECT_EQ(got[d].max_micro_batches_held, want[d].max_micro_batches_held);
  }
}

// A gang of four computes, communicates inside itself and then sends from each member on its
// own: the gang shares one book from its first event; its members' sends starting at the same
// time change the shared book once, when the last one starts; a member whose send ends at
// another time splits it, and then the books stay apart.
TEST(DeviceLedger, AGangSharesItsBookWhileItsMembersBooksAreEqual) {
  Schedule s(5);
  const std::int32_t gang = s.Group({0, 1, 2, 3});
  for (DeviceId d = 0; d < 4; ++d) s.SetStaticBytes(d, 100);
  DeviceLedger shared(s, 2, 1), apart(s, 2, 1, /*share_gangs=*/false);
  std::vector<DeviceLedger*> both{&shared, &apart};
  const std::int32_t where = -(gang + 1);
  const DeviceLedger::Hold up{0, 3, 1}, down{0, 3, -1}, none{};
  for (DeviceLedger* l : both) l->StartCompute(where, 10, up, 1.0);
  EXPECT_EQ(shared.SharedGangs(), 1);  // equal books from the start
  EXPECT_EQ(apart.SharedGangs(), 0);
  for (DeviceLedger* l : both) {
    l->EndCompute(where, -4, none, 2.5);
    l->Comm(where, +1, 2.5);
    l->Comm(where, -1, 3.0);
  }
  EXPECT_EQ(shared.SharedGangs(), 1);
  for (DeviceLedger* l : both) l->Comm(0, +1, 3.0);  // each member sends on its own
  EXPECT_EQ(shared.SharedGangs(), 1);                 // waiting for the others
  for (DeviceLedger* l : both) {
    for (DeviceId d = 1; d < 4; ++d) l->Comm(d, +1, 3.0);
    l->StartCompute(where, 1, none, 3.5);
  }
  EXPECT_EQ(shared.SharedGangs(), 1);
  for (DeviceLedger* l : both) {
    for (DeviceId d = 0; d < 4; ++d) l->Comm(d, -1, d == 2 ? 4.5 : 4.0);  // member 2 later: split
    l->EndCompute(where, -1, down, 5.0);
  }
  EXPECT_EQ(shared.SharedGangs(), 0);  // member 2 communicated longer: kept apart
  ExpectSameBits(shared.Finish(6.0), apart.Finish(6.0));
}

TEST(DeviceLedger, SharedGangBooksEqualBooksKeptApartOnRandomEvents) {
  std::mt19937 rng(11);
  int ever_shared = 0;
  for (int trial = 0; trial < 300; ++trial) {
    const int devices = 2 + static_cast<int>(rng() % 10);
    Schedule s(devices);
    std::vector<std::int32_t> groups;
    // Runs of consecutive devices (gangs), some overlapping; groups in any order.
    for (int g = 0; g < 4; ++g) {
      const int size = 2 + static_cast<int>(rng() % 4);
      if (size > devices) continue;
      const DeviceId first = static_cast<DeviceId>(rng() % static_cast<unsigned>(devices - size + 1));
      std::vector<DeviceId> members;
      for (int k = 0; k < size; ++k) members.push_back(first + k);
      groups.push_back(s.Group(members));
    }
    for (int g = 0; g < 2; ++g) {
      std::vector<DeviceId> members;
      for (DeviceId d = 0; d < devices; ++d) {
        if (rng() % 2 == 0) members.push_back(d);
      }
      if (members.empty()) members.push_back(0);
      std::shuffle(members.begin(), members.end(), rng);
      groups.push_back(s.Group(members));
    }
    // Equal static bytes on most devices (gangs can share), different on a few.
    for (DeviceId d = 0; d < devices; ++d) s.SetStaticBytes(d, rng() % 5 == 0 ? 7.0 * d : 64.0);
    const int micro_batches = 1 + static_cast<int>(rng() % 3);
    DeviceLedger shared(s, micro_batches, 1), apart(s, micro_batches, 1, /*share_gangs=*/false);
    double now = 0;
    int shared_seen = 0;
    const int events = 1 + static_cast<int>(rng() % 200);
    for (int k = 0; k < events; ++k) {
      if (rng() % 3 != 0) now += 0.25 * static_cast<double>(rng() % 4);  // ties too
      std::int32_t where = 0;
      if (rng() % 4 == 0) {
        where = static_cast<std::int32_t>(rng() % static_cast<unsigned>(devices));
      } else {
        where = -(groups[rng() % groups.size()] + 1);
      }
      DeviceLedger::Hold hold{static_cast<std::uint32_t>(rng() % static_cast<unsigned>(micro_batches)),
                              1 + static_cast<std::int32_t>(rng() % 3), 0};
      const double bytes = static_cast<double>(rng() % 9) - 4.0;
      if (rng() % 4 == 0) {
        // Every member of a gang sends or receives on its own at the same time, in any order;
        // now and then one of them at another time, with another change, or twice.
        const std::int32_t g = groups[rng() % groups.size()];
        std::vector<DeviceId> members = s.groups()[static_cast<size_t>(g)];
        std::shuffle(members.begin(), members.end(), rng);
        const int delta = rng() % 2 == 0 ? 1 : -1;
        const int odd = rng() % 3 == 0 ? static_cast<int>(rng() % 3) : -1;
        for (size_t k = 0; k < members.size(); ++k) {
          double at = now;
          int change = delta;
          if (k + 1 == members.size() && odd == 0) at += 0.25;
          if (k + 1 == members.size() && odd == 1) change = -delta;
          for (DeviceLedger* l : {&shared, &apart}) {
            l->Comm(members[k], change, at);
            if (k == 0 && odd == 2) l->Comm(members[k], change, at);
          }
        }
        shared_seen += shared.SharedGangs();
        continue;
      }
      const int what = static_cast<int>(rng() % 6);
      for (DeviceLedger* l : {&shared, &apart}) {
        switch (what) {
          case 0:
            l->StartCompute(where, bytes, DeviceLedger::Hold{hold.key, hold.layers, 1}, now);
            break;
          case 1:
            l->StartCompute(where, bytes, DeviceLedger::Hold{}, now);
            break;
          case 2:
            l->EndCompute(where, bytes, DeviceLedger::Hold{hold.key, hold.layers, -1}, now);
            break;
          case 3:
            l->EndCompute(where, bytes, DeviceLedger::Hold{}, now);
            break;
          case 4:
            l->Comm(where, +1, now);
            break;
          default:
            l->Comm(where, -1, now);
            break;
        }
      }
      shared_seen += shared.SharedGangs();
      ASSERT_EQ(apart.SharedGangs(), 0);
    }
    ever_shared += shared_seen > 0 ? 1 : 0;
    SCOPED_TRACE(testing::Message() << "trial " << trial);
    ExpectSameBits(shared.Finish(now + 1), apart.Finish(now + 1));
  }
  EXPECT_GT(ever_shared, 30);  // the sharing was exercised, not just skipped (49 of 300 trials)
}

}  // namespace
}  // namespace testbed::sim
