// Fuzz target `chunk_stream`: the data sockets of one TCP connection as the
// receiver reads them (proxy/tcp/tcp_chunk_reader.h ChunkReader::ReadSome, one
// reader per socket over a socketpair, into one RecvTable): chunk headers checked
// by CheckHeader and claimed with RecvTable::Claim, payloads received straight into
// the posted buffer between BeginWrite and EndWrite (the claim API of
// proxy/protocol/claim_ledger.h), the next header read ahead with a payload's end. Complete receives are released and reposted, as test() does, so a
// buffer can stop being posted while another socket is inside a chunk for it.
// Input: the posting plan (PostedBuffers), one byte of read budget (x 64 bytes),
// then write operations, each a byte (bit 0: socket 0 or 1; bit 1: close that
// socket's sending side afterwards), a 2-byte length and that many bytes, sent on
// that socket; after each operation both readers read what they can. The bytes
// each socket carries are walked as the reader walks them (header + len) and
// chunk header addresses are offsets from the arena (added with wrap-around).
// Checks: every reader call ends in progress, a clean EOF or an error with a
// message (an error ends the input: the comm is poisoned); no byte lands outside
// a posted buffer that is still posted (ASan poison, or the canary without ASan):
// a buffer is released the moment its receive completes, so this is the guarantee
// that no byte lands after the receive completed (issue 9 item 1; the regression
// regressions/chunk_stream/issue9-item1-* is the case that used to break it).
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <memory>
#include <vector>

#include "proxy/tcp/tcp_chunk_reader.h"
#include "tests/fuzz/fuzz_target.h"
#include "tests/fuzz/posted_buffers.h"

namespace p = railyard::proxy;

namespace {

struct Op {
  int socket = 0;
  bool close = false;
  size_t from = 0, len = 0;  ///< slice of that socket's stream
};

/// Adds the arena base to the addr of every chunk header in `s`, found as the
/// reader finds them; stops at the first header that is not a chunk.
void Relocate(std::vector<uint8_t>& s, uint64_t base) {
  for (size_t at = 0; at + sizeof(p::ChunkHeader) <= s.size();) {
    p::ChunkHeader h;
    std::memcpy(&h, s.data() + at, sizeof h);
    if (h.header.kind != static_cast<uint16_t>(p::RecordKind::kChunk)) return;
    h.addr += base;
    std::memcpy(s.data() + at, &h, sizeof h);
    at += sizeof h + h.len;
  }
}

}  // namespace

RAILYARD_FUZZ_TARGET(ChunkStream) {
  if (size > (128u << 10)) return false;  // stays inside the socket buffers
  Input in(data, size);
  PostedBuffers posted(in);
  const size_t budget = 64 * (1 + size_t{in.Take<uint8_t>()});
  std::array<std::vector<uint8_t>, 2> streams;
  std::vector<Op> ops;
  while (in.left() > 0) {
    const uint8_t sel = in.Take<uint8_t>();
    size_t got = 0;
    const uint8_t* d = in.Span(in.Take<uint16_t>(), &got);
    Op op{sel & 1, (sel & 2) != 0, streams[sel & 1].size(), got};
    streams[static_cast<size_t>(op.socket)].insert(streams[static_cast<size_t>(op.socket)].end(), d, d + got);
    ops.push_back(op);
  }
  for (auto& s : streams) Relocate(s, posted.ArenaBase());

  std::array<int, 2> tx{}, rx{};
  std::array<std::unique_ptr<p::ChunkReader>, 2> readers;
  std::array<bool, 2> shut{}, eof{};
  std::array<size_t, 2> read{};
  for (int i = 0; i < 2; ++i) {
    int fds[2];
    FUZZ_CHECK(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) == 0);
    int buf = 1 << 20;
    (void)setsockopt(fds[0], SOL_SOCKET, SO_SNDBUF, &buf, sizeof buf);
    (void)setsockopt(fds[1], SOL_SOCKET, SO_RCVBUF, &buf, sizeof buf);
    tx[i] = fds[0];
    rx[i] = fds[1];
    readers[i] = std::make_unique<p::ChunkReader>(rx[i], "data socket " + std::to_string(i + 1) + " on rail fz0 from fuzzer",
                                                  "fuzzer/127.0.0.1:1");
  }
  bool failed = false;
  // Reads what socket i has; false once the comm is failed.
  auto drain = [&](int i) {
    for (int pass = 0; pass < 4096 && !eof[i]; ++pass) {
      size_t bytes = 0;
      bool e = false;
      const railyard::Status st = readers[i]->ReadSome(posted.Table(), budget, &bytes, &e);
      posted.ReleaseDone();
      posted.CheckCanary();
      if (!st.ok()) {
        FUZZ_CHECK_REFUSAL(st);
        return false;
      }
      read[i] += bytes;
      FUZZ_CHECK(read[i] <= streams[i].size());
      if (e) {
        FUZZ_CHECK(shut[i] && !readers[i]->open());
        eof[i] = true;
      }
      if (bytes == 0) break;  // would block
    }
    return true;
  };
  for (const Op& op : ops) {
    const int i = op.socket;
    if (shut[i]) continue;  // nothing more on a closed socket
    for (size_t off = 0; off < op.len;) {
      const ssize_t w = ::send(tx[i], streams[i].data() + op.from + off, op.len - off, MSG_DONTWAIT | MSG_NOSIGNAL);
      FUZZ_CHECK(w > 0);  // the whole input fits the socket buffer
      off += static_cast<size_t>(w);
    }
    if (op.close) {
      ::shutdown(tx[i], SHUT_WR);
      shut[i] = true;
    }
    if (!drain(0) || !drain(1)) {
      failed = true;
      break;
    }
  }
  if (!failed) {
    for (int i = 0; i < 2; ++i) {
      if (!shut[i]) ::shutdown(tx[i], SHUT_WR);
      shut[i] = true;
    }
    failed = !drain(0) || !drain(1);
  }
  for (int i = 0; i < 2; ++i) {
    ::close(tx[i]);
    ::close(rx[i]);
  }
  return !failed && posted.Completed() > 0;
}
