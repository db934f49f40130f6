// Fuzz target `chunk_stream`: one TCP data socket's bytes as the receiver reads
// them (proxy/tcp/tcp_chunk_reader.h ChunkReader::ReadSome over a socketpair):
// chunk headers checked by CheckHeader and RecvTable::Validate, payloads received
// straight into the posted buffer, the next header read ahead with a payload's
// end, RecvTable::Land per chunk. Complete receives are released and reposted,
// as test() does.
// Input: the posting plan (PostedBuffers), one byte of read budget (x 64 bytes,
// so reads stop at odd places), then the stream. A chunk header's addr is an
// offset from the arena (added with wrap-around); the harness finds headers by
// walking header + len as the reader does, and the walk stops at the first
// header that is not a chunk. Checks: the reader ends with a clean EOF or an
// error with a message, accounts every byte it read, and writes no byte outside
// a posted buffer (under ASan the rest of the arena is poisoned).
#include <sys/socket.h>
#include <unistd.h>

#include <vector>

#include "proxy/tcp/tcp_chunk_reader.h"
#include "tests/fuzz/fuzz_target.h"
#include "tests/fuzz/posted_buffers.h"

namespace p = railyard::proxy;

RAILYARD_FUZZ_TARGET(ChunkStream) {
  if (size > (128u << 10)) return false;  // stays inside one socket buffer
  Input in(data, size);
  PostedBuffers posted(in);
  const size_t budget = 64 * (1 + size_t{in.Take<uint8_t>()});
  size_t n = 0;
  const uint8_t* s = in.Span(in.left(), &n);
  std::vector<uint8_t> stream(s, s + n);
  // Relocate header addresses the way the reader will find the headers.
  for (size_t at = 0; at + sizeof(p::ChunkHeader) <= stream.size();) {
    p::ChunkHeader h;
    std::memcpy(&h, stream.data() + at, sizeof h);
    if (h.header.kind != static_cast<uint16_t>(p::RecordKind::kChunk)) break;
    h.addr += posted.ArenaBase();
    std::memcpy(stream.data() + at, &h, sizeof h);
    at += sizeof h + h.len;
  }
  int fds[2];
  FUZZ_CHECK(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) == 0);
  int buf = 1 << 20;
  (void)setsockopt(fds[0], SOL_SOCKET, SO_SNDBUF, &buf, sizeof buf);
  (void)setsockopt(fds[1], SOL_SOCKET, SO_RCVBUF, &buf, sizeof buf);
  for (size_t off = 0; off < stream.size();) {
    const ssize_t w = ::send(fds[0], stream.data() + off, stream.size() - off, MSG_DONTWAIT | MSG_NOSIGNAL);
    FUZZ_CHECK(w > 0);  // the whole input fits the socket buffer
    off += static_cast<size_t>(w);
  }
  ::shutdown(fds[0], SHUT_WR);
  p::ChunkReader reader(fds[1], "data socket 1 on rail fz0 from fuzzer", "fuzzer/127.0.0.1:1");
  bool ok = false;
  size_t total = 0;
  for (int pass = 0; pass < 100000; ++pass) {
    size_t bytes = 0;
    bool eof = false;
    const railyard::Status st = reader.ReadSome(posted.Table(), budget, &bytes, &eof);
    if (!st.ok()) {
      FUZZ_CHECK_REFUSAL(st);
      break;
    }
    total += bytes;
    posted.ReleaseDone();
    FUZZ_CHECK(total <= stream.size());
    if (eof) {
      FUZZ_CHECK(!reader.open() && total == stream.size());
      ok = true;
      break;
    }
    FUZZ_CHECK(bytes > 0);  // the writer has shut down: every call makes progress or ends
  }
  ::close(fds[0]);
  ::close(fds[1]);
  return ok;
}
