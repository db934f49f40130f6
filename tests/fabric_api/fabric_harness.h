// The fabric suite's harness: the transports it runs over (one parametrized suite,
// every test body written once against proxy/fabric's interface, skipped by
// capability), a pair of Domains + Workers + an Endpoint, guarded buffers, and a
// progress loop bounded by a deadline (no sleeps as barriers).
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "proxy/fabric/domain.h"
#include "proxy/fabric/endpoint.h"
#include "proxy/fabric/worker.h"

namespace railyard::fabric::testing {

/// Per-test settings a transport case applies to the Domains it makes.
struct Knobs {
  int timeoutMs = 20000;  ///< the Domain's timeout (RAILYARD_TIMEOUT_MS equivalent)
  /// Verbs case only: the Worker's bootstrap listener port (0: ephemeral) and the
  /// connection-setup deadline in ms (0: the case's default, at least 20 s).
  uint16_t verbsBootstrapPort = 0;
  int verbsConnectTimeoutMs = 0;
  /// Verbs case only: VerbsOptions::acceptOnlyFrom (empty: any source).
  std::vector<std::string> verbsAcceptOnlyFrom;
};

/// One transport configuration the suite runs over.
struct TransportCase {
  std::string name;  ///< test-name suffix, e.g. "tcp_2rails"
  /// Makes a Domain; a Status with code kInvalidUsage means "not available here" (skip).
  std::function<Status(const Knobs&, std::unique_ptr<Domain>*)> make;
  /// Relayed cases: payload bytes of one relay slot (the chunk a Write is cut into); 0 otherwise.
  uint64_t relaySlotPayload = 0;
};

/// Every transport the suite runs over: TCP on one loopback rail; TCP on two
/// loopback rails (127.0.0.1, 127.0.0.2, speeds 2:1, two sockets each, small stripe
/// threshold, chunks and 16 KiB per socket per Progress call, so striping and landings
/// interleaved across sockets are exercised); verbs (every RDMA port of the host, or in
/// the soft-RoCE lane host h0's and h1's rails in turn; 64 KiB stripe threshold,
/// 256 KiB chunks; not available, so skipped, on a host without RDMA ports); the fake
/// in-process transport; the fake with its target's events one Progress behind its acks
/// (fake_trailing, FakeOptions::targetEventsTrail: as a verbs target polls its CQ);
/// relayed routes over fake and TCP (relayed_case.cc).
std::vector<TransportCase> FabricTransports();
/// The verbs case's Domain maker (exposed for tools and multi-process tests).
Status MakeVerbsDomain(const Knobs& knobs, std::unique_ptr<Domain>* out);
/// gtest prints a case by its name.
inline void PrintTo(const TransportCase& c, std::ostream* os) { *os << c.name; }
/// The test-name suffix of a case (for INSTANTIATE_TEST_SUITE_P).
inline std::string CaseName(const ::testing::TestParamInfo<TransportCase>& p) { return p.param.name; }

/// One side: a Domain and a Worker, and the events its Worker returned.
struct Side {
  std::unique_ptr<Domain> domain;
  std::unique_ptr<Worker> worker;
  std::vector<Event> events;
};

/// Bytes [G, G + n) of a bigger buffer are the usable part; the G guard bytes on
/// each side hold 0xA5 and must stay so.
class Guarded {
 public:
  static constexpr size_t kGuard = 4096;
  explicit Guarded(size_t n) : bytes_(n), mem_(n + 2 * kGuard, 0xA5) { std::memset(data(), 0, n); }
  uint8_t* data() { return mem_.data() + kGuard; }
  size_t size() const { return bytes_; }
  bool GuardsIntact() const {
    for (size_t i = 0; i < kGuard; ++i) {
      if (mem_[i] != 0xA5 || mem_[kGuard + bytes_ + i] != 0xA5) return false;
    }
    return true;
  }

 private:
  size_t bytes_;
  std::vector<uint8_t> mem_;
};

/// Fills `p[0, n)` with a pattern of `seed` (different seeds differ at every 8 bytes).
void FillPattern(uint8_t* p, size_t n, uint64_t seed);
/// Index of the first byte of p[0, n) that differs from the pattern of `seed`, or -1.
int64_t FirstMismatch(const uint8_t* p, size_t n, uint64_t seed);

/// `r`'s key as a peer gets it: packed, sent, unpacked (a failed unpack fails the test).
RemoteKey Exchange(const Region* r);

/// Number of entries in /proc/self/fd and /proc/self/task.
size_t OpenFds();
size_t Threads();

/// The suite's fixture: sides A (initiator) and B (target) and an Endpoint A -> B.
class FabricTest : public ::testing::TestWithParam<TransportCase> {
 protected:
  void SetUp() override;
  void TearDown() override;

  /// Makes a side with the case's transport and `knobs`; false when it cannot (a test
  /// failure, or `skip_` set when the transport is not available on this host).
  bool MakeSide(Side* side, const Knobs& knobs);
  /// Progresses both Workers until `done()` holds or `ms` pass; true when it held.
  /// `done` is checked after every Progress call of B, so it sees B's memory at
  /// the moment each event was returned.
  bool PumpUntil(const std::function<bool()>& done, int ms = 60000);
  /// Waits for the kDone/kError event of `cookie` at A, removes and returns it (an
  /// event of kind kError with TIMEOUT when none came in `ms`).
  Event Wait(uint64_t cookie, int ms = 60000);
  /// Registers and fails the test on error.
  const Region* Reg(Side& side, void* p, size_t n, uint32_t access);
  /// A new endpoint A -> B (the old one is dropped first).
  void Reconnect();
  bool Has(uint64_t caps) const { return a_.domain->capabilities().Has(caps); }

  Knobs knobs_;
  Side a_, b_;
  std::unique_ptr<Endpoint> ep_;
  std::string skip_;  ///< why the transport is not available here (SetUp skips the test)
};

/// "every op failed with a named remote-access error": the precise name when the
/// transport has kCapPreciseRemoteErrors, else REMOTE_ACCESS.
void ExpectRemoteError(const Domain& d, const Event& e, FabricErrc precise);

}  // namespace railyard::fabric::testing
