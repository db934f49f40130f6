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
// Why this cannot wedge the peer: a request waits there only for an arena slot (or for
// a get's fault of its key, which ends by itself), and what would free a slot may be
// this client's own commit or release, queued behind it.
// So the peer never makes a client that holds a slot or a pin wait: when it has no
// slot free now it answers kBusy (wire version 4) and takes nothing, and the client
// asks for that blob again, alone, once all its earlier requests are answered and it
// holds nothing (then it may wait, as any single Put or Get; later blobs wait behind
// it). Several clients batching into a small arena so queue for slots instead of each
// holding one and waiting for another. A commit or release is sent before the alloc
// or get that follows `depth` places later, and depth is at most half the arena's
// slots, so one client alone never holds more than depth - 1 slots when it asks.
#include <algorithm>
#include <deque>
#include <vector>
#include <string>
#include <utility>

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
/// handle failed on another blob's request (`failed`, which names that request); the
/// blob may or may not have been `done` ("stored", "read into its buffer", in part).
Status InFlightWhenFailed(const Status& failed, const char* done) {
  return Status(failed.code(), "in flight when the handle failed (" + failed.message() + "): it may or may not have been " +
                                   done);
}

/// The batch's result: the failure of its first failed blob in batch order (not in the
/// order the failures were seen: a send can fail before an earlier blob's answer), but
/// when the handle failed (`failed`), the first blob failed so, so that a caller
/// retrying a blob's own error does not miss that the handle is dead.
Status FirstFailure(std::span<const BatchBlob> blobs, const Status& failed) {
  const BatchBlob* first = nullptr;
  for (const BatchBlob& b : blobs) {
    if (b.status.ok()) continue;
    if (failed.ok() || b.status.message().find(failed.message()) != std::string::npos) return b.status;
    if (first == nullptr) first = &b;
  }
  return first != nullptr ? first->status : failed;
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
  const bool put = std::string(what) == "put";
  if (options_.mode != Mode::kPaging) {
    return InvalidUsage(std::string("snapshot: ") + (put ? "PutBatch" : "GetBatch") + " on raw kind '" + options_.kind +
                        "' (use " + (put ? "WriteAt" : "ReadAt") + ")");
  }
  RY_RETURN_IF_ERROR(Earlier());
  // The first bad blob carries the refusal; the rest stay not attempted.
  for (size_t i = 0; i < blobs.size(); ++i) {
    BatchBlob& b = blobs[i];
    std::string why;
    Code code = Code::kInvalidArgument;
    if (b.data == nullptr) {
      why = "has no buffer";
    } else if (b.bytes != options_.blobBytes) {
      why = "has " + std::to_string(b.bytes) + " bytes; kind '" + options_.kind + "' holds blobs of " +
            std::to_string(options_.blobBytes) + " bytes";
    } else if (put && std::find(staged_.begin(), staged_.end(), b.key) != staged_.end()) {
      // The batch's alloc of the key would take the staged slot from under its Commit.
      why = "was staged by Alloc on this handle and not committed: commit it first";
      code = Code::kInvalidUsage;
    }
    if (!why.empty()) {
      b.status = Status(code, std::string("snapshot ") + what + " batch: blob " + std::to_string(i) + " (key " +
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
    bool alone = false;  // a deferred blob asked again with nothing else in flight
  };
  std::deque<Asked> asked;       // requests sent and not yet answered, oldest first
  std::vector<uint64_t> open;    // keys allocated and not yet committed (sent)
  std::deque<size_t> deferred;   // blobs answered kBusy: asked again, alone, once nothing is held
  const size_t depth = BatchDepth();
  size_t next = 0;
  auto settle = [&](size_t i, const Status& s) { Settle(blobs, i, "put", s); };
  auto ask = [&](size_t i, bool alone) {
    if (Status s = SendRequest(Op::kAlloc, blobs[i].key, 0); !s.ok()) {
      settle(i, s);
      return;
    }
    open.push_back(blobs[i].key);
    asked.push_back({i, Op::kAlloc, alone});
  };
  while (failed_.ok()) {
    if (deferred.empty()) {
      // Ask for slots ahead, up to `depth` uncommitted; a key already open waits for
      // its commit to be sent (an alloc of the same key would get that same slot, and this
      // blob's bytes would overwrite the earlier one's before its commit was checked).
      while (failed_.ok() && next < blobs.size() && open.size() < depth &&
             std::find(open.begin(), open.end(), blobs[next].key) == open.end()) {
        ask(next++, false);
      }
    } else if (asked.empty()) {
      // Nothing held at the peer: a deferred blob may wait there for a slot now. Later
      // blobs wait until the deferred ones are stored (a key may come again).
      ask(deferred.front(), true);
      deferred.pop_front();
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
    if (s.ok() && r.result == Response::kBusy) {
      ++busyAnswers_;
      if (a.alone) {  // still holding: an Alloc of this handle not committed
        settle(a.index, BusyWhileStaged(Op::kAlloc));
      } else {
        deferred.push_back(a.index);
      }
      continue;
    }
    uint64_t sum = 0;
    if (s.ok()) s = WriteSlot(r.offset, b.data, b.bytes, &sum);  // settle names the blob and key
    if (s.ok()) s = SendRequest(Op::kCommit, b.key, sum);
    if (s.ok()) {
      asked.push_back({a.index, Op::kCommit});
    } else {
      settle(a.index, s);
    }
  }
  // The handle failed: what was in flight shares its error; the rest was not attempted.
  for (const Asked& a : asked) {
    if (!blobs[a.index].attempted) settle(a.index, InFlightWhenFailed(failed_, "stored"));
  }
  return FirstFailure(blobs, failed_);
}

Status SnapshotClient::GetBatch(std::span<BatchBlob> blobs) {
  RY_RETURN_IF_ERROR(CheckBatch(blobs, "get"));
  const size_t depth = BatchDepth();
  std::deque<std::pair<size_t, bool>> asked;  // gets sent and not yet answered (blob, alone), oldest first
  std::deque<size_t> deferred;   // gets answered kBusy: asked again, alone, once nothing is pinned
  size_t next = 0;
  auto settle = [&](size_t i, const Status& s) { Settle(blobs, i, "get", s); };
  auto ask = [&](size_t i, bool alone) {
    if (Status s = SendRequest(Op::kGet, blobs[i].key, 0); !s.ok()) {
      settle(i, s);
      return;
    }
    asked.push_back({i, alone});
  };
  while (failed_.ok()) {
    if (deferred.empty()) {
      // A get is sent once the release of the blob `depth` places before it is.
      while (failed_.ok() && next < blobs.size() && asked.size() < depth) ask(next++, false);
    } else if (asked.empty()) {
      ask(deferred.front(), true);  // nothing pinned at the peer: it may wait for a slot now
      deferred.pop_front();
    }
    if (asked.empty() || !failed_.ok()) break;
    const auto [i, alone] = asked.front();
    asked.pop_front();
    BatchBlob& b = blobs[i];
    Response r;
    Status s = Answer(Op::kGet, b.key, &r);
    if (s.ok() && r.result == Response::kBusy) {
      ++busyAnswers_;
      if (alone) {
        settle(i, BusyWhileStaged(Op::kGet));
      } else {
        deferred.push_back(i);
      }
      continue;
    }
    if (s.ok()) {
      b.found = r.result != Response::kAbsent;
      if (b.found) s = ReadBlob(b.key, r, b.data, b.bytes);
    }
    settle(i, s);
  }
  for (const auto& [i, alone] : asked) {
    if (!blobs[i].attempted) settle(i, InFlightWhenFailed(failed_, "read into its buffer"));
  }
  return FirstFailure(blobs, failed_);
}

}  // namespace railyard::storage::snapshot
