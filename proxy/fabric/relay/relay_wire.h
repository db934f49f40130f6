// Wire format of relayed Endpoints (proxy/fabric/relay/): what a source, a relay
// and a target-side relay say to each other over plain fabric operations.
//
//   - Slots. The relay keeps a ring of slots per route, registered for remote write.
//     The source writes each chunk of an operation into the next slot: the payload
//     at kSlotPayloadOffset, then a SlotHeader at offset 0 with an immediate that
//     names the route and the slot (MakeSlotImmediate). The fabric's ordering rule
//     makes the immediate visible only after both Writes' data, so when the relay
//     sees the immediate the slot is whole. Read data comes back the same way, into
//     a ring of return slots at the source.
//   - Control records (Endpoint::Send): opening a route, credits, results, errors.
//
// Every byte of a slot or a record is peer data: DecodeSlotHeader and
// DecodeControl check shape and limits before anything looks at meaning.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "env/status.h"
#include "proxy/fabric/fabric_error.h"
#include "proxy/fabric/remote_key.h"

namespace railyard::fabric::relay {

/// Wire version of slots and control records; every other is refused. 2: a kWrite
/// slot names its Write's total bytes (opBytes) and the chunk's offset in it (value).
constexpr uint8_t kRelayWireVersion = 2;
/// Bytes reserved at the start of every slot for its header and the packed target key.
constexpr uint64_t kSlotPayloadOffset = 256;
/// Largest number of slots of one ring (the immediate carries a 16-bit slot index).
constexpr uint32_t kMaxSlots = 4096;
/// Largest route id (the immediate carries a 16-bit route id; 0 is never used).
constexpr uint32_t kMaxRouteId = 0xffff;
/// Largest error text a relay sends back, bytes.
constexpr size_t kMaxErrorText = 1024;

/// What a slot carries.
enum class SlotKind : uint8_t {
  kWrite = 1,     ///< a chunk of a Write: payload -> target [addr, + payloadBytes), bytes
                  ///< [value, + payloadBytes) of a Write of opBytes bytes
  kRecord = 2,    ///< a Send record: payload = the record
  kRead = 3,      ///< a Read request of opBytes bytes at addr (no payload)
  kFetchAdd = 4,  ///< a FetchAdd of `value` at addr (no payload)
  kReadData = 5,  ///< relay -> source: bytes [offset, + payloadBytes) of Read `opSeq`
};

/// Slot flag: the op's last chunk (Writes: carries the op's immediate when kSlotHasImm).
constexpr uint16_t kSlotLast = 1;
/// Slot flag: `imm` is the Write's immediate, to be delivered with the last chunk.
constexpr uint16_t kSlotHasImm = 2;

/// The header at offset 0 of a slot (64 bytes, little-endian), followed by the
/// packed RemoteKey of the target region (keyBytes, up to 192).
struct SlotHeader {
  uint32_t magic = 0;         ///< "RYRS"
  uint8_t version = 0;
  uint8_t kind = 0;           ///< SlotKind
  uint16_t flags = 0;
  uint32_t imm = 0;
  uint32_t payloadBytes = 0;  ///< bytes at kSlotPayloadOffset
  uint64_t slotSeq = 0;       ///< position in the route's slot stream (slot index = slotSeq % slots)
  uint64_t opSeq = 0;         ///< the relayed op's sequence at the source (errors name it)
  uint64_t addr = 0;          ///< target address (kWrite chunk, kRead, kFetchAdd)
  uint64_t opBytes = 0;       ///< kWrite: the Write's total bytes; kRead: bytes; kReadData: the Read's total bytes
  uint64_t value = 0;         ///< kFetchAdd: the addend; kWrite / kReadData: offset of this chunk in its op
  uint16_t keyBytes = 0;      ///< packed RemoteKey that follows (0 for kRecord, kReadData)
  uint16_t reserved = 0;
  uint32_t reserved2 = 0;
};
static_assert(sizeof(SlotHeader) == 64);
constexpr uint32_t kSlotMagic = 0x53525952;  // "RYRS"

/// A slot's header, its target key (when it has one) and its payload size, as read
/// from a ring by the receiving side.
struct SlotView {
  SlotHeader header;
  RemoteKey key;  ///< valid when header.keyBytes > 0
};

/// Writes `h` and the packed `key` (when non-empty) into `slot` (kSlotPayloadOffset
/// bytes at least). InvalidArgument when the key does not fit.
Status EncodeSlotHeader(const SlotHeader& h, std::span<const uint8_t> packedKey, uint8_t* slot);

/// Reads and checks the header of a slot of `slotBytes` bytes received as
/// slot sequence `expectSeq`: magic, version, a known kind, known flags, the
/// payload inside the slot, the sequence, a kWrite chunk inside its Write (kSlotLast
/// exactly on the chunk that ends it, kSlotHasImm only there, an empty chunk only
/// for an empty Write), and (for kinds that have one) a key that RemoteKey::Unpack
/// accepts. Whether chunks agree with each other is the relay's stream check
/// (forward_route.h). InvalidArgument naming what is wrong (peer data);
/// `out` unchanged on error. `slotBytes` below kSlotPayloadOffset is refused.
Status DecodeSlotHeader(const uint8_t* slot, uint64_t slotBytes, uint64_t expectSeq, SlotView* out);

/// The immediate that announces a slot: route id (1..kMaxRouteId) in the high 16
/// bits, the slot index (< kMaxSlots) in the low 16.
inline uint32_t MakeSlotImmediate(uint32_t routeId, uint32_t slot) { return (routeId << 16) | (slot & 0xffff); }
inline uint32_t ImmediateRoute(uint32_t imm) { return imm >> 16; }
inline uint32_t ImmediateSlot(uint32_t imm) { return imm & 0xffff; }

/// Control record kinds.
enum class ControlKind : uint8_t {
  kOpen = 1,          ///< source -> relay: open a route (RouteOpen)
  kOpenOk = 2,        ///< relay -> source: route open (relay route id, up ring key)
  kCredit = 3,        ///< relay -> source: slots [0, a) of the up ring are done (cumulative)
  kReturnCredit = 4,  ///< source -> relay: return slots [0, a) are consumed (cumulative)
  kFetchAddResult = 5,///< relay -> source: FetchAdd op `a` returned old value `b`
  kError = 6,         ///< relay -> source: op `a` failed with FabricErrc `b`, text follows
  kClose = 7,         ///< source -> relay: the route is closed
};

/// A control record: kind, the receiver's route id, two values, and for kOpen,
/// kOpenOk and kError a body (see RouteOpen / the text). 32-byte header:
/// magic "RYRC" u32, version u8, kind u8, reserved u16, route u32, body bytes u32,
/// a u64, b u64.
struct Control {
  ControlKind kind = ControlKind::kCredit;
  uint32_t route = 0;  ///< the route id at the receiver (kOpen: the source's own id)
  uint64_t a = 0;
  uint64_t b = 0;
  std::vector<uint8_t> body;
};
constexpr uint32_t kControlMagic = 0x43525952;  // "RYRC"
constexpr size_t kControlHeaderBytes = 32;

/// Bytes of `c` on the wire.
std::vector<uint8_t> EncodeControl(const Control& c);
/// Parses a control record: size, magic, version, a known kind, body size matching.
/// InvalidArgument naming what is wrong.
Status DecodeControl(std::span<const uint8_t> bytes, Control* out);

/// The body of kOpen: what the source asks of the relay.
struct RouteOpen {
  uint32_t slots = 0;          ///< up ring slots the source wants (the relay may grant fewer)
  uint64_t slotBytes = 0;      ///< bytes per slot (header area + payload)
  uint32_t returnSlots = 0;    ///< slots of the source's return ring
  std::vector<uint8_t> source;  ///< the source's (leg) Worker address: where the relay answers
  std::vector<uint8_t> target;  ///< the final target's Worker address
  std::vector<uint8_t> returnKey;  ///< packed RemoteKey of the source's return ring
  uint64_t nonce = 0;           ///< random, echoed in kOpenOk
  /// HMAC-SHA256 of the body before it under the cluster key ("railyard.fabric.relay.open"),
  /// or all zero without a key.
  uint8_t mac[32] = {};
};
/// Most bytes of a Worker address inside kOpen.
constexpr size_t kMaxAddressBytes = 512;
std::vector<uint8_t> EncodeRouteOpen(const RouteOpen& o);
/// InvalidArgument naming the field that is wrong (sizes, slot counts, the key).
Status DecodeRouteOpen(std::span<const uint8_t> body, RouteOpen* out);
/// Bytes of an encoded RouteOpen covered by its MAC (all but the trailing 32).
constexpr size_t kOpenMacBytes = 32;

/// Packs a FabricError for kError: b = errc, body = "<text>" (cut at kMaxErrorText).
Control MakeErrorControl(uint32_t route, uint64_t opSeq, const FabricError& err);

}  // namespace railyard::fabric::relay
