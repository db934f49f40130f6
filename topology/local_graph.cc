// See local_graph.h.
#include "topology/local_graph.h"

#include <algorithm>
#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

#include "topology/cabling_agent.h"

namespace railyard::topology {
namespace {

std::mutex& Mu() {
  static std::mutex mu;
  return mu;
}
std::vector<const CablingAgent*>& Agents() {
  static std::vector<const CablingAgent*> agents;
  return agents;
}

}  // namespace

void PublishLocalAgent(const CablingAgent* agent) {
  if (agent == nullptr) return;
  std::lock_guard lock(Mu());
  auto& a = Agents();
  if (std::find(a.begin(), a.end(), agent) == a.end()) a.push_back(agent);
}

void WithdrawLocalAgent(const CablingAgent* agent) {
  std::lock_guard lock(Mu());
  auto& a = Agents();
  a.erase(std::remove(a.begin(), a.end(), agent), a.end());
}

bool LocalCablingGraph(LocalGraph* out, int settleMs) {
  std::lock_guard lock(Mu());  // held while copying: the agent cannot be destroyed meanwhile
  if (Agents().empty() || out == nullptr) return false;
  const CablingAgent* agent = Agents().front();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(std::max(settleMs, 0));
  while (!agent->Settled() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  out->self = agent->HostId();
  out->settled = agent->Settled();
  out->graph = agent->Graph();
  return true;
}

}  // namespace railyard::topology
