// Fuzz target `records`: the protocol records of proxy/wire.h as a peer streams
// them, each framed the way the TCP comms frame them (the 8-byte RecordHeader,
// CheckHeader, then the fixed size of its kind; an unknown kind ends the stream):
//   - CTS records go through CtsMatcher::Push, then sends are matched against them
//     with CtsMatcher::Match (the sender's control path);
//   - chunk headers go through RecvTable::Claim against posted, registered
//     buffers; an accepted chunk's payload is written where the claim says, between
//     BeginWrite and EndWrite (ASan
//     catches a byte outside the arena, the harness one outside the posted
//     buffer) and accounted with EndWrite; complete receives are released
//     and reposted, as test() does;
//   - reject records are NUL-terminated and read as text (the connector's path);
//   - hello and relay records are framed and skipped here (the `listener` and
//     `relay_record` targets decode them).
// Input: the posting plan (PostedBuffers), then records. A chunk header's addr is
// an offset from the arena (added with wrap-around, so any address is reachable).
#include <string>

#include "proxy/protocol/cts_matcher.h"
#include "proxy/wire.h"
#include "tests/fuzz/fuzz_target.h"
#include "tests/fuzz/posted_buffers.h"

namespace p = railyard::proxy;

namespace {

size_t RecordBytes(uint16_t kind) {
  switch (static_cast<p::RecordKind>(kind)) {
    case p::RecordKind::kHello: return sizeof(p::HelloRecord);
    case p::RecordKind::kReject: return sizeof(p::RejectRecord);
    case p::RecordKind::kCts: return sizeof(p::CtsRecord);
    case p::RecordKind::kChunk: return sizeof(p::ChunkHeader);
    case p::RecordKind::kRelay: return sizeof(p::RelayRecord);
    // The fabric comms' records (proxy/nccl/nccl_records.h) travel as fabric Sends and
    // Writes, never on this wire: the legacy comms refuse them as unknown kinds.
    case p::RecordKind::kFabricListen:
    case p::RecordKind::kFabricHello:
    case p::RecordKind::kFabricCts:
    case p::RecordKind::kFabricClose: return 0;
  }
  return 0;
}

}  // namespace

RAILYARD_FUZZ_TARGET(Records) {
  Input in(data, size);
  PostedBuffers posted(in);
  p::CtsMatcher matcher;
  bool accepted = false;
  while (in.left() >= sizeof(p::RecordHeader)) {
    alignas(8) char rec[sizeof(p::CtsRecord)] = {};
    in.Bytes(rec, sizeof(p::RecordHeader));
    p::RecordHeader h;
    std::memcpy(&h, rec, sizeof h);
    railyard::Status s = p::CheckHeader(h, "record");
    if (!s.ok()) {
      FUZZ_CHECK_REFUSAL(s);
      return accepted;
    }
    const size_t full = RecordBytes(h.kind);
    if (full == 0) return accepted;  // the comms refuse an unknown kind and stop
    in.Bytes(rec + sizeof h, full - sizeof h);
    switch (static_cast<p::RecordKind>(h.kind)) {
      case p::RecordKind::kCts: {
        p::CtsRecord cts;
        std::memcpy(&cts, rec, sizeof cts);
        s = matcher.Push(cts);
        if (!s.ok()) {
          FUZZ_CHECK_REFUSAL(s);
          break;
        }
        accepted = true;
        // Send once per announced buffer, sized and tagged from the record.
        for (uint32_t i = 0; i < cts.n; ++i) {
          p::SendMatch m;
          bool found = false;
          const railyard::Status ms = matcher.Match(cts.entries[i].tag, cts.entries[i].size / 2, &m, &found);
          if (!ms.ok()) FUZZ_CHECK_REFUSAL(ms);
          if (found) FUZZ_CHECK(m.slot < static_cast<uint32_t>(p::kMaxRecvs) && m.entry.size >= cts.entries[i].size / 2);
        }
        FUZZ_CHECK(matcher.Pending() <= p::CtsMatcher::kMaxPending);
        (void)matcher.OldestUnmatchedTags();
        break;
      }
      case p::RecordKind::kChunk: {
        p::ChunkHeader c;
        std::memcpy(&c, rec, sizeof c);
        c.addr += posted.ArenaBase();
        p::RecvTable::ChunkClaim claim;
        s = posted.Table().Claim(c, &claim);
        if (!s.ok()) {
          FUZZ_CHECK_REFUSAL(s);
          break;
        }
        posted.CheckInside(c.seq, c.slot, claim.Next(), claim.len);
        if (claim.len > 0) {  // a zero-length chunk has no payload to write (ChunkReader writes none)
          p::RecvTable::WritePin pin;
          s = posted.Table().BeginWrite(claim, &pin);
          FUZZ_CHECK(s.ok());  // nothing was released between the claim and the write
          std::memset(claim.Next(), 0xa5, claim.len);  // the payload lands
        }
        s = posted.Table().EndWrite(&claim, claim.len);
        if (!s.ok()) {
          FUZZ_CHECK_REFUSAL(s);
          break;
        }
        accepted = true;
        posted.ReleaseDone();
        break;
      }
      case p::RecordKind::kReject: {
        p::RejectRecord r;
        std::memcpy(&r, rec, sizeof r);
        r.reason[sizeof r.reason - 1] = '\0';
        FUZZ_CHECK(std::string(r.reason).size() < sizeof r.reason);
        break;
      }
      case p::RecordKind::kHello:
      case p::RecordKind::kRelay:
      case p::RecordKind::kFabricListen:
      case p::RecordKind::kFabricHello:
      case p::RecordKind::kFabricCts:
      case p::RecordKind::kFabricClose:
        break;
    }
  }
  (void)posted.Table().DescribeOldest();
  return accepted;
}
