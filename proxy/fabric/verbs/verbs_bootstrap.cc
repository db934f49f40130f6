#include "proxy/fabric/verbs/verbs_bootstrap.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>

namespace railyard::fabric::verbs {

Status BootstrapChannel::Connect(uint32_t ipv4, uint16_t port, std::chrono::steady_clock::time_point redialUntil) {
  tcp::DialPlan plan;
  plan.local.sin_family = AF_INET;  // any address, an ephemeral port: the kernel picks the route
  plan.remote.sin_family = AF_INET;
  plan.remote.sin_addr.s_addr = ipv4;
  plan.remote.sin_port = htons(port);
  plan.redialUntil = redialUntil;
  dialer_.emplace(plan);
  const FabricError e = dialer_->Start(&fd_);
  if (!e.ok()) return SystemError("verbs bootstrap: " + e.what);
  return Status::Ok();
}

Status BootstrapChannel::Connected(bool* done) {
  *done = false;
  if (dialer_.has_value() && dialer_->Waiting()) {
    if (!dialer_->Due()) return Status::Ok();
    const FabricError e = dialer_->Start(&fd_);
    if (!e.ok()) return SystemError("verbs bootstrap: " + e.what);
    if (!fd_.valid()) return Status::Ok();  // refused in the call (loopback): a redial waits again
  }
  pollfd p{fd_.get(), POLLOUT, 0};
  const int n = ::poll(&p, 1, 0);
  if (n < 0) return errno == EINTR ? Status::Ok() : SystemError("verbs bootstrap: poll: " + proxy::ErrnoText(errno));
  if (n == 0) return Status::Ok();
  int err = 0;
  socklen_t len = sizeof err;
  if (::getsockopt(fd_.get(), SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
  if (err != 0) {
    if (!dialer_.has_value()) return SystemError("verbs bootstrap: connect: " + proxy::ErrnoText(err));
    const FabricError e = dialer_->Failed(err);
    if (!e.ok()) return SystemError("verbs bootstrap: " + e.what);
    fd_ = proxy::Fd();  // refused: closed until the redial is due
    return Status::Ok();
  }
  (void)proxy::TuneTcpSocket(fd_.get(), 0);
  *done = true;
  return Status::Ok();
}

void BootstrapChannel::Queue(const Handshake& h) {
  const std::vector<char> set = proxy::verbs::EncodeQpSet(h.qps);
  out_.resize(sizeof h.hello + set.size());
  std::memcpy(out_.data(), &h.hello, sizeof h.hello);
  std::memcpy(out_.data() + sizeof h.hello, set.data(), set.size());
  sent_ = 0;
}

Status BootstrapChannel::Flush(bool* done) {
  *done = false;
  if (sent_ < out_.size()) {
    RY_RETURN_IF_ERROR(proxy::TrySend(fd_.get(), out_.data() + sent_, out_.size() - sent_, &sent_));
  }
  *done = sent_ == out_.size();
  return Status::Ok();
}

Status BootstrapChannel::Read(uint16_t role, int expectedQps, Handshake* out, bool* done) {
  *done = false;
  if (helloGot_ < sizeof hello_) {
    size_t got = 0;
    bool closed = false;
    RY_RETURN_IF_ERROR(proxy::TryRecv(fd_.get(), hello_ + helloGot_, sizeof hello_ - helloGot_, &got, &closed));
    helloGot_ += got;
    if (closed && helloGot_ < sizeof hello_) return SystemError("verbs bootstrap: the peer closed the connection");
    if (helloGot_ < sizeof hello_) return Status::Ok();
    std::memcpy(&out->hello, hello_, sizeof hello_);
    RY_RETURN_IF_ERROR(CheckHello(out->hello, role));
  }
  bool whole = false;
  RY_RETURN_IF_ERROR(reader_.Read(fd_.get(), "the peer", &whole));
  if (!whole) return Status::Ok();
  const std::vector<char>& b = reader_.bytes();
  RY_RETURN_IF_ERROR(proxy::verbs::DecodeQpSet(b.data(), b.size(), expectedQps, &out->qps));
  *done = true;
  return Status::Ok();
}

void BootstrapChannel::Abandon() {
  if (fd_.valid()) (void)::send(fd_.get(), &kAbandonByte, 1, MSG_DONTWAIT | MSG_NOSIGNAL);
}

Status BootstrapChannel::WatchLiveness(int timeoutMs) {
  Status s = proxy::SetPeerLiveness(fd_.get(), timeoutMs);
  return s.ok() ? s : SystemError("verbs bootstrap: " + s.message());
}

std::string BootstrapChannel::LostText(int timeoutMs) {
  return "the peer's host stopped answering for about " + std::to_string(timeoutMs) +
         " ms (RAILYARD_TIMEOUT_MS; keepalive probes on the bootstrap connection unanswered: a cut cable or a dead "
         "host)";
}

bool BootstrapChannel::LostMeansDead(std::chrono::steady_clock::time_point lastCompletion,
                                     std::chrono::steady_clock::time_point now, int timeoutMs) {
  if (lastCompletion == std::chrono::steady_clock::time_point{}) return true;
  return now - lastCompletion >= std::chrono::milliseconds(timeoutMs);
}

std::string BootstrapChannel::StarvedText(const std::string& peer, int64_t sinceCompletionMs) {
  return "verbs connection with " + peer + ": the keepalive on its bootstrap connection timed out (here or at the "
         "peer, which then resets it), but an RDMA completion came " + std::to_string(sinceCompletionMs) +
         " ms ago: the link is saturated, not cut; the connection goes on, a dead peer now noticed only with ops "
         "under way (RAILYARD_TIMEOUT_MS), its process exit only by its ops' errors";
}

std::string BootstrapChannel::ProbeFailedText(const std::string& probe, const std::string& outcome) {
  return "a liveness probe (" + probe + "; the bootstrap connection's keepalive was outvoted earlier) " + outcome +
         ": the peer's host or process is gone";
}

Status BootstrapChannel::Watch(bool* closed, bool* abandoned, bool* lost, bool* reset) {
  *closed = false;
  if (abandoned != nullptr) *abandoned = false;
  if (lost != nullptr) *lost = false;
  if (reset != nullptr) *reset = false;
  char byte = 0;
  const ssize_t n = ::recv(fd_.get(), &byte, 1, MSG_DONTWAIT);
  if (n == 0) {
    *closed = true;
    return Status::Ok();
  }
  if (n > 0 && byte == kAbandonByte && abandoned != nullptr) {
    *abandoned = true;
    *closed = true;
    return Status::Ok();
  }
  if (n > 0) return InvalidArgument("verbs bootstrap: the peer sent bytes after the handshake");
  if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return Status::Ok();
  if (errno == ECONNRESET || errno == EPIPE) {
    *closed = true;
    if (reset != nullptr) *reset = true;
    return Status::Ok();
  }
  if (proxy::IsPeerUnreachable(errno) && lost != nullptr) {
    *lost = true;
    *closed = true;
    return Status::Ok();
  }
  return SystemError("verbs bootstrap: " + proxy::ErrnoText(errno));
}

}  // namespace railyard::fabric::verbs
