#include "proxy/verbs/verbs_faults.h"

#include <sys/socket.h>

#include <cerrno>

namespace railyard::proxy::verbs {

std::string FaultContext(const VerbsLink& link, uint32_t qpn, uint64_t seq) {
  const int me = RankFor(link.options.rank.get());
  std::string rail = link.qps->RailsText();
  for (const Qp& q : link.qps->qps()) {
    if (q.qp != nullptr && q.qp->qp_num == qpn) {
      rail = link.qps->ib().at(static_cast<size_t>(q.port)).Name() + " → " + q.remoteRailName;
    }
  }
  return "(rank " + (me >= 0 ? std::to_string(me) : std::string("?")) + ", " + link.peer.ToString() +
         ", device " + link.options.device + ", rail " + rail +
         (qpn != 0 ? ", QP " + std::to_string(qpn) : std::string()) + ", seq " + std::to_string(seq) + ")";
}

Status CompletionError(const VerbsLink& link, const ibv_wc& wc, const char* what, uint64_t seq) {
  return SystemError(std::string(what) + " failed with " + ibv_wc_status_str(wc.status) + " (status " +
                     std::to_string(wc.status) + ", vendor error " + std::to_string(wc.vendor_err) + ") " +
                     FaultContext(link, wc.qp_num, seq));
}

Status CheckControl(const VerbsLink& link, bool* eof) {
  *eof = false;
  char c;
  const ssize_t n = ::recv(link.control.get(), &c, 1, MSG_DONTWAIT | MSG_PEEK);
  if (n == 0) {
    *eof = true;
    return Status::Ok();
  }
  if (n > 0) return SystemError("unexpected bytes on the control socket of " + link.peer.ToString());
  if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return Status::Ok();
  return SystemError("control socket to " + link.peer.ToString() + " broke: " + ErrnoText(errno));
}

int SubscribeFaults(const VerbsLink& link, Poison* poison, const std::atomic<uint64_t>* seqHint) {
  std::vector<int> ports = link.qps->ports();
  std::vector<uint32_t> qpns;
  for (const Qp& q : link.qps->qps()) qpns.push_back(q.qp->qp_num);
  const VerbsLink* l = &link;
  return link.qps->ib().Subscribe([=](int port, uint32_t qpn, const std::string& why) {
    bool mine = false;
    for (int p : ports) mine |= p == port;
    if (!mine) return;
    if (qpn != 0) {
      bool ours = false;
      for (uint32_t n : qpns) ours |= n == qpn;
      if (!ours) return;
    }
    poison->Set(SystemError(why + " " + FaultContext(*l, qpn, seqHint->load())));
  });
}

}  // namespace railyard::proxy::verbs
