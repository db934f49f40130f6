// Memory the two ends of a verbs connection write into each other, and how the
// receiver-posted-buffer protocol (proxy/protocol) maps onto RDMA:
//
//  - CTS FIFO (sender's memory, kMaxRequests FifoSlots): irecv on the receiver
//    RDMA-WRITEs the CtsRecord of receive `seq` into slot seq % kMaxRequests, with
//    the hardware rkeys of every buffer on every rail. The sender polls the slot's
//    stamp (seq + 1, written in both its first and last word) and feeds CtsMatcher.
//  - Completion rings (receiver's memory, ringEntries ChunkHeaders per QP): for
//    each part of a message on QP q, the sender RDMA-WRITEs a ChunkHeader into
//    ring[q][i], then the payload with RDMA WRITE, the last WR being WRITE WITH IMM
//    carrying i. RC delivers a QP's writes in order, so when the receiver sees the
//    immediate, the header and payload have landed; it checks the header against
//    the posted buffer and counts the bytes (RecvTable::ClaimLanded).
//  - Receive WRs: the receiver keeps ringEntries receive WRs posted on every QP and
//    re-posts one per immediate consumed. A part is only sent against a posted
//    receive buffer, and at most kMaxRequests x kMaxRecvs buffers are posted, so a
//    QP never carries more immediates than it has receive WRs: no RNR, ever.
#pragma once

#include <cstdint>

#include "proxy/protocol/recv_table.h"
#include "proxy/verbs/qp_record.h"
#include "proxy/wire.h"

namespace railyard::proxy::verbs {

/// One CTS FIFO slot (sender's memory, written by the receiver).
struct alignas(64) FifoSlot {
  uint64_t stamp;                                 ///< seq + 1 once written (0 = empty)
  CtsRecord rec;                                  ///< the receive, as RecvTable::Post announced it
  uint32_t hcaRkey[kMaxRecvs][kMaxConnRails];     ///< buffer i's rkey on the receiver's rail r
  uint64_t stampEnd;                              ///< equal to stamp: the whole slot has landed
};
static_assert(sizeof(FifoSlot) % 64 == 0);

/// Entries of each QP's completion ring: one per buffer that can be posted at once.
inline constexpr uint32_t kRingEntries = RecvTable::kMaxRequests * kMaxRecvs;

/// Send WRs a QP may have queued. The sender keeps at most this many WRs posted per QP
/// (payloads are split into WRs of IbPort::maxMsgBytes, so a 1 GiB message is 256 WRs)
/// and queues the rest until completions free room.
inline constexpr uint32_t kMaxSendWr = 1024;

/// Heartbeats: behind the completion rings sits one 8-byte word per QP. After every
/// payload WR the sender RDMA-WRITEs (8 bytes, inline when allowed) the count of
/// payload WRs it has posted on that QP into the QP's word. RC keeps a QP's writes in
/// order, so the word moves as the data lands, with no CPU on the sender: the
/// receiver's no-progress timeout sees a long message advancing before its
/// immediate arrives, and fires only when data stops.
inline constexpr uint32_t kHeartbeatBytes = 8 * kMaxConnQps;
/// Sources of the heartbeat writes sent without inline, per QP: a ring as deep as
/// the send queue, so a slot is rewritten only after its WR has executed.
inline constexpr uint32_t kHeartbeatSlots = kMaxSendWr;

}  // namespace railyard::proxy::verbs
