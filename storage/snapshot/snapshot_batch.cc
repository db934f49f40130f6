// SnapshotClient's batches (PutBatch, GetBatch): several blobs in flight on one control
// connection. The peer serves a connection's requests one after the other and answers
// each in order, so the client sends the next requests before it has the answers to
// the earlier ones and takes the answers oldest first.
//
// Put, depth 2: alloc(0) alloc(1) | write 0, commit(0) alloc(2) | write 1, commit(1)
// alloc(3) ... : the peer answers alloc(1) and checks commit(0) while blob 0 and then
// blob 1 move. Get: get(0) get(1) | read 0, release(0) get(2) | ... : the peer finds
// (or faults from its swap file) blob 1 while blob 0 moves.
//
// Why this cannot wedge the peer: a request waits there only for an arena slot, and
// this client's own requests before it in the stream hold at most depth - 1 slots (a
// commit or release is sent before the alloc or get that follows depth places later),
// with depth at most half the arena's slots.
#include <algorithm>
#include <deque>
#include <vector>
#include <string>

#include "storage/snapshot/snapshot_client.h"

namespace railyard::storage::snapshot {
namespace {

/// "snapshot put batch, blob 3 (key 17): " + `s`'s message.
Status InBatch(const char* what, size_t index, uint64_t key, const Status& s) {
  return Status(s.code(), std::string("snapshot ") + what + " batch, blob " + std::to_string(index) + " (key " +
                              std::to_string(key) + "): " + s.message());
}

/// Records `s` as the outcome of blob `i`.
void Settle(std::span<BatchBlob> blobs, size_t i, const char* what, const Status& s) {
  blobs[i].attempted = true;
  blobs[i].status = s.ok() ? s : InBatch(what, i, blobs[i].key, s);
}

/// The outcome of a blob whose requests were sent and not all answered when the
/// handle failed on another blob's request (`failed`, which names that request).
Status InFlightWhenFailed(const Status& failed) {
  return Status(failed.code(), "in flight when the connection failed (" + failed.message() +
                                   "): it may or may not have taken effect at the peer");
}

/// The batch's result: the failure of its first failed blob (in batch order, not in
/// the order the failures were seen: a send can fail before an earlier blob's answer).
Status FirstFailure(std::span<const BatchBlob> blobs) {
  for (const BatchBlob& b : blobs) {
    if (!b.status.ok()) return b.status;
  }
  return Status::Ok();
}

}  // namespace

size_t SnapshotClient::BatchDepth() const {
  const uint64_t slots = options_.arenaBytes / options_.blobBytes;
  const int depth = std::clamp(options_.batchDepth, 1, kMaxBatchDepth);
  return static_cast<size_t>(std::max<uint64_t>(1, std::min<uint64_t>(depth, slots / 2)));
}

Status SnapshotClient::CheckBatch(std::span<BatchBlob> blobs, const char* what) const {
  for (BatchBlob& b : blobs) {
    b.found = false;
    b.attempted = false;
    b.status = Status::Ok();
  }
  if (options_.mode != Mode::kPaging) {
    const bool put = std::string(what) == "put";
    return InvalidUsage(std::string("snapshot: ") + (put ? "PutBatch" : "GetBatch") + " on raw kind '" + options_.kind +
                        "' (use " + (put ? "WriteAt" : "ReadAt") + ")");
  }
  RY_RETURN_IF_ERROR(Earlier());
  // The first bad blob carries the refusal; the rest stay not attempted.
  for (size_t i = 0; i < blobs.size(); ++i) {
    BatchBlob& b = blobs[i];
    std::string why;
    if (b.data == nullptr) {
      why = "has no buffer";
    } else if (b.bytes != options_.blobBytes) {
      why = "has " + std::to_string(b.bytes) + " bytes; kind '" + options_.kind + "' holds blobs of " +
            std::to_string(options_.blobBytes) + " bytes";
    }
    if (!why.empty()) {
      b.status = InvalidArgument(std::string("snapshot ") + what + " batch: blob " + std::to_string(i) + " (key " +
                                 std::to_string(b.key) + ") " + why + " (nothing of the batch was sent)");
      return b.status;
    }
  }
  return Status::Ok();
}

Status SnapshotClient::PutBatch(std::span<BatchBlob> blobs) {
  RY_RETURN_IF_ERROR(CheckBatch(blobs, "put"));
  struct Asked {
    size_t index;
    Op op;
  };
  std::deque<Asked> asked;       // requests sent and not yet answered, oldest first
  std::vector<uint64_t> open;    // keys allocated and not yet committed (sent)
  const size_t depth = BatchDepth();
  size_t next = 0;
  auto settle = [&](size_t i, const Status& s) { Settle(blobs, i, "put", s); };
  while (failed_.ok()) {
    // Ask for slots ahead, up to `depth` uncommitted; a key already open waits for
    // its commit to be sent (an alloc of the same key would supersede that slot).
    while (next < blobs.size() && open.size() < depth &&
           std::find(open.begin(), open.end(), blobs[next].key) == open.end()) {
      if (Status s = SendRequest(Op::kAlloc, blobs[next].key, 0); !s.ok()) {
        settle(next, s);
        break;
      }
      open.push_back(blobs[next].key);
      asked.push_back({next++, Op::kAlloc});
    }
    if (asked.empty() || !failed_.ok()) break;
    const Asked a = asked.front();
    asked.pop_front();
    BatchBlob& b = blobs[a.index];
    Response r;
    Status s = Answer(a.op, b.key, &r);
    if (a.op == Op::kCommit) {
      settle(a.index, s);
      continue;
    }
    open.erase(std::find(open.begin(), open.end(), b.key));
    uint64_t sum = 0;
    if (s.ok()) s = WriteSlot(r.offset, b.data, b.bytes, &sum);
    if (s.ok()) s = SendRequest(Op::kCommit, b.key, sum);
    if (s.ok()) {
      asked.push_back({a.index, Op::kCommit});
    } else {
      settle(a.index, s);
    }
  }
  // The handle failed: what was in flight shares its error; the rest was not attempted.
  for (const Asked& a : asked) {
    if (!blobs[a.index].attempted) settle(a.index, InFlightWhenFailed(failed_));
  }
  return FirstFailure(blobs);
}

Status SnapshotClient::GetBatch(std::span<BatchBlob> blobs) {
  RY_RETURN_IF_ERROR(CheckBatch(blobs, "get"));
  const size_t depth = BatchDepth();
  size_t sent = 0, answered = 0;
  auto settle = [&](size_t i, const Status& s) { Settle(blobs, i, "get", s); };
  while (failed_.ok()) {
    // A get is sent once the release of the blob `depth` places before it is.
    while (sent < blobs.size() && sent - answered < depth) {
      if (Status s = SendRequest(Op::kGet, blobs[sent].key, 0); !s.ok()) {
        settle(sent, s);
        break;
      }
      ++sent;
    }
    if (answered == sent || !failed_.ok()) break;
    BatchBlob& b = blobs[answered];
    Response r;
    Status s = Answer(Op::kGet, b.key, &r);
    if (s.ok()) {
      b.found = r.result != Response::kAbsent;
      if (b.found) s = ReadBlob(b.key, r, b.data, b.bytes);
    }
    settle(answered++, s);
  }
  for (size_t i = answered; i < sent; ++i) {
    if (!blobs[i].attempted) settle(i, InFlightWhenFailed(failed_));
  }
  return FirstFailure(blobs);
}

}  // namespace railyard::storage::snapshot
