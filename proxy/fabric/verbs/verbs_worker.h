// The verbs transport's Worker: a bootstrap TCP listener (QP records are exchanged
// over it, verbs_bootstrap.h), the targets of peers' connections (VerbsTarget), its
// own Endpoints (VerbsEndpoint), and Progress, which polls every CQ without
// blocking and collects the events. It starts no thread (explicit progress only).
#pragma once

#include <memory>
#include <vector>

#include "proxy/fabric/verbs/verbs_domain.h"
#include "proxy/fabric/verbs/verbs_wire.h"
#include "proxy/fabric/worker.h"
#include "proxy/socket.h"

namespace railyard::fabric::verbs {

class VerbsEndpoint;
class VerbsTarget;

/// See file comment. Its Endpoints must be destroyed before it.
class VerbsWorker : public Worker {
 public:
  /// Opens the bootstrap listener on VerbsOptions::bootstrapAddress (an ephemeral
  /// port). SystemError naming the address when bind or listen fails.
  static Status Create(VerbsDomain* domain, std::unique_ptr<Worker>* out);
  ~VerbsWorker() override;

  std::vector<uint8_t> Address() const override { return address_.Pack(); }
  /// InvalidArgument for an address that is not a valid verbs Worker address.
  Status Connect(std::span<const uint8_t> peerAddress, std::unique_ptr<Endpoint>* out) override;
  size_t Progress(std::vector<Event>* events) override;
  WorkerStats stats() const override { return stats_; }

  // --- for VerbsEndpoint and VerbsTarget ------------------------------------------
  VerbsDomain& domain() { return *domain_; }
  uint64_t id() const { return address_.workerId; }
  void Emit(Event e) { events_.push_back(std::move(e)); }
  WorkerStats& counters() { return stats_; }
  void Detach(VerbsEndpoint* ep);

 private:
  explicit VerbsWorker(VerbsDomain* domain);
  void AcceptNew();

  VerbsDomain* domain_;
  VerbsAddress address_;
  proxy::Fd listener_;
  std::vector<std::unique_ptr<VerbsTarget>> targets_;
  std::vector<VerbsEndpoint*> endpoints_;
  std::vector<Event> events_;
  WorkerStats stats_;
  uint64_t nextConnection_ = 1;
};

}  // namespace railyard::fabric::verbs
