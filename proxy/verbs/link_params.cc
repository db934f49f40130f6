// MTU negotiation and QP link attributes; see link_params.h.
#include "proxy/verbs/link_params.h"

#include <algorithm>
#include <cmath>

#include "env/log.h"

namespace railyard::proxy::verbs {
namespace {

// include/rdma/ib_verbs.h + ib_pack.h: IB_GRH_BYTES 40, IB_UDP_BYTES 8, IB_BTH_BYTES 12,
// IB_EXT_XRC_BYTES 4, IB_EXT_ATOMICETH_BYTES 28, IB_ICRC_BYTES 4 (iboe_get_mtu).
constexpr int kRoceHeaderBytes = 40 + 8 + 12 + 4 + 28 + 4;

// NCCL's largest data QP count per connection (NCCL_IB_MAX_QPS).
constexpr int kMaxQps = 128;

}  // namespace

int IbMtuBytes(IbMtu mtu) { return 128 << static_cast<int>(mtu); }

std::optional<IbMtu> IbMtuFromBytes(int bytes) {
  for (int v = 1; v <= 5; ++v) {
    if ((128 << v) == bytes) return static_cast<IbMtu>(v);
  }
  return std::nullopt;
}

std::optional<IbMtu> IbMtuFromEnum(int value) {
  if (value < 1 || value > 5) return std::nullopt;
  return static_cast<IbMtu>(value);
}

std::optional<IbMtu> RoceActiveMtu(int netdevMtuBytes) {
  const int payload = netdevMtuBytes - kRoceHeaderBytes;
  for (int v = 5; v >= 1; --v) {
    if (payload >= (128 << v)) return static_cast<IbMtu>(v);
  }
  return std::nullopt;
}

MtuNegotiation NegotiateMtu(IbMtu localActive, IbMtu remoteActive) {
  MtuNegotiation n;
  n.mtu = std::min(localActive, remoteActive);
  n.mismatch = localActive != remoteActive;
  if (n.mismatch) {
    n.message = "active MTU mismatch: local " + std::to_string(IbMtuBytes(localActive)) +
                " bytes, remote " + std::to_string(IbMtuBytes(remoteActive)) + " bytes; using " +
                std::to_string(IbMtuBytes(n.mtu)) + " bytes on both sides";
    RY_INFO(log::kNet, "NET/Railyard/verbs: %s", n.message.c_str());
  }
  return n;
}

LinkConfig LinkConfigFrom(const env::Config& config) {
  LinkConfig c;
  c.trafficClass = config.trafficClass;
  c.serviceLevel = config.serviceLevel;
  c.timeout = config.ibTimeout;
  c.retryCnt = config.ibRetryCnt;
  c.qpsPerConn = config.qpsPerConn;
  return c;
}

QpLinkAttrs ResolveQpLinkAttrs(const LinkConfig& config, int initTrafficClass) {
  QpLinkAttrs a;
  const char* kInit = "trafficClass (ncclConfig_t)";
  auto resolve = [&](int configured, const char* name, const char* field, int maxValue,
                     std::uint8_t* out, std::string* source) {
    if (configured >= 0) {
      *out = static_cast<std::uint8_t>(std::min(configured, maxValue));
      *source = name;
    } else if (initTrafficClass >= 0 && initTrafficClass <= maxValue) {
      *out = static_cast<std::uint8_t>(initTrafficClass);
      *source = kInit;
    } else {
      *out = 0;
      *source = "default";
      if (initTrafficClass >= 0) {
        if (!a.note.empty()) a.note += "; ";
        a.note += "trafficClass " + std::to_string(initTrafficClass) + " does not fit the " + field + " (0.." +
                  std::to_string(maxValue) + "); " + field + " 0";
      }
    }
  };
  resolve(config.trafficClass, "RAILYARD_TC", "traffic class", 255, &a.trafficClass, &a.trafficClassSource);
  resolve(config.serviceLevel, "RAILYARD_SL", "service level", 15, &a.serviceLevel, &a.serviceLevelSource);
  a.timeout = static_cast<std::uint8_t>(std::clamp(config.timeout, 0, 31));
  a.retryCnt = static_cast<std::uint8_t>(std::clamp(config.retryCnt, 0, 7));
  return a;
}

double QpTimeoutSeconds(int timeout) {
  if (timeout <= 0) return 0.0;
  return 4.096e-6 * std::ldexp(1.0, timeout);
}

int DataQpCount(int qpsPerConn, int localNdevs, int remoteNdevs) {
  const int q = std::max(qpsPerConn, 1);
  const int n = std::max({localNdevs, remoteNdevs, 1});
  return std::min(q * n, kMaxQps);
}

}  // namespace railyard::proxy::verbs
