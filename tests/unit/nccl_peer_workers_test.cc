// PeerWorkers (proxy/nccl/peer_workers.h): which Workers a fabric comm takes its peer's
// ops from, one per route of the peer, bounded by the comm's route count.
#include "proxy/nccl/peer_workers.h"

#include <gtest/gtest.h>

namespace railyard::proxy::nccl {
namespace {

TEST(PeerWorkers, OneRouteAdmitsTheFirstWorkerOnly) {
  PeerWorkers p;
  EXPECT_EQ(p.First(), 0u);
  EXPECT_FALSE(p.Has(7));
  EXPECT_TRUE(p.Admit(7));
  EXPECT_TRUE(p.Admit(7));  // again: still the same one
  EXPECT_FALSE(p.Admit(8));
  EXPECT_TRUE(p.Has(7));
  EXPECT_FALSE(p.Has(8));
  EXPECT_EQ(p.First(), 7u);
  EXPECT_EQ(p.size(), 1u);
}

TEST(PeerWorkers, TwoRoutesAdmitTwoWorkersInArrivalOrder) {
  PeerWorkers p;
  p.SetLimit(2);
  EXPECT_TRUE(p.Admit(0x33));
  EXPECT_TRUE(p.Admit(0x11));
  EXPECT_FALSE(p.Admit(0x22));  // a third Worker for a comm of two routes
  EXPECT_TRUE(p.Admit(0x33));
  EXPECT_TRUE(p.Has(0x11));
  EXPECT_FALSE(p.Has(0x22));
  EXPECT_EQ(p.First(), 0x33u);
  EXPECT_EQ(p.size(), 2u);
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
