#include "proxy/collectives/coll_proxy.h"

#include <pthread.h>
#include <chrono>

namespace railyard::collectives {
namespace {
constexpr int kSpinPolls = 2000;  ///< polls without progress before napping
constexpr int kNapUs = 20;        ///< nap between polls once the spin budget is spent
}  // namespace

CollProxy::CollProxy(std::unique_ptr<CollComm> comm, int idlePollUs)
    : comm_(std::move(comm)), rank_(comm_->rank()), nranks_(comm_->nranks()), idlePollUs_(idlePollUs) {
  thread_ = std::thread([this] { Loop(); });
}

CollProxy::~CollProxy() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
  comm_.reset();
}

Status CollProxy::Post(CollOp op, CollRequest** out) {
  Status s;
  {
    std::lock_guard<std::mutex> lock(mu_);
    s = comm_->Post(std::move(op), out, /*progress=*/false);
    posted_ = true;
  }
  cv_.notify_one();
  return s;
}

Status CollProxy::Test(CollRequest* req, bool* done, uint64_t* bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  return comm_->Test(req, done, bytes, /*progress=*/false);
}

Algorithm CollProxy::lastAlgorithm() {
  std::lock_guard<std::mutex> lock(mu_);
  return comm_->lastAlgorithm();
}

void CollProxy::Loop() {
  pthread_setname_np(pthread_self(), "ry-coll-proxy");  // ps -L, top -H, gdb name it
  std::unique_lock<std::mutex> lock(mu_);
  int idlePolls = 0;
  while (!stop_) {
    (void)comm_->Progress();  // errors are sticky in the comm; Test reports them
    if (comm_->Busy()) {
      // Spin while bytes move; after kSpinPolls polls that moved nothing, nap briefly so a
      // rank waiting on a slow neighbour does not burn a core (the latency cost is the nap).
      idlePolls = comm_->LastProgressMoved() ? 0 : idlePolls + 1;
      lock.unlock();
      if (idlePolls > kSpinPolls) {
        std::this_thread::sleep_for(std::chrono::microseconds(kNapUs));
      } else {
        std::this_thread::yield();
      }
      lock.lock();
    } else {
      cv_.wait_for(lock, std::chrono::microseconds(idlePollUs_), [this] { return stop_ || posted_; });
      posted_ = false;
    }
  }
}

}  // namespace railyard::collectives
