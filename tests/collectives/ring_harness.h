// Harness of the ring collective tests: n ranks in one process (one thread each),
// each with its own Domain, RegistrationCache, Worker and CollComm, over the fake
// or the TCP (loopback) fabric transport.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "proxy/collectives/coll_comm.h"
#include "proxy/collectives/coll_proxy.h"
#include "proxy/fabric/domain.h"
#include "proxy/fabric/fake/fake_transport.h"
#include "proxy/fabric/registration_cache.h"
#include "proxy/fabric/tcp/tcp_domain.h"

namespace railyard::collectives::testing {

/// One rank's fabric objects and comm.
struct RankSide {
  std::unique_ptr<fabric::Domain> domain;
  std::unique_ptr<fabric::RegistrationCache> cache;
  std::unique_ptr<fabric::Worker> worker;
  std::unique_ptr<CollProxy> comm;  ///< the connected comm on its proxy thread
};

/// Makes a Domain of the named transport ("fake" or "tcp").
inline Status MakeDomain(const std::string& transport, int timeoutMs, std::unique_ptr<fabric::Domain>* out) {
  if (transport == "fake") return fabric::fake::CreateFakeDomain(fabric::fake::FakeOptions{}, out);
  fabric::tcp::TcpOptions o;
  o.rails = {{"lo", "127.0.0.1", 10000}};
  o.timeoutMs = timeoutMs;
  return fabric::tcp::CreateTcpDomain(o, out);
}

/// Creates `n` ranks and connects their comms (each Connect on its own thread, as
/// the call is blocking and collective). Returns the first error.
inline Status MakeRing(const std::string& transport, int n, const CollOptions& options,
                       std::vector<RankSide>* ranks) {
  ranks->clear();
  ranks->resize(static_cast<size_t>(n));
  std::vector<std::vector<uint8_t>> addresses;
  for (RankSide& r : *ranks) {
    RY_RETURN_IF_ERROR(MakeDomain(transport, options.timeoutMs, &r.domain));
    r.cache = std::make_unique<fabric::RegistrationCache>(*r.domain);
    RY_RETURN_IF_ERROR(r.domain->CreateWorker(&r.worker));
    addresses.push_back(r.worker->Address());
  }
  std::vector<Status> st(static_cast<size_t>(n));
  std::vector<std::thread> threads;
  for (int i = 0; i < n; ++i) {
    threads.emplace_back([&, i] {
      RankSide& r = (*ranks)[static_cast<size_t>(i)];
      std::unique_ptr<CollComm> comm;
      st[static_cast<size_t>(i)] = CollComm::Connect(*r.worker, *r.cache, i, n, addresses, options, &comm);
      if (comm) r.comm = std::make_unique<CollProxy>(std::move(comm));
    });
  }
  for (auto& t : threads) t.join();
  for (const Status& s : st) RY_RETURN_IF_ERROR(s);
  return Status::Ok();
}

/// Runs `body(rank)` on one thread per rank and joins them.
inline void OnEveryRank(int n, const std::function<void(int)>& body) {
  std::vector<std::thread> threads;
  for (int i = 0; i < n; ++i) threads.emplace_back(body, i);
  for (auto& t : threads) t.join();
}

/// Posts `op` on `comm` and tests it to completion (bounded by the comm's timeout:
/// the comm fails itself when nothing moves).
inline Status RunOp(CollProxy& comm, CollOp op) {
  CollRequest* req = nullptr;
  RY_RETURN_IF_ERROR(comm.Post(std::move(op), &req));
  for (;;) {
    bool done = false;
    uint64_t bytes = 0;
    RY_RETURN_IF_ERROR(comm.Test(req, &done, &bytes));
    if (done) return Status::Ok();
    std::this_thread::yield();
  }
}

/// Tears the ranks down in the right order (comms, then Workers, caches, Domains).
inline void Destroy(std::vector<RankSide>* ranks) {
  for (RankSide& r : *ranks) r.comm.reset();
  for (RankSide& r : *ranks) r.worker.reset();
  for (RankSide& r : *ranks) r.cache.reset();
  ranks->clear();
}

}  // namespace railyard::collectives::testing
