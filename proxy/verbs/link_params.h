// Link-level QP parameters of the verbs transport: path MTU negotiation and the
// traffic class / service level / timeout / retry policy, as pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "env/config.h"

namespace railyard::proxy::verbs {

/// The InfiniBand MTU enumeration, numerically equal to libibverbs' enum ibv_mtu
/// (IBV_MTU_256 = 1 ... IBV_MTU_4096 = 5), used for ibv_port_attr::active_mtu and
/// ibv_qp_attr::path_mtu. On RoCE it is the payload MTU of one packet, not the
/// Ethernet MTU (see RoceActiveMtu).
enum class IbMtu : int { k256 = 1, k512 = 2, k1024 = 3, k2048 = 4, k4096 = 5 };

/// Bytes of `mtu`: 256, 512, 1024, 2048 or 4096.
int IbMtuBytes(IbMtu mtu);

/// The enum value for exactly 256, 512, 1024, 2048 or 4096 bytes; nullopt otherwise.
std::optional<IbMtu> IbMtuFromBytes(int bytes);

/// The enum for an ibv_mtu value as sent on the wire (1..5); nullopt otherwise.
std::optional<IbMtu> IbMtuFromEnum(int value);

/// The active MTU the kernel derives for a RoCE port from its netdev's MTU in bytes
/// (Linux include/rdma/ib_addr.h iboe_get_mtu): the netdev MTU less 96 bytes of
/// headers (GRH 40, UDP 8, BTH 12, XRC ext 4, AtomicETH 28, ICRC 4), rounded down
/// to an IB MTU. 1500 -> 1024, 9000 -> 4096, 4200 -> 4096, 4000 -> 2048.
/// nullopt when less than 256 bytes remain (the port cannot carry RoCE).
std::optional<IbMtu> RoceActiveMtu(int netdevMtuBytes);

/// The outcome of NegotiateMtu.
struct MtuNegotiation {
  IbMtu mtu = IbMtu::k1024;  ///< min(local, remote): the QP's path_mtu on both sides
  bool mismatch = false;     ///< local != remote
  /// Empty when they agree; otherwise e.g. "active MTU mismatch: local 4096 bytes,
  /// remote 1024 bytes; using 1024 bytes on both sides".
  std::string message;
};

/// path_mtu for a connection: min(local active MTU, remote active MTU), computed the
/// same way by both ends. NCCL 2.28.9 applies the min only on the connect side and
/// the accept side takes the sender's MTU as given (fact sheet 5.2, RTR); Railyard
/// makes it symmetric so a host with the larger MTU never sends packets the other
/// cannot take. A mismatch sets `mismatch`, fills `message` and logs it at INFO
/// (NET). Remote values read off the wire must go through IbMtuFromEnum first.
MtuNegotiation NegotiateMtu(IbMtu localActive, IbMtu remoteActive);

/// The link-level settings read from the configuration.
struct LinkConfig {
  int trafficClass = -1;  ///< RAILYARD_TC (alias NCCL_IB_TC): 0..255, -1 = not set
  int serviceLevel = -1;  ///< RAILYARD_SL (alias NCCL_IB_SL): 0..15, -1 = not set
  int timeout = 20;       ///< RAILYARD_IB_TIMEOUT (alias NCCL_IB_TIMEOUT): 0..31, exponent (see QpTimeoutSeconds)
  int retryCnt = 7;       ///< RAILYARD_IB_RETRY_CNT (alias NCCL_IB_RETRY_CNT): 0..7
  int qpsPerConn = 1;     ///< RAILYARD_QPS_PER_CONN (alias NCCL_IB_QPS_PER_CONNECTION): 1..128
};

/// The LinkConfig fields of `config`.
LinkConfig LinkConfigFrom(const env::Config& config);

/// QP attributes that follow from the configuration (the rest of the QP setup is
/// the data path's). Values are ready for ibv_qp_attr / ibv_ah_attr.
struct QpLinkAttrs {
  std::uint8_t trafficClass = 0;  ///< ah_attr.grh.traffic_class (RoCE: DSCP << 2 | ECN)
  std::uint8_t serviceLevel = 0;  ///< ah_attr.sl (RoCE: mapped to the 802.1p priority)
  std::uint8_t timeout = 20;      ///< ibv_qp_attr::timeout (RTS)
  std::uint8_t retryCnt = 7;      ///< ibv_qp_attr::retry_cnt (RTS)
  std::uint8_t rnrRetry = 7;      ///< ibv_qp_attr::rnr_retry: 7 = retry forever, fixed as in NCCL 2.28.9
  std::uint8_t minRnrTimer = 12;  ///< ibv_qp_attr::min_rnr_timer (RTR), as in NCCL 2.28.9 (0.64 ms)
  std::uint8_t hopLimit = 255;    ///< ah_attr.grh.hop_limit, as in NCCL 2.28.9
  /// Where trafficClass came from: "RAILYARD_TC", "trafficClass (ncclConfig_t)" or "default".
  std::string trafficClassSource;
  /// Where serviceLevel came from: "RAILYARD_SL", "trafficClass (ncclConfig_t)" or "default".
  std::string serviceLevelSource;
  /// Set when the init trafficClass could not be used for one of them (e.g. 106 does
  /// not fit the 4-bit service level); callers log it at INFO.
  std::string note;
};

/// Resolves the QP link attributes, the way NCCL 2.28.9 resolves NCCL_IB_TC and
/// NCCL_IB_SL (net_ib.cc; nccl-net-abi.md, the v11 connect notes and 5.1):
///  - traffic class = RAILYARD_TC when set (>= 0); else `initTrafficClass` (the v11
///    init's ncclNetCommConfig_v11_t::trafficClass, from ncclConfig_t.trafficClass)
///    when defined (>= 0, i.e. not NCCL_NET_TRAFFIC_CLASS_UNDEF); else 0;
///  - service level = RAILYARD_SL when set, else `initTrafficClass` when defined, else 0;
///  - timeout and retry count straight from the configuration.
/// Difference from NCCL: an init trafficClass that does not fit the field (> 255 for
/// the traffic class, > 15 for the service level, which NCCL would pass on and
/// ibv_modify_qp would reject) is not used for that field; it gets 0 and `note` says so.
/// On RoCE the sender chooses TC and SL and sends them to the receiver in the
/// connection metadata (as NCCL does), so the connect side's values win.
QpLinkAttrs ResolveQpLinkAttrs(const LinkConfig& config, int initTrafficClass);

/// Seconds a QP waits for an ACK before retrying at `timeout` (IBA 9.7.6.1.3 local
/// ACK timeout: 4.096 us x 2^timeout): 20 -> about 4.29 s. 0 means "wait forever"
/// and returns 0.
double QpTimeoutSeconds(int timeout);

/// Number of data QPs of one connection, as NCCL 2.28.9 computes it (fact sheet 5.1
/// NCCL_IB_QPS_PER_CONNECTION, 5.2 handshake step 2):
/// max(qpsPerConn x localNdevs, qpsPerConn x remoteNdevs), capped at 128.
/// `localNdevs`/`remoteNdevs` are the device counts of each side's (virtual) NIC, >= 1.
int DataQpCount(int qpsPerConn, int localNdevs, int remoteNdevs);

}  // namespace railyard::proxy::verbs
