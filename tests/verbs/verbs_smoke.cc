// verbs_smoke: the smallest end-to-end proof that host-built ibverbs code works in
// the soft-RoCE lane (tests/lanes/rxe). It is what the verbs transport will rely on,
// checked with data: RC QPs, RoCE v2 with the IPv4 GID chosen by type, RDMA WRITE,
// RDMA READ, SEND/RECV and RDMA WRITE WITH IMM (the transport's completion signal).
//
//   verbs_smoke [--mode local|fork|loopback] [--rails N] [--iters N] [--size BYTES]
//
// Modes (one RC connection per rail r):
//   local     rxe_h0r<r> <-> rxe_h1r<r>, both QPs in this process; also checks that
//             the bytes crossed the rail's veth (h0r<r> tx counter)
//   fork      the same pair, the h1 side in a child process; QP numbers, GIDs, rkeys
//             and addresses travel over a socketpair, as over a plugin's bootstrap socket
//   loopback  two QPs on the SAME device rxe_h0r<r>, the second in a child process
//
// Exit status: 0 pass, 1 fail (the first line on stderr names what failed),
// 2 usage, 77 skipped: no lane devices (the bare host). Inside the lane
// (RXE_LANE_HOSTS set) a missing device is a failure, never a skip.
#include <arpa/inet.h>
#include <infiniband/verbs.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

constexpr int kSkip = 77;

/// Prints "verbs_smoke: FAIL: <what>" (with errno when set) and exits 1.
[[noreturn]] void Fail(const std::string& what) {
  const int err = errno;
  if (err != 0) {
    std::fprintf(stderr, "verbs_smoke: FAIL: %s (errno %d: %s)\n", what.c_str(), err, std::strerror(err));
  } else {
    std::fprintf(stderr, "verbs_smoke: FAIL: %s\n", what.c_str());
  }
  std::exit(1);
}

/// Fails with `what` unless `ok`; clears errno first so a stale value is not reported.
void Check(bool ok, const std::string& what) {
  if (!ok) Fail(what);
  errno = 0;
}

/// What one side tells the other to connect and address its buffer.
struct Wire {
  std::uint32_t qpn = 0;
  std::uint32_t psn = 0;
  std::uint32_t rkey = 0;
  std::uint32_t mtu = 0;  ///< ibv_mtu enum value of the port's active MTU
  std::uint64_t addr = 0;
  std::uint8_t gid[16] = {};
};

/// One RC endpoint: device, PD, CQ, QP and a registered buffer of 2 * size bytes.
/// [0, size) is the target of the peer's WRITE/READ, [size, 2 * size) local scratch.
class Endpoint {
 public:
  Endpoint() = default;
  Endpoint(const Endpoint&) = delete;
  Endpoint& operator=(const Endpoint&) = delete;

  ~Endpoint() {
    if (qp_) ibv_destroy_qp(qp_);
    if (mr_) ibv_dereg_mr(mr_);
    if (cq_) ibv_destroy_cq(cq_);
    if (pd_) ibv_dealloc_pd(pd_);
    if (ctx_) ibv_close_device(ctx_);
  }

