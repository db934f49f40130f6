// One route at a relay host: the ring its source writes slots into, the staging
// ring Read data goes back through, the leg on to the next hop ("down") and the
// leg back to the source ("back").
//
// Slots are taken strictly in slot order, each as soon as it has landed (its
// immediate arrived): a Write chunk is written on from the slot, a record sent on,
// a FetchAdd or a Read posted on the down leg, so the down leg's own ordering rule
// carries the source's order to the target. A slot is done when its down op is
// (for a Read: when every chunk of it is back at the source); done slots, in order,
// are credited back to the source (one cumulative Credit record per Progress).
// A Read is cut into chunks of the payload size, each Read into a staging slot and
// Written on into the matching return slot of the source with an immediate; the
// source's ReturnCredit records say which return slots are free again. A Read
// waits for staging/return slots before later slots are taken, so no later op
// overtakes it on the down leg.
//
// A Write's chunks name its total and their offsets; the route checks they agree
// (CheckWriteStream) and forwards the last chunk of a Write of several with
// Endpoint::WriteFinal, so the target's one immediate reports the whole Write's bytes
// after every chunk's (the down leg's ordering rule).
//
// Every slot header and control record is peer data (relay_wire.h). Any error
// fails the route: the error (the down leg's named one, or MALFORMED) goes back
// to the source as an Error record and nothing more is forwarded.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "proxy/fabric/domain.h"
#include "proxy/fabric/endpoint.h"
#include "proxy/fabric/event.h"
#include "proxy/fabric/relay/relay_options.h"
#include "proxy/fabric/relay/relay_wire.h"
#include "proxy/fabric/relay/slot_ring.h"

namespace railyard::fabric::relay {

/// See file comment. Made by the Forwarder.
class ForwardRoute {
 public:
  /// What the Forwarder decided when it accepted the open.
  struct Setup {
    uint32_t id = 0;           ///< this relay's route id (the source's immediates carry it)
    uint32_t clientRoute = 0;  ///< the source's route id (return immediates and records carry it)
    uint64_t sourcePeer = 0;   ///< the source's leg Worker id (every slot and record must come from it)
    size_t upPort = 0;         ///< Forwarder port the source reaches
    Domain* up = nullptr;      ///< that port's Domain
    Domain* down = nullptr;    ///< the Domain of the port towards the next hop
    uint32_t slots = 0;        ///< granted up-ring slots
    uint32_t returnSlots = 0;  ///< the source's return slots (= staging slots here)
    RemoteKey returnKey;       ///< the source's return ring
    const RelayOptions* options = nullptr;
    std::string nextHop;       ///< the next hop's host name for errors (NextHop::name; may be empty)
  };

  explicit ForwardRoute(Setup setup);
  /// Registers the rings on both Domains and takes the legs. Errors of Register.
  Status Init(std::unique_ptr<Endpoint> back, std::unique_ptr<Endpoint> down);
  ~ForwardRoute();

  /// Answers the source's open on the back leg: OpenOk with this route's id, the
  /// granted slots, the up ring's key, the source's `nonce` and the next hop's name
  /// (body: u16 key bytes, packed key, u64 nonce, name).
  void SendOpenOk(uint64_t nonce);
  /// The source's immediate for up slot `slot` arrived.
  void OnSlot(uint32_t slot);
  /// A control record from the source (kReturnCredit, kClose).
  void OnControl(const Control& c);
  /// A kDone/kError of one of this route's leg ops.
  void OnLegEvent(const Event& e);
  /// Takes the slots that have landed, posts what staging allows, credits.
  void Pump();
  /// The source's leg broke or went away: stop (no record can reach it).
  void Abandon(const std::string& why);
  /// Closed, or failed with its error record out: the Forwarder may destroy it.
  bool Finished() const;

