// The shared "fail outstanding ops" rule (proxy/fabric/fail_outstanding.h) that the
// tcp, verbs, relayed and fake Endpoints use when they fail: the op the cause names
// keeps the cause whole; the others get their own seq, and ENDPOINT_FAILED "the
// endpoint failed earlier: <cause>" when the cause was one op's refusal (or always,
// under the verbs rule); fences always fail ENDPOINT_FAILED; rank, peer, device, rail
// and QP stay in every message.
#include <gtest/gtest.h>

#include <vector>

#include "proxy/fabric/fail_outstanding.h"

namespace railyard::fabric {
namespace {

FabricError Cause(FabricErrc errc, int64_t seq, const char* what) {
  FabricError e;
  e.errc = errc;
  e.site.rank = 3;
  e.site.peer = "w=00000000000000aa 127.0.0.2:4000";
  e.site.device = "eth1";
  e.site.rail = 1;
  e.site.qp = 2;
  e.site.qpName = "socket";
  e.site.seq = seq;
  e.what = what;
  return e;
}

std::vector<Event> FailAll(const FabricError& cause, OthersRule rule) {
  const std::vector<OutstandingOp> ops = {
      {OpType::kWrite, 100, 7}, {OpType::kRead, 101, 8}, {OpType::kFence, 102, -1}, {OpType::kFetchAdd, 103, 9}};
  std::vector<Event> out;
  FailOutstanding(cause, ops, rule, [&](Event e) { out.push_back(std::move(e)); });
  return out;
}

TEST(FabricFailOutstanding, ARefusalNamesItsOwnOpAndFailsTheOthersAsEndpointFailed) {
  const FabricError cause = Cause(FabricErrc::kOutOfBounds, 8, "refused: [addr, +64) outside the region");
  const std::vector<Event> ev = FailAll(cause, OthersRule::kKeepCauseUnlessRefusal);
  ASSERT_EQ(ev.size(), 4u);
  for (size_t i = 0; i < ev.size(); ++i) {
    EXPECT_EQ(ev[i].kind, EventKind::kError);
    EXPECT_EQ(ev[i].cookie, 100 + i);
  }
  EXPECT_EQ(ev[1].op, OpType::kRead);
  EXPECT_EQ(ev[1].error.errc, FabricErrc::kOutOfBounds);
  EXPECT_EQ(ev[1].error.ToString(), cause.ToString()) << "the refused op keeps the cause whole";
  EXPECT_EQ(ev[0].error.errc, FabricErrc::kEndpointFailed);
  EXPECT_EQ(ev[0].error.site.seq, 7);
  EXPECT_EQ(ev[0].error.what, "the endpoint failed earlier: " + cause.ToString());
  EXPECT_EQ(ev[0].error.ToString(),
            "fabric ENDPOINT_FAILED: rank 3 peer w=00000000000000aa 127.0.0.2:4000 device eth1 rail 1 socket 2 seq 7: "
            "the endpoint failed earlier: fabric OUT_OF_BOUNDS: rank 3 peer w=00000000000000aa 127.0.0.2:4000 device "
            "eth1 rail 1 socket 2 seq 8: refused: [addr, +64) outside the region");
  EXPECT_EQ(ev[3].error.errc, FabricErrc::kEndpointFailed);
  EXPECT_EQ(ev[3].error.site.seq, 9);
  EXPECT_EQ(ev[2].op, OpType::kFence);
  EXPECT_EQ(ev[2].error.errc, FabricErrc::kEndpointFailed);
  EXPECT_EQ(ev[2].error.site.seq, 8) << "a fence without a seq of its own names the cause's";
}

TEST(FabricFailOutstanding, ALostPeerIsEveryOpsCauseButAFencesIsEndpointFailed) {
  const FabricError cause = Cause(FabricErrc::kTimeout, 7, "no progress for 5000 ms with 3 ops outstanding");
  const std::vector<Event> ev = FailAll(cause, OthersRule::kKeepCauseUnlessRefusal);
  ASSERT_EQ(ev.size(), 4u);
  EXPECT_EQ(ev[0].error.ToString(), cause.ToString());
  EXPECT_EQ(ev[1].error.errc, FabricErrc::kTimeout);
  EXPECT_EQ(ev[1].error.site.seq, 8);
  EXPECT_EQ(ev[1].error.what, cause.what);
  EXPECT_EQ(ev[1].error.site.rail, 1);
  EXPECT_EQ(ev[1].error.site.device, "eth1");
  EXPECT_EQ(ev[1].error.site.rank, 3);
  EXPECT_EQ(ev[3].error.errc, FabricErrc::kTimeout);
  EXPECT_EQ(ev[3].error.site.seq, 9);
  EXPECT_EQ(ev[2].error.errc, FabricErrc::kEndpointFailed);
  EXPECT_EQ(ev[2].error.what, "the endpoint failed earlier: " + cause.ToString());
}

TEST(FabricFailOutstanding, TheVerbsRuleFailsEveryOtherOpAsEndpointFailed) {
  const FabricError cause = Cause(FabricErrc::kPeerClosed, 7, "IBV_WC_RETRY_EXC_ERR");
  const std::vector<Event> ev = FailAll(cause, OthersRule::kEndpointFailed);
  ASSERT_EQ(ev.size(), 4u);
  EXPECT_EQ(ev[0].error.ToString(), cause.ToString());
  for (size_t i : {size_t{1}, size_t{2}, size_t{3}}) {
    EXPECT_EQ(ev[i].error.errc, FabricErrc::kEndpointFailed) << i;
    EXPECT_EQ(ev[i].error.what, "the endpoint failed earlier: " + cause.ToString()) << i;
  }
  EXPECT_EQ(ev[1].error.site.seq, 8);
  EXPECT_EQ(ev[3].error.site.seq, 9);
}

TEST(FabricFailOutstanding, AFenceWithASeqOfItsOwnIsNamedByIt) {
  // The relayed Endpoint numbers its fences: the error names the fence's seq, and a
  // fence is never "the op the cause names", even at the cause's seq.
  const FabricError cause = Cause(FabricErrc::kPeerClosed, 4, "the relay host is gone");
  Event f = FailedOpEvent(cause, {OpType::kFence, 9, 4}, OthersRule::kKeepCauseUnlessRefusal);
  EXPECT_EQ(f.error.errc, FabricErrc::kEndpointFailed);
  EXPECT_EQ(f.error.site.seq, 4);
  f = FailedOpEvent(cause, {OpType::kFence, 9, 6}, OthersRule::kKeepCauseUnlessRefusal);
  EXPECT_EQ(f.error.site.seq, 6);
  EXPECT_EQ(f.op, OpType::kFence);
  EXPECT_EQ(f.cookie, 9u);
}

TEST(FabricFailOutstanding, NoOpsNoEvents) {
  int n = 0;
  FailOutstanding(Cause(FabricErrc::kSystem, -1, "epoll"), {}, OthersRule::kEndpointFailed, [&](Event) { ++n; });
  EXPECT_EQ(n, 0);
}

}  // namespace
}  // namespace railyard::fabric
