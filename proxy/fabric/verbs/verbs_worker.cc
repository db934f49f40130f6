#include "proxy/fabric/verbs/verbs_worker.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/epoll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <optional>
#include <random>

#include "env/log.h"
#include "proxy/fabric/random_id.h"
#include "proxy/fabric/verbs/verbs_endpoint.h"
#include "proxy/fabric/verbs/verbs_target.h"

namespace railyard::fabric::verbs {

VerbsWorker::VerbsWorker(VerbsDomain* domain) : domain_(domain) {}

Status VerbsWorker::Create(VerbsDomain* domain, std::unique_ptr<Worker>* out) {
  std::unique_ptr<VerbsWorker> w(new VerbsWorker(domain));
  RY_RETURN_IF_ERROR(AcceptSources::Parse(domain->options().acceptOnlyFrom, "verbs fabric", &w->acceptOnlyFrom_));
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
  w->address_.workerId = RandomNonZeroId();
  w->address_.ipv4 = sa.sin_addr.s_addr;
  w->address_.port = ntohs(sa.sin_port);
  w->address_.rails = static_cast<uint16_t>(domain->rails().size());
  if (!w->MakeChannels()) {
    RY_INFO(log::kNet, "verbs fabric worker: no completion channel (%s): its callers poll", proxy::ErrnoText(errno).c_str());
  }
  *out = std::move(w);
  return Status::Ok();
}

bool VerbsWorker::MakeChannels() {
  epoll_ = proxy::Fd(::epoll_create1(EPOLL_CLOEXEC));
  if (!epoll_.valid()) return false;
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = listener_.get();  // Readiness tells the listener from the channels by it
  if (::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, listener_.get(), &ev) != 0) return false;
  for (int port : domain_->railPorts()) {
    ibv_context* ctx = domain_->ports().at(static_cast<size_t>(port)).ctx;
    if (channels_.count(ctx) != 0) continue;
    ibv_comp_channel* ch = ibv_create_comp_channel(ctx);
    if (ch == nullptr) return false;
    channels_[ctx] = ch;
    const int flags = ::fcntl(ch->fd, F_GETFL);
    if (flags < 0 || ::fcntl(ch->fd, F_SETFL, flags | O_NONBLOCK) != 0) return false;
    ev.data.fd = ch->fd;
    if (::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, ch->fd, &ev) != 0) return false;
  }
  channelled_ = true;
  return true;
}

const std::vector<ibv_comp_channel*>* VerbsWorker::ChannelsFor(const std::vector<int>& ports) {
  if (!channelled_) return nullptr;
  channelsFor_.clear();
  for (int port : ports) channelsFor_.push_back(channels_.at(domain_->ports().at(static_cast<size_t>(port)).ctx));
  armed_ = false;  // a new CQ is being made
  return &channelsFor_;
}

bool VerbsWorker::DrainChannels() {
  bool any = false;
  for (auto& [ctx, ch] : channels_) {
    ibv_cq* cq = nullptr;
    void* cqContext = nullptr;
    while (ibv_get_cq_event(ch, &cq, &cqContext) == 0) {  // non-blocking: EAGAIN ends it
      ibv_ack_cq_events(cq, 1);
      any = true;
    }
  }
  if (any) armed_ = false;
  return any;
}

bool VerbsWorker::Quiet() const {
  if (!channelled_ || !events_.empty()) return false;
  for (const auto& t : targets_) {
    if (!t->Idle()) return false;
  }
  for (const VerbsEndpoint* ep : endpoints_) {
    if (!ep->Idle()) return false;
  }
  if (armed_) return true;
  for (const auto& t : targets_) {
    if (!t->ArmCqs()) return false;
  }
  for (const VerbsEndpoint* ep : endpoints_) {
    if (!ep->ArmCqs()) return false;
  }
  armed_ = true;
  return false;  // armed now: one more Progress must find nothing before a sleep
}

void VerbsWorker::ForgetBootstrapsForTesting() {
  for (auto& t : targets_) t->ForgetBootstrapForTesting();
  for (VerbsEndpoint* ep : endpoints_) ep->ForgetBootstrapForTesting();
}

VerbsWorker::~VerbsWorker() {
  if (!endpoints_.empty()) {
    RY_WARN("verbs fabric worker destroyed with %zu endpoints still alive (destroy them first)", endpoints_.size());
  }
  targets_.clear();
  for (auto& [ctx, ch] : channels_) {
    // EBUSY while a CQ still reports to it (an Endpoint that outlived its Worker,
    // warned above): left, as that CQ still needs it.
    if (ibv_destroy_comp_channel(ch) != 0) {
      RY_WARN("verbs fabric worker: a completion channel is still in use at destruction (left)");
    }
  }
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
  std::optional<size_t> settingUp;  // counted once a socket comes (Progress is a hot loop)
  for (int i = 0; i < 16; ++i) {
    ++acceptCalls_;
    const int fd = ::accept4(listener_.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) return;  // EAGAIN, or a transient error: the next Progress tries again
    proxy::Fd owned(fd);
    if (!settingUp) {
      settingUp = static_cast<size_t>(
          std::count_if(targets_.begin(), targets_.end(), [](const auto& t) { return t->SettingUp(); }));
    }
    // Logged for the first and then every 1024th: a flood of them writes little.
    if (!acceptOnlyFrom_.Allows(fd)) {
      if (offSource_++ % 1024 == 0) {
        RY_WARN("verbs fabric: closed a bootstrap socket from a source off this port's cable (%llu so far)",
                static_cast<unsigned long long>(offSource_));
      }
      continue;
    }
    if (*settingUp >= kMaxSettingUp) {
      if (overCap_++ % 1024 == 0) {
        RY_WARN("verbs fabric: %zu connections are already being set up; closed a new bootstrap socket (%llu so far)",
                *settingUp, static_cast<unsigned long long>(overCap_));
      }
      continue;
    }
    (void)proxy::TuneTcpSocket(fd, 0);
    targets_.push_back(std::make_unique<VerbsTarget>(this, std::move(owned)));
    ++*settingUp;
    armed_ = false;
  }
}

VerbsWorker::Readiness VerbsWorker::PollReadiness() const {
  if (!channelled_) return {true, false};
  epoll_event evs[8];
  const int n = ::epoll_wait(epoll_.get(), evs, 8, 0);
  if (n < 0) return {true, true};  // EINTR or worse: look at both, as without the set
  Readiness r;
  for (int i = 0; i < n; ++i) {
    if (evs[i].data.fd == listener_.get()) {
      r.listener = true;
    } else {
      r.channels = true;
    }
  }
  // More ready descriptors than evs holds: level-triggered, the rest come next pass.
  return r;
}

size_t VerbsWorker::Progress(std::vector<Event>* events) {
  const Readiness ready = PollReadiness();
  if (ready.channels) DrainChannels();
  if (ready.listener) AcceptNew();
  for (auto it = targets_.begin(); it != targets_.end();) {
    if ((*it)->Progress()) {
      ++it;
    } else {
      it = targets_.erase(it);
    }
  }
  // By index, no copy (a heap allocation per pass): an Endpoint's Progress never
  // destroys or makes Endpoints, so the list does not change under it.
  for (size_t i = 0; i < endpoints_.size(); ++i) endpoints_[i]->Progress();
  const size_t n = events_.size();
  for (Event& e : events_) events->push_back(std::move(e));
  events_.clear();
  return n;
}

}  // namespace railyard::fabric::verbs
