#include "proxy/nccl/fabric_listen_comm.h"

#include <random>

#include "env/log.h"

namespace railyard::proxy::nccl {

Status FabricListenComm::Create(CommWorker* cw, size_t deviceIndex, const LocalIdentity& self, const MrCache* cache,
                                std::shared_ptr<RankSource> rank, std::unique_ptr<FabricListenComm>* out,
                                void* handle) {
  std::unique_ptr<FabricListenComm> l(new FabricListenComm(cw, deviceIndex, cache));
  l->rank_ = std::move(rank);
  std::random_device rd;
  auto lock = cw->Lock();
  if (!cw->running()) return InvalidUsage("listen: the plugin's fabric worker is stopped (finalize ran)");
  do {
    l->listenId_ = (uint64_t{rd()} << 32) | rd();
  } while (l->listenId_ == 0);
  FabricHandle h;
  h.listenId = l->listenId_;
  h.pid = self.pid;
  h.host = self.host;
  h.address = cw->worker().Address();
  RY_RETURN_IF_ERROR(EncodeFabricHandle(h, handle));
  cw->AddListener(l->listenId_, l.get());
  *out = std::move(l);
  return Status::Ok();
}

FabricListenComm::~FabricListenComm() {
  auto lock = cw_->Lock();
  cw_->RemoveListener(listenId_);
}

void FabricListenComm::OnHello(Hello hello, fabric::RemoteKey fifoKey, uint64_t peer) {
  if (pending_.size() >= kMaxPendingHellos) {
    RY_WARN("listen comm on %s: refused a hello from %s (pid %u): %zu connections already wait for accept",
            cw_->device().c_str(), hello.host.c_str(), hello.pid, pending_.size());
    return;
  }
  pending_.push_back({std::move(hello), std::move(fifoKey), peer});
}

Status FabricListenComm::Accept(RecvComm** recvComm) {
  *recvComm = nullptr;
  auto lock = cw_->Lock();
  if (!cw_->running()) return InvalidUsage("accept: the plugin's fabric worker is stopped (finalize ran)");
  if (pending_.empty()) cw_->DriveLocked();
  while (!pending_.empty()) {
    Pending p = std::move(pending_.front());
    pending_.pop_front();
    std::unique_ptr<FabricRecvComm> c;
    Status s = FabricRecvComm::CreateLocked(cw_, dev_, p.hello, std::move(p.fifoKey), p.peer, cache_, rank_, &c);
    if (!s.ok()) {
      // A bad hello must not end the job (NCCL treats accept errors as fatal).
      RY_WARN("listen comm on %s: %s", cw_->device().c_str(), s.message().c_str());
      continue;
    }
    RY_INFO(log::kNet, "receive comm accepted from %s", c->PeerText().c_str());
    *recvComm = c.release();
    return Status::Ok();
  }
  return Status::Ok();
}

}  // namespace railyard::proxy::nccl
