// Fuzz target `snapshot_wire`: the snapshot tier's control channel
// (storage/snapshot/snapshot_wire.h) as the serving peer and the client read it:
//   - Header::Decode on the first 64 bytes (the handshake header, the first bytes
//     a snapshot peer reads from a new client);
//   - Request::Decode on the 32 bytes after it (paging requests at the peer);
//   - Response::DecodeFixed on the 32 bytes after those (responses at the client).
// Invariants: a refusal has a message and leaves the output untouched; an
// accepted header or request re-encodes to exactly its input bytes (a refused
// field never hides in a byte the decoder skipped); an accepted header names a
// valid kind, a known mode (or is a discovery request: mode list, nothing else set), blob bytes > 0, arena bytes a multiple of them and
// 1..kMaxAddressBytes of address (the client's timeout, bytes 60..63, may be anything:
// the re-encoding covers it); an accepted response re-encodes (with a message
// of the announced length) to the same fixed bytes.
#include <array>
#include <string>

#include "storage/snapshot/snapshot_wire.h"
#include "tests/fuzz/fuzz_target.h"

namespace s = railyard::storage::snapshot;

namespace {

bool Header(const std::array<uint8_t, s::Header::kBytes>& b) {
  s::Header out;
  out.kind = "sentinel";
  out.arenaBytes = 7;
  out.blobBytes = 7;
  out.addressBytes = 7;
  out.timeoutMs = 7;
  const railyard::Status st = s::Header::Decode(b, &out);
  if (!st.ok()) {
    FUZZ_CHECK_REFUSAL(st);
    FUZZ_CHECK(out.kind == "sentinel" && out.arenaBytes == 7 && out.blobBytes == 7 && out.addressBytes == 7 &&
               out.timeoutMs == 7 && out.mode == s::Mode::kPaging && out.version == s::Header::kVersion);
    return false;
  }
  if (out.mode == s::Mode::kList) {
    // A discovery request: no kind, no sizes, no address.
    FUZZ_CHECK(out.kind.empty() && out.blobBytes == 0 && out.arenaBytes == 0 && out.addressBytes == 0);
    FUZZ_CHECK(out.Encode() == b);
    return true;
  }
  FUZZ_CHECK(s::ValidKind(out.kind) && (out.mode == s::Mode::kRaw || out.mode == s::Mode::kPaging));
  FUZZ_CHECK(out.blobBytes > 0 && out.arenaBytes > 0 && out.arenaBytes % out.blobBytes == 0);
  FUZZ_CHECK(out.addressBytes >= 1 && out.addressBytes <= s::Header::kMaxAddressBytes);
  FUZZ_CHECK(out.Encode() == b);
  return true;
}

bool Request(const std::array<uint8_t, s::Request::kBytes>& b) {
  s::Request out;
  out.op = s::Op::kRemove;
  out.key = 0x1111;
  out.checksum = 0x2222;
  const railyard::Status st = s::Request::Decode(b, &out);
  if (!st.ok()) {
    FUZZ_CHECK_REFUSAL(st);
    FUZZ_CHECK(out.op == s::Op::kRemove && out.key == 0x1111 && out.checksum == 0x2222);
    return false;
  }
  FUZZ_CHECK(std::string(s::OpName(out.op)) != "unknown");
  FUZZ_CHECK(out.Encode() == b);
  return true;
}

bool Response(const std::array<uint8_t, s::Response::kBytes>& b) {
  s::Response out;
  out.result = s::Response::kAbsent;
  out.code = 3;
  out.offset = 0x3333;
  out.checksum = 0x4444;
  uint32_t messageBytes = 0x5555;
  const railyard::Status st = s::Response::DecodeFixed(b, &out, &messageBytes);
  if (!st.ok()) {
    FUZZ_CHECK_REFUSAL(st);
    FUZZ_CHECK(out.result == s::Response::kAbsent && out.code == 3 && out.offset == 0x3333 && out.checksum == 0x4444 &&
               messageBytes == 0x5555);
    return false;
  }
  FUZZ_CHECK(messageBytes <= s::Reply::kMaxMessageBytes);
  FUZZ_CHECK((out.result == s::Response::kError) == (out.code != 0));
  FUZZ_CHECK(out.result <= s::Response::kQueued);
  // Wire version 3: a ready record of a faulting get carries only its byte count.
  if (out.result == s::Response::kReady) FUZZ_CHECK(out.checksum == 0 && messageBytes == 0);
  if (out.result == s::Response::kBusy || out.result == s::Response::kQueued) {
    FUZZ_CHECK(out.offset == 0 && out.checksum == 0 && messageBytes == 0);
  }
  out.message.assign(messageBytes, 'm');
  const std::vector<uint8_t> again = out.Encode();
  FUZZ_CHECK(again.size() == s::Response::kBytes + messageBytes);
  FUZZ_CHECK(std::memcmp(again.data(), b.data(), s::Response::kBytes) == 0);
  return true;
}

}  // namespace

RAILYARD_FUZZ_TARGET(SnapshotWire) {
  Input in(data, size);
  std::array<uint8_t, s::Header::kBytes> header;
  in.Bytes(header.data(), header.size());
  std::array<uint8_t, s::Request::kBytes> request;
  in.Bytes(request.data(), request.size());
  std::array<uint8_t, s::Response::kBytes> response;
  in.Bytes(response.data(), response.size());
  bool accepted = Header(header);
  accepted |= Request(request);
  accepted |= Response(response);
  return accepted;
}
