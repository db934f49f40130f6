#include "proxy/fabric/verbs/verbs_worker.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <random>

#include "env/log.h"
#include "proxy/fabric/verbs/verbs_endpoint.h"
#include "proxy/fabric/verbs/verbs_target.h"

namespace railyard::fabric::verbs {

namespace {
uint64_t RandomId() {
  std::random_device rd;
  uint64_t id = 0;
  while (id == 0) id = (static_cast<uint64_t>(rd()) << 32) ^ rd();
  return id;
}
}  // namespace

VerbsWorker::VerbsWorker(VerbsDomain* domain) : domain_(domain) {}

Status VerbsWorker::Create(VerbsDomain* domain, std::unique_ptr<Worker>* out) {
  std::unique_ptr<VerbsWorker> w(new VerbsWorker(domain));
  std::string addr = domain->options().bootstrapAddress;
  if (addr.empty()) addr = domain->rails()[0].address;
  if (addr.empty()) addr = "127.0.0.1";
  const uint16_t fixedPort = domain->options().bootstrapPort;
  const std::string where =
      "verbs fabric bootstrap listener on " + addr + (fixedPort != 0 ? ":" + std::to_string(fixedPort) : std::string());
  w->listener_ = proxy::Fd(::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!w->listener_.valid()) return SystemError(where + ": socket: " + proxy::ErrnoText(errno));
  if (domain->options().bootstrapPort != 0) {
    int one = 1;  // a relay host's fixed port, taken again while the previous holder's connections linger
    ::setsockopt(w->listener_.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  }
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(domain->options().bootstrapPort);
  if (inet_pton(AF_INET, addr.c_str(), &sa.sin_addr) != 1) return InvalidArgument(where + ": not an IPv4 address");
  if (::bind(w->listener_.get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) {
    return SystemError(where + ": bind: " + proxy::ErrnoText(errno));
  }
  if (::listen(w->listener_.get(), 128) != 0) return SystemError(where + ": listen: " + proxy::ErrnoText(errno));
  socklen_t len = sizeof sa;
  if (::getsockname(w->listener_.get(), reinterpret_cast<sockaddr*>(&sa), &len) != 0) {
    return SystemError(where + ": getsockname: " + proxy::ErrnoText(errno));
  }
  w->address_.workerId = RandomId();
  w->address_.ipv4 = sa.sin_addr.s_addr;
  w->address_.port = ntohs(sa.sin_port);
  w->address_.rails = static_cast<uint16_t>(domain->rails().size());
  *out = std::move(w);
  return Status::Ok();
}

VerbsWorker::~VerbsWorker() {
  if (!endpoints_.empty()) {
    RY_WARN("verbs fabric worker destroyed with %zu endpoints still alive (destroy them first)", endpoints_.size());
  }
  targets_.clear();
}

Status VerbsWorker::Connect(std::span<const uint8_t> peerAddress, std::unique_ptr<Endpoint>* out) {
  VerbsAddress peer;
  RY_RETURN_IF_ERROR(VerbsAddress::Unpack(peerAddress, &peer));
  std::unique_ptr<VerbsEndpoint> ep;
  RY_RETURN_IF_ERROR(VerbsEndpoint::Create(this, peer, nextConnection_++, &ep));
  endpoints_.push_back(ep.get());
  *out = std::move(ep);
  return Status::Ok();
}

void VerbsWorker::Detach(VerbsEndpoint* ep) {
  endpoints_.erase(std::remove(endpoints_.begin(), endpoints_.end(), ep), endpoints_.end());
}

void VerbsWorker::AcceptNew() {
  for (int i = 0; i < 16; ++i) {
    const int fd = ::accept4(listener_.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) return;  // EAGAIN, or a transient error: the next Progress tries again
    (void)proxy::TuneTcpSocket(fd, 0);
    targets_.push_back(std::make_unique<VerbsTarget>(this, proxy::Fd(fd)));
  }
}

size_t VerbsWorker::Progress(std::vector<Event>* events) {
  AcceptNew();
  for (auto it = targets_.begin(); it != targets_.end();) {
    if ((*it)->Progress()) {
      ++it;
    } else {
      it = targets_.erase(it);
    }
  }
  // An Endpoint's Progress may not destroy Endpoints; iterate over a copy anyway.
  const std::vector<VerbsEndpoint*> eps = endpoints_;
  for (VerbsEndpoint* ep : eps) ep->Progress();
  const size_t n = events_.size();
  for (Event& e : events_) events->push_back(std::move(e));
  events_.clear();
  return n;
}

}  // namespace railyard::fabric::verbs
