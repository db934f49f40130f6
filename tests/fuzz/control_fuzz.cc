// Fuzz target `control`: the control socket of a TCP connection as the sender
// reads it (proxy/tcp/tcp_send_comm.h: TcpSendComm::Isend and Test read it with
// PollControl: the RecordHeader, CheckHeader, the fixed size of a CTS or reject
// record, then CtsMatcher::Push): a real send comm per input, its control socket
// and one data socket on socketpairs. The peer's bytes are written to the control
// socket first; then 1..4 sends are posted (tag and size from the input, at most
// 64 KiB from a local buffer) and tested until done or failed.
// Input: byte 0: sends (1 + b % 4), bit 7: close the control socket after the
// bytes; per send a 4-byte tag and a 2-byte size; the rest is the control stream.
// Checks: Isend and Test end in Ok or an error with a message; a finished send
// reports its own size; everything completes or fails within bounded calls.
#include <sys/socket.h>
#include <unistd.h>

#include <vector>

#include "proxy/tcp/tcp_connection.h"
#include "proxy/tcp/tcp_send_comm.h"
#include "tests/fuzz/fuzz_target.h"

namespace p = railyard::proxy;

RAILYARD_FUZZ_TARGET(Control) {
  Input in(data, size);
  const uint8_t head = in.Take<uint8_t>();
  const int nsends = 1 + head % 4;
  struct Send {
    int tag;
    size_t size;
  };
  std::vector<Send> sends;
  for (int i = 0; i < nsends; ++i) {
    const int32_t tag = in.Take<int32_t>();
    sends.push_back({tag, in.Take<uint16_t>()});
  }
  size_t n = 0;
  const uint8_t* ctrl = in.Span(in.left(), &n);
  if (n > (64u << 10)) return false;

  int c[2], d[2];
  FUZZ_CHECK(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, c) == 0);
  FUZZ_CHECK(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, d) == 0);
  int buf = 4 << 20;
  (void)setsockopt(d[0], SOL_SOCKET, SO_SNDBUF, &buf, sizeof buf);
  (void)setsockopt(d[1], SOL_SOCKET, SO_RCVBUF, &buf, sizeof buf);
  FUZZ_CHECK(n == 0 || ::send(c[1], ctrl, n, MSG_NOSIGNAL) == static_cast<ssize_t>(n));
  if (head & 0x80) ::shutdown(c[1], SHUT_WR);

  p::TcpConnection conn;
  conn.control = p::Fd(c[0]);
  conn.data.push_back(p::Fd(d[0]));
  conn.rails.push_back("fz0");
  conn.peer.host = "fuzz-receiver";
  conn.peer.address = "127.0.0.1:1";
  conn.peer.device = "fz0";
  p::TcpOptions options;
  options.nsocks = 1;
  options.nthreads = 1;
  options.timeoutMs = 60000;  // never reached: every call below is bounded
  bool sent = false;
  {
    p::TcpSendComm comm(std::move(conn), options);
    static std::vector<char> payload(64 << 10, 'p');
    std::vector<std::pair<p::Request*, size_t>> inflight;
    bool failed = false;
    for (const Send& s : sends) {
      p::Request* r = nullptr;
      const railyard::Status st = comm.Isend(payload.data(), s.size, s.tag, nullptr, &r);
      if (!st.ok()) {
        FUZZ_CHECK_REFUSAL(st);
        failed = true;
        break;
      }
      if (r != nullptr) inflight.push_back({r, s.size});
    }
    for (const auto& [r, bytes] : inflight) {
      if (failed) break;
      int done = 0;
      for (int pass = 0; pass < 100000 && !done; ++pass) {
        int sizes[1] = {-1};
        const railyard::Status st = comm.Test(r, &done, sizes);
        if (!st.ok()) {
          FUZZ_CHECK_REFUSAL(st);
          failed = true;
          break;
        }
        if (done) {
          FUZZ_CHECK(sizes[0] == static_cast<int>(bytes));
          sent = true;
        }
      }
      FUZZ_CHECK(done || failed);
    }
    comm.Close();
  }
  ::close(c[1]);
  ::close(d[1]);
  return sent;
}