  uint32_t id() const { return s_.id; }
  uint64_t sourcePeer() const { return s_.sourcePeer; }
  size_t upPort() const { return s_.upPort; }
  bool failed() const { return failed_; }
  /// An error record went back to the source (the route failed while its source was
  /// there to hear it). False for a route dropped because its source went away (its
  /// leg closed or reset, e.g. a comm closed at the end of a job with its close notice
  /// still in flight): nobody waits for that route any more.
  bool reportedError() const { return errorSent_; }
  const std::string& why() const { return why_; }
  uint64_t slotsForwarded() const { return processNext_; }
  uint64_t bytesForwarded() const { return bytesForwarded_; }
  std::chrono::steady_clock::time_point lastActivity() const { return lastActivity_; }

 private:
  struct UpSlot {
    bool arrived = false;
    bool busy = false;
    bool done = false;
    bool fetchAdd = false;
    bool readAllPosted = false;
    int pending = 0;  ///< Read chunks not yet back at the source
    uint64_t opSeq = 0;
  };
  struct Staging {
    int state = 0;  ///< 0 free, 1 reading from the target, 2 writing back to the source
    uint32_t upIdx = 0;
    uint64_t seq = 0, opSeq = 0, offset = 0, bytes = 0, total = 0;
  };
  /// One slot's work; false when the route failed.
  bool Take(uint32_t idx);
  /// The stream check of Write chunks (peer data): the chunks of one Write come back
  /// to back, each at the offset and address the one before ends, with the same op,
  /// total and key; a Write that starts past offset 0 (an upstream relay's
  /// WriteFinal) must follow Writes of this route that cover those bytes. MALFORMED
  /// (the route fails) otherwise; false then.
  bool CheckWriteStream(const SlotView& v);
  void PostReadChunks();
  void SendBack(const Control& c);
  void Error(FabricErrc errc, uint64_t opSeq, const std::string& what, const ErrorSite* site = nullptr);
  /// "the next hop h2", by host where the routing knows it ("the next hop" otherwise):
  /// the leg's own name is a Worker id and an address, which does not say which host
  /// died. Every error about the leg to the next hop names it so, whether the leg
  /// failed under an op or refused one posted after it had failed.
  std::string NextHopName() const { return s_.nextHop.empty() ? "the next hop" : "the next hop " + s_.nextHop; }
  size_t DownRegion() const { return s_.up == s_.down ? 0 : 1; }
  size_t UpRegion() const { return 0; }

  Setup s_;
  SlotRing up_;       ///< domains {up, down}: remote write by the source, local for the down leg
  SlotRing staging_;  ///< domains {up, down}: local for the back leg and for the down leg's Reads
  std::unique_ptr<Endpoint> back_, down_;
  std::vector<UpSlot> slots_;
  std::vector<Staging> stage_;
  uint64_t processNext_ = 0;  ///< next up slot sequence to take
  uint64_t released_ = 0;     ///< up slots [0, released_) done
  uint64_t credited_ = 0;
  uint64_t stagingSeq_ = 0;   ///< staging slots used so far
  uint64_t returnCredit_ = 0; ///< return slots the source has freed (cumulative)
  /// The Write whose chunks are under way (inWrite_): what its next chunk must say.
  struct WriteState {
    uint64_t opSeq = 0, bytes = 0, next = 0, nextAddr = 0;
    RemoteKey key;
  };
  /// The contiguous Write bytes this route carried last, to one key, ending at `end`.
  struct WriteRun {
    bool valid = false;
    uint64_t end = 0, bytes = 0;
    RemoteKey key;
  };
  bool inWrite_ = false;
  WriteState write_;
  WriteRun run_;
  bool reading_ = false;      ///< a Read's chunks are still being posted
  uint32_t readIdx_ = 0;
  RemoteKey readKey_;
  uint64_t readAddr_ = 0, readBytes_ = 0, readOffset_ = 0, readOpSeq_ = 0;
  bool failed_ = false, closed_ = false, abandoned_ = false, errorSent_ = false;
  std::string why_;
  uint64_t bytesForwarded_ = 0;
  std::chrono::steady_clock::time_point lastActivity_;
};

}  // namespace railyard::fabric::relay
