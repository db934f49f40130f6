#include "proxy/fabric/relay/routed_worker.h"

namespace railyard::fabric::relay {

RoutedWorker::~RoutedWorker() {
  client_.reset();
  direct_.reset();
}

Status RoutedWorker::Connect(std::span<const uint8_t> peerAddress, std::unique_ptr<Endpoint>* out) {
  std::vector<uint8_t> relay;
  RY_RETURN_IF_ERROR(route_(peerAddress, &relay));
  if (relay.empty()) return direct_->Connect(peerAddress, out);
  return client_->Connect(relay, peerAddress, out);
}

size_t RoutedWorker::Progress(std::vector<Event>* events) {
  const size_t before = events->size();
  direct_->Progress(events);
  client_->Progress(events);
  return events->size() - before;
}

bool RoutedWorker::Quiet() const {
  if (!direct_->Quiet() || !client_->Quiet()) return false;
  fds_.assign(1, direct_->WaitFd());
  client_->WaitFds(&fds_);
  return waitSet_.Sync(fds_);
}

}  // namespace railyard::fabric::relay
