// PeerWorkers (proxy/nccl/peer_workers.h): which Workers a fabric comm takes its peer's
// ops from, one per route of the peer, bounded by the comm's route count.
#include "proxy/nccl/peer_workers.h"

#include <gtest/gtest.h>

#include <set>
#include <vector>

namespace railyard::proxy::nccl {
namespace {

/// Offers the Workers of `arrivals`, in order, to a PeerWorkers of `limit` routes and
/// checks each answer against `admitted`; then that Has() holds for exactly the Workers
/// admitted, First() is the first admitted and size() counts them once each.
void ExpectAdmissions(size_t limit, const std::vector<uint64_t>& arrivals, const std::vector<bool>& admitted) {
  ASSERT_EQ(arrivals.size(), admitted.size());
  PeerWorkers p;
  p.SetLimit(limit);
  EXPECT_EQ(p.First(), 0u);
  std::set<uint64_t> in, out;
  for (size_t i = 0; i < arrivals.size(); ++i) {
    EXPECT_FALSE(p.Has(arrivals[i]) && !admitted[i]) << "worker " << arrivals[i] << " has, yet is to be refused";
    EXPECT_EQ(p.Admit(arrivals[i]), admitted[i]) << "arrival " << i << ": worker " << arrivals[i];
    (admitted[i] ? in : out).insert(arrivals[i]);
  }
  for (uint64_t w : in) EXPECT_TRUE(p.Has(w)) << w;
  for (uint64_t w : out) EXPECT_FALSE(p.Has(w)) << w;
  EXPECT_EQ(p.First(), arrivals[0]);
  EXPECT_EQ(p.size(), in.size());
}

TEST(PeerWorkers, OneRouteAdmitsTheFirstWorkerOnly) {
  // 7 again: still the same one; 8: a second Worker for a comm of one route.
  ExpectAdmissions(1, {7, 7, 8}, {true, true, false});
}

TEST(PeerWorkers, TwoRoutesAdmitTwoWorkersInArrivalOrder) {
  // 0x22: a third Worker for a comm of two routes; 0x33 again: still admitted.
  ExpectAdmissions(2, {0x33, 0x11, 0x22, 0x33}, {true, true, false, true});
}

TEST(PeerWorkers, WorkerZeroIsNeverAdmittedAndLimitsAreClamped) {
  PeerWorkers p;
  p.SetLimit(0);
  EXPECT_EQ(p.limit(), 1u);
  EXPECT_FALSE(p.Admit(0));
  EXPECT_FALSE(p.Has(0));
  EXPECT_EQ(p.size(), 0u);
  p.SetLimit(1000);
  EXPECT_EQ(p.limit(), PeerWorkers::kMaxRoutes);
}

}  // namespace
}  // namespace railyard::proxy::nccl