  /// Opens device `name` port 1, picks its RoCE v2 IPv4 GID, registers the buffer and
  /// moves a fresh RC QP to INIT.
  void Open(const std::string& name, size_t size) {
    name_ = name;
    size_ = size;
    int n = 0;
    ibv_device** list = ibv_get_device_list(&n);
    Check(list != nullptr, "ibv_get_device_list");
    for (int i = 0; i < n && !ctx_; i++) {
      if (name == ibv_get_device_name(list[i])) ctx_ = ibv_open_device(list[i]);
    }
    ibv_free_device_list(list);
    Check(ctx_ != nullptr, "cannot open RDMA device " + name);

    ibv_port_attr pa{};
    Check(ibv_query_port(ctx_, 1, &pa) == 0, name + ": ibv_query_port");
    Check(pa.state == IBV_PORT_ACTIVE, name + ": port 1 is not ACTIVE");
    mtu_ = pa.active_mtu;
    // RoCE v2 GID carrying an IPv4 address (::ffff:a.b.c.d). rxe lists only RoCE v2
    // entries (0 = link-local, 1 = IPv4); a ConnectX lists v1 and v2 for each address,
    // so the index is chosen by type and prefix, never hard-coded.
    static const std::uint8_t kV4Prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    for (int i = 0; i < pa.gid_tbl_len && gidIndex_ < 0; i++) {
      ibv_gid_entry e{};
      if (ibv_query_gid_ex(ctx_, 1, i, &e, 0) != 0) continue;
      if (e.gid_type == IBV_GID_TYPE_ROCE_V2 && std::memcmp(e.gid.raw, kV4Prefix, 12) == 0) {
        gidIndex_ = i;
        gid_ = e.gid;
      }
    }
    errno = 0;
    Check(gidIndex_ >= 0, name + ": no RoCE v2 GID with an IPv4 address");

    pd_ = ibv_alloc_pd(ctx_);
    Check(pd_ != nullptr, name + ": ibv_alloc_pd");
    cq_ = ibv_create_cq(ctx_, 256, nullptr, nullptr, 0);
    Check(cq_ != nullptr, name + ": ibv_create_cq");
    buf_.assign(2 * size, 0);
    mr_ = ibv_reg_mr(pd_, buf_.data(), buf_.size(),
                     IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
    Check(mr_ != nullptr, name + ": ibv_reg_mr of " + std::to_string(buf_.size()) + " bytes");
    ibv_qp_init_attr ia{};
    ia.send_cq = cq_;
    ia.recv_cq = cq_;
    ia.qp_type = IBV_QPT_RC;
    ia.cap.max_send_wr = 128;
    ia.cap.max_recv_wr = 128;
    ia.cap.max_send_sge = 1;
    ia.cap.max_recv_sge = 1;
    qp_ = ibv_create_qp(pd_, &ia);
    Check(qp_ != nullptr, name + ": ibv_create_qp");
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_INIT;
    a.pkey_index = 0;
    a.port_num = 1;
    a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
    Check(ibv_modify_qp(qp_, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS) == 0,
          name + ": QP to INIT");
  }

  /// This side's connection data.
  Wire Describe() const {
    Wire w;
    w.qpn = qp_->qp_num;
    w.psn = (qp_->qp_num * 7) & 0xffffff;
    w.rkey = mr_->rkey;
    w.addr = reinterpret_cast<std::uint64_t>(buf_.data());
    w.mtu = mtu_;
    std::memcpy(w.gid, gid_.raw, 16);
    return w;
  }

  /// Moves the QP to RTR then RTS towards `peer`. The QP timeout is 20 (about 4 s,
  /// NCCL's default): under TCG a shorter one causes spurious retransmissions.
  void Connect(const Wire& peer) {
    const Wire me = Describe();
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_RTR;
    a.path_mtu = static_cast<ibv_mtu>(std::min(me.mtu, peer.mtu));
    a.dest_qp_num = peer.qpn;
    a.rq_psn = peer.psn;
    a.max_dest_rd_atomic = 4;
    a.min_rnr_timer = 12;
    a.ah_attr.is_global = 1;
    std::memcpy(a.ah_attr.grh.dgid.raw, peer.gid, 16);
    a.ah_attr.grh.sgid_index = static_cast<std::uint8_t>(gidIndex_);
    a.ah_attr.grh.hop_limit = 1;
    a.ah_attr.port_num = 1;
    Check(ibv_modify_qp(qp_, &a,
                        IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                            IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER) == 0,
          name_ + ": QP to RTR (is the peer on the same rail?)");
    a = {};
    a.qp_state = IBV_QPS_RTS;
    a.timeout = 20;
    a.retry_cnt = 7;
    a.rnr_retry = 7;
    a.sq_psn = me.psn;
    a.max_rd_atomic = 4;
    Check(ibv_modify_qp(qp_, &a,
                        IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                            IBV_QP_MAX_QP_RD_ATOMIC) == 0,
          name_ + ": QP to RTS");
  }

  /// Posts one signalled work request of `len` bytes from `local`; one-sided ones
  /// address `peer`'s buffer at offset `remoteOffset`.
  void Post(ibv_wr_opcode op, const char* local, std::uint32_t len, const Wire* peer,
            std::uint64_t remoteOffset, std::uint64_t id, std::uint32_t imm = 0) {
    ibv_sge sge{reinterpret_cast<std::uint64_t>(local), len, mr_->lkey};
    ibv_send_wr wr{};
    ibv_send_wr* bad = nullptr;
    wr.wr_id = id;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = op;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.imm_data = htonl(imm);
    if (peer) {
      wr.wr.rdma.remote_addr = peer->addr + remoteOffset;
      wr.wr.rdma.rkey = peer->rkey;
    }
    Check(ibv_post_send(qp_, &wr, &bad) == 0, name_ + ": ibv_post_send");
  }

  /// Posts one receive of `len` bytes into `local` (len 0: for WRITE WITH IMM).
  void PostRecv(char* local, std::uint32_t len) {
    ibv_sge sge{reinterpret_cast<std::uint64_t>(local), len, mr_->lkey};
    ibv_recv_wr wr{};
    ibv_recv_wr* bad = nullptr;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    Check(ibv_post_recv(qp_, &wr, &bad) == 0, name_ + ": ibv_post_recv");
  }

  /// Busy-polls for one completion; fails on an error status or after `timeoutS`.
  ibv_wc Wait(const char* what, double timeoutS = 60) {
    ibv_wc wc{};
    const auto t0 = std::chrono::steady_clock::now();
    for (;;) {
      const int n = ibv_poll_cq(cq_, 1, &wc);
      Check(n >= 0, name_ + ": ibv_poll_cq");
      if (n == 1) {
        errno = 0;
        Check(wc.status == IBV_WC_SUCCESS,
              name_ + ": " + what + " completed with " + ibv_wc_status_str(wc.status));
        return wc;
      }
      if (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() > timeoutS) {
        errno = 0;
        Fail(name_ + ": no completion for " + what + " within " + std::to_string(timeoutS) + " s");
      }
    }
  }

  char* target() { return buf_.data(); }
  char* scratch() { return buf_.data() + size_; }
  const std::string& name() const { return name_; }
  int gidIndex() const { return gidIndex_; }
  int mtuBytes() const { return 128 << mtu_; }

 private:
  std::string name_;
  size_t size_ = 0;
  ibv_context* ctx_ = nullptr;
  ibv_pd* pd_ = nullptr;
  ibv_cq* cq_ = nullptr;
  ibv_qp* qp_ = nullptr;
  ibv_mr* mr_ = nullptr;
  std::vector<char> buf_;
  int gidIndex_ = -1;
  ibv_gid gid_{};
  ibv_mtu mtu_ = IBV_MTU_1024;
};

/// Fills `n` bytes with a pattern derived from `seed`.
void Fill(char* p, size_t n, unsigned seed) {
  for (size_t i = 0; i < n; i++) p[i] = static_cast<char>((i * 131 + seed) & 0xff);
}

/// True when `n` bytes hold Fill's pattern for `seed`.
bool Holds(const char* p, size_t n, unsigned seed) {
  for (size_t i = 0; i < n; i++) {
    if (p[i] != static_cast<char>((i * 131 + seed) & 0xff)) return false;
  }
  return true;
}

/// The tx_bytes counter of network interface `ndev` (0 when unreadable).
std::uint64_t TxBytes(const std::string& ndev) {
  unsigned long long v = 0;
  if (FILE* f = std::fopen(("/sys/class/net/" + ndev + "/statistics/tx_bytes").c_str(), "r")) {
    if (std::fscanf(f, "%llu", &v) != 1) v = 0;
    std::fclose(f);
  }
  return v;
}

/// Sends our Wire and receives the peer's over the bootstrap socket.
Wire Exchange(int fd, const Wire& mine) {
  Wire theirs;
  Check(write(fd, &mine, sizeof mine) == static_cast<ssize_t>(sizeof mine), "bootstrap socket write");
  Check(read(fd, &theirs, sizeof theirs) == static_cast<ssize_t>(sizeof theirs), "bootstrap socket read");
  return theirs;
}

/// One-byte rendezvous over the bootstrap socket.
void Sync(int fd) {
  char c = 1;
  Check(write(fd, &c, 1) == 1, "bootstrap sync write");
  Check(read(fd, &c, 1) == 1, "bootstrap sync read (did the peer fail?)");
}

/// Both QPs in this process: a = rxe_h0r<rail>, b = rxe_h1r<rail>.
void RunLocal(int rail, size_t size, int iters) {
  Endpoint a, b;
  a.Open("rxe_h0r" + std::to_string(rail), size);
  b.Open("rxe_h1r" + std::to_string(rail), size);
  const Wire wa = a.Describe();
  const Wire wb = b.Describe();
  a.Connect(wb);
  b.Connect(wa);
  const std::string veth = "h0r" + std::to_string(rail);
  const std::uint64_t tx0 = TxBytes(veth);

  Fill(a.scratch(), size, 1);
  a.Post(IBV_WR_RDMA_WRITE, a.scratch(), size, &wb, 0, 1);
  a.Wait("RDMA WRITE");
  Check(Holds(b.target(), size, 1), "RDMA WRITE: data at the target differs");

  Fill(b.target(), size, 2);
  a.Post(IBV_WR_RDMA_READ, a.target(), size, &wb, 0, 2);
  a.Wait("RDMA READ");
  Check(Holds(a.target(), size, 2), "RDMA READ: data read back differs");

  b.PostRecv(b.scratch(), size);
  Fill(a.scratch(), 4096, 3);
  a.Post(IBV_WR_SEND, a.scratch(), 4096, nullptr, 0, 3);
  a.Wait("SEND");
  ibv_wc wc = b.Wait("RECV");
  Check(wc.opcode == IBV_WC_RECV && wc.byte_len == 4096, "RECV completion: wrong opcode or length");
  Check(Holds(b.scratch(), 4096, 3), "SEND: data received differs");

  b.PostRecv(nullptr, 0);
  Fill(a.scratch(), size, 4);
  a.Post(IBV_WR_RDMA_WRITE_WITH_IMM, a.scratch(), size, &wb, 0, 4, 0x5259'0001);
  a.Wait("RDMA WRITE WITH IMM");
  wc = b.Wait("RECV of WRITE WITH IMM");
  Check(wc.opcode == IBV_WC_RECV_RDMA_WITH_IMM && (wc.wc_flags & IBV_WC_WITH_IMM) &&
            ntohl(wc.imm_data) == 0x5259'0001 && wc.byte_len == size,
        "WRITE WITH IMM: wrong completion (opcode " + std::to_string(wc.opcode) + ", imm " +
            std::to_string(ntohl(wc.imm_data)) + ", byte_len " + std::to_string(wc.byte_len) + ")");
  Check(Holds(b.target(), size, 4), "WRITE WITH IMM: data at the target differs");

  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < iters; i++) {
    a.Post(IBV_WR_RDMA_WRITE, a.scratch(), size, &wb, 0, 10 + i);
    a.Wait("RDMA WRITE (loop)");
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const std::uint64_t tx = TxBytes(veth) - tx0;
  std::printf("rail %d: %s (gid %d) <-> %s (gid %d), RoCE MTU %d: WRITE, READ, SEND, WRITE_WITH_IMM ok; "
              "%d x %zu B WRITE in %.2f s (%.1f MB/s); %s tx %llu B\n",
              rail, a.name().c_str(), a.gidIndex(), b.name().c_str(), b.gidIndex(), a.mtuBytes(), iters, size, s,
              iters * size / s / 1e6, veth.c_str(), static_cast<unsigned long long>(tx));
  errno = 0;
  Check(tx >= static_cast<std::uint64_t>(iters) * size,
        "the WRITEs did not cross the rail veth " + veth + " (tx " + std::to_string(tx) + " B)");
}

/// The passive side in a child process, the active side here. `parentDev` and
/// `childDev` may be the same device (loopback). Checks a cross-process READ, WRITEs
/// and a WRITE WITH IMM whose completion the child verifies.
void RunTwoProcesses(const std::string& parentDev, const std::string& childDev, size_t size, int iters) {
  int sv[2];
  Check(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0, "socketpair");
  std::fflush(nullptr);
  const pid_t pid = fork();
  Check(pid >= 0, "fork");
  if (pid == 0) {
    close(sv[0]);
    Endpoint b;
    b.Open(childDev, size);
    const Wire wa = Exchange(sv[1], b.Describe());
    b.Connect(wa);
    Fill(b.target(), size, 5);  // what the parent READs
    b.PostRecv(nullptr, 0);     // for the WRITE WITH IMM
    Sync(sv[1]);                // 1: ready
    const ibv_wc wc = b.Wait("RECV of WRITE WITH IMM");
    if (wc.opcode != IBV_WC_RECV_RDMA_WITH_IMM || ntohl(wc.imm_data) != 0x5259'0002) {
      std::fprintf(stderr, "verbs_smoke: FAIL: child: WRITE WITH IMM completion opcode %d imm %u\n", wc.opcode,
                   ntohl(wc.imm_data));
      std::_Exit(3);
    }
    Sync(sv[1]);  // 2: parent done
    std::_Exit(Holds(b.target(), size, 6) ? 0 : 4);
  }
  close(sv[1]);
  Endpoint a;
  a.Open(parentDev, size);
  const Wire wb = Exchange(sv[0], a.Describe());
  a.Connect(wb);
  Sync(sv[0]);
  a.Post(IBV_WR_RDMA_READ, a.target(), size, &wb, 0, 1);
  a.Wait("RDMA READ");
  Check(Holds(a.target(), size, 5), "cross-process RDMA READ: data read back differs");
  for (int i = 0; i < iters; i++) {
    Fill(a.scratch(), size, 7);
    a.Post(IBV_WR_RDMA_WRITE, a.scratch(), size, &wb, 0, 2 + i);
    a.Wait("RDMA WRITE");
  }
  Fill(a.scratch(), size, 6);  // the last one, with immediate, leaves pattern 6
  a.Post(IBV_WR_RDMA_WRITE_WITH_IMM, a.scratch(), size, &wb, 0, 1000, 0x5259'0002);
  a.Wait("RDMA WRITE WITH IMM");
  Sync(sv[0]);
  int st = 0;
  Check(waitpid(pid, &st, 0) == pid, "waitpid");
  errno = 0;
  Check(WIFEXITED(st) && WEXITSTATUS(st) == 0,
        "child (" + childDev + ") failed: exit status " + std::to_string(WIFEXITED(st) ? WEXITSTATUS(st) : -1) +
            " (3: bad WRITE WITH IMM completion, 4: wrong WRITE data)");
  std::printf("%s -> %s (two processes): READ, %d WRITEs, WRITE_WITH_IMM of %zu B ok\n", parentDev.c_str(),
              childDev.c_str(), iters, size);
}

bool Exists(const std::string& dev) {
  return access(("/sys/class/infiniband/" + dev).c_str(), F_OK) == 0;
}

int Usage(const char* argv0) {
  std::fprintf(stderr, "usage: %s [--mode local|fork|loopback] [--rails N] [--iters N] [--size BYTES]\n", argv0);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::string mode = "local";
  int rails = -1;
  int iters = 50;
  size_t size = 1 << 20;
  for (int i = 1; i < argc; i++) {
    const std::string s = argv[i];
    const bool hasValue = i + 1 < argc;
    if (s == "--mode" && hasValue) {
      mode = argv[++i];
    } else if (s == "--rails" && hasValue) {
      rails = std::atoi(argv[++i]);
    } else if (s == "--iters" && hasValue) {
      iters = std::atoi(argv[++i]);
    } else if (s == "--size" && hasValue) {
      size = std::strtoul(argv[++i], nullptr, 0);
    } else {
      return Usage(argv[0]);
    }
  }
  if ((mode != "local" && mode != "fork" && mode != "loopback") || iters < 0 || size == 0 || size > (64u << 20)) {
    return Usage(argv[0]);
  }
  const char* laneRails = std::getenv("RXE_LANE_RAILS");
  const bool inLane = std::getenv("RXE_LANE_HOSTS") != nullptr;
  if (rails < 0) rails = laneRails ? std::atoi(laneRails) : 1;
  if (rails < 1) return Usage(argv[0]);

  std::vector<std::string> missing;
  for (int r = 0; r < rails; r++) {
    for (const char* host : {"rxe_h0r", "rxe_h1r"}) {
      const std::string dev = host + std::to_string(r);
      if (!Exists(dev) && (mode != "loopback" || dev[5] == '0')) missing.push_back(dev);
    }
  }
  if (!missing.empty()) {
    if (inLane) {
      Fail("inside the soft-RoCE lane (RXE_LANE_HOSTS=" + std::string(std::getenv("RXE_LANE_HOSTS")) +
           ") but device " + missing.front() + " does not exist");
    }
    std::printf("SKIP: no %s RDMA device; the verbs tests run inside the soft-RoCE lane "
                "(tests/lanes/run-verbs.sh BUILD_DIR)\n",
                missing.front().c_str());
    return kSkip;
  }

  for (int r = 0; r < rails; r++) {
    const std::string h0 = "rxe_h0r" + std::to_string(r);
    const std::string h1 = "rxe_h1r" + std::to_string(r);
    if (mode == "local") {
      RunLocal(r, size, iters);
    } else if (mode == "fork") {
      RunTwoProcesses(h0, h1, size, iters);
    } else {
      RunTwoProcesses(h0, h0, size, iters);
    }
  }
  std::printf("PASS (%s, %d rail%s)\n", mode.c_str(), rails, rails == 1 ? "" : "s");
  return 0;
}
