#include "proxy/comm.h"

#include "env/log.h"

namespace railyard::proxy {

namespace {
std::atomic<int> g_localRank{-1};
}  // namespace

int LocalRank() { return g_localRank.load(std::memory_order_relaxed); }
void NoteLocalRank(int tag) { g_localRank.store(tag, std::memory_order_relaxed); }

std::string PeerInfo::ToString() const {
  std::string s = "peer " + (host.empty() ? std::string("?") : host);
  s += " (pid " + std::to_string(pid) + ", " + (address.empty() ? "?" : address) + ")";
  if (!device.empty()) s += " on rail " + device;
  return s;
}

bool Poison::Set(const Status& s, bool warn) {
  std::lock_guard lock(mu_);
  if (set_.load(std::memory_order_relaxed)) return false;
  status_ = s;
  set_.store(true, std::memory_order_release);
  // Once per comm: the first fault is the cause.
  if (warn) {
    RY_WARN("%s", s.message().c_str());
  } else {
    RY_INFO(log::kNet, "%s", s.message().c_str());
  }
  return true;
}

Status Poison::Get() const {
  if (!IsSet()) return Status::Ok();
  std::lock_guard lock(mu_);
  return status_;
}

}  // namespace railyard::proxy
