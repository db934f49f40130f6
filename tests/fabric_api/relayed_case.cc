#include "tests/fabric_api/relayed_case.h"

#include <chrono>

#include "proxy/fabric/relay/forwarder.h"
#include "proxy/fabric/relay/routed_worker.h"

namespace railyard::fabric::testing {
namespace {

/// A side's Worker: the routed Worker (direct + relay client) and the side's own
/// relay host's Forwarder.
class RelayedWorker : public Worker {
 public:
  Status Init(Domain* inner, Domain* relayHost, const relay::RelayOptions& o) {
    // The relay host carries to every address (the suite's peers all live on the
    // transport's loopback rails); a real resolver asks the cabling graph.
    relay::ResolveFn resolve = [](std::span<const uint8_t>, relay::NextHop* out) {
      *out = relay::NextHop{};
      return Status::Ok();
    };
    RY_RETURN_IF_ERROR(relay::Forwarder::Create({relayHost}, o, resolve, &forwarder_));
    std::unique_ptr<Worker> direct;
    RY_RETURN_IF_ERROR(inner->CreateWorker(&direct));
    std::unique_ptr<relay::RelayClient> client;
    RY_RETURN_IF_ERROR(relay::RelayClient::Create(*inner, o, &client));
    Worker* d = direct.get();
    const std::vector<uint8_t> via = forwarder_->Address(0);
    // Every peer through the relay. The address is first checked the way a real
    // routing function parses it: here by the transport itself (a direct Connect
    // that is dropped at once; refused when malformed).
    // The probe is kept until the Worker goes: dropping it at once would be, over
    // verbs, a connection closed mid-setup, which the target reports as an error event
    // the suite would count among the relayed ops' events.
    relay::RouteFn route = [this, d, via](std::span<const uint8_t> target, std::vector<uint8_t>* relayOut) {
      std::unique_ptr<Endpoint> probe;
      RY_RETURN_IF_ERROR(d->Connect(target, &probe));
      probes_.push_back(std::move(probe));
      *relayOut = via;
      return Status::Ok();
    };
    routed_ = std::make_unique<relay::RoutedWorker>(std::move(direct), std::move(client), route);
    return Status::Ok();
  }
  ~RelayedWorker() override {
    probes_.clear();
    // A relay host lives on in a real cluster: drive this one while the routes closed
    // just before deliver their Close records, as RelayClient's teardown waits for them.
    std::vector<Event> scratch;
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    while (routed_->client().ClosingRoutes() > 0 && std::chrono::steady_clock::now() < until) {
      forwarder_->Progress();
      routed_->Progress(&scratch);
    }
    routed_.reset();
    forwarder_.reset();
  }
  std::vector<uint8_t> Address() const override { return routed_->Address(); }
  Status Connect(std::span<const uint8_t> peerAddress, std::unique_ptr<Endpoint>* out) override {
    return routed_->Connect(peerAddress, out);
  }
  size_t Progress(std::vector<Event>* events) override {
    forwarder_->Progress();
    const size_t n = routed_->Progress(events);
    forwarder_->Progress();
    return n;
  }
  WorkerStats stats() const override { return routed_->stats(); }

 private:
  std::unique_ptr<relay::Forwarder> forwarder_;
  std::unique_ptr<relay::RoutedWorker> routed_;
  std::vector<std::unique_ptr<Endpoint>> probes_;  ///< the route's direct Connect checks (see Init)
};

/// A side's Domain: the transport's, plus the side's relay host.
class RelayedDomain : public Domain {
 public:
  RelayedDomain(std::unique_ptr<Domain> inner, std::unique_ptr<Domain> relayHost, relay::RelayOptions o)
      : inner_(std::move(inner)), relayHost_(std::move(relayHost)), options_(std::move(o)) {
    caps_ = inner_->capabilities();
    // A region deregistered mid-Write refuses the later chunks as BAD_KEY (each chunk
    // is its own Write at the target), so the cause is not always the precise one.
    caps_.flags &= ~uint64_t{kCapPreciseRemoteErrors};
  }
  const char* TransportName() const override { return inner_->TransportName(); }
  const Capabilities& capabilities() const override { return caps_; }
  const std::vector<RailInfo>& rails() const override { return inner_->rails(); }
  Status Register(void* addr, uint64_t bytes, uint32_t access, MemoryKind kind, const Region** out) override {
    return inner_->Register(addr, bytes, access, kind, out);
  }
  /// DMA-BUF regions are the side's own (the relay host stages in its own rings).
  Status RegisterDmaBuf(void* addr, uint64_t bytes, int fd, uint64_t offset, uint32_t access, MemoryKind kind,
                        const Region** out) override {
    return inner_->RegisterDmaBuf(addr, bytes, fd, offset, access, kind, out);
  }
  Status Deregister(const Region* region) override { return inner_->Deregister(region); }
  Status CreateWorker(std::unique_ptr<Worker>* out) override {
    auto w = std::make_unique<RelayedWorker>();
    RY_RETURN_IF_ERROR(w->Init(inner_.get(), relayHost_.get(), options_));
    *out = std::move(w);
    return Status::Ok();
  }

 private:
  std::unique_ptr<Domain> inner_, relayHost_;
  relay::RelayOptions options_;
  Capabilities caps_;
};

}  // namespace

TransportCase RelayedCase(std::string name, std::function<Status(const Knobs&, std::unique_ptr<Domain>*)> make,
                          relay::RelayOptions options) {
  return {std::move(name), [make, options](const Knobs& k, std::unique_ptr<Domain>* out) {
            std::unique_ptr<Domain> inner, host;
            RY_RETURN_IF_ERROR(make(k, &inner));
            RY_RETURN_IF_ERROR(make(k, &host));
            relay::RelayOptions o = options;
            o.timeoutMs = k.timeoutMs;
            *out = std::make_unique<RelayedDomain>(std::move(inner), std::move(host), o);
            return Status::Ok();
          },
          options.PayloadBytes()};
}

}  // namespace railyard::fabric::testing
