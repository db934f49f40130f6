// storage/snapshot/blob_mover: a gated Get (a blob faulted from the peer's swap file,
// announced piece by piece) reads each piece as it is announced, however short of a
// chunk; a Put's checksum covers every byte once, in order, chunk after chunk. Over
// the fake in-process transport: the target's Worker is progressed on a thread of its
// own, as a serving process would.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "proxy/fabric/access.h"
#include "proxy/fabric/fake/fake_transport.h"
#include "proxy/fabric/registration_cache.h"
#include "storage/snapshot/blob_mover.h"
#include "storage/snapshot/swap_file.h"

namespace railyard::storage::snapshot {
namespace {

/// An initiator (mover, Endpoint) and a target (a registered source region whose
/// Worker a thread progresses) on fake Domains.
struct MoverPair {
  std::unique_ptr<fabric::Domain> initDomain, targetDomain;
  std::unique_ptr<fabric::Worker> initWorker, targetWorker;
  std::unique_ptr<fabric::RegistrationCache> cache;
  std::unique_ptr<BlobMover> mover;
  std::unique_ptr<fabric::Endpoint> ep;
  std::vector<uint8_t> source;
  const fabric::Region* sourceRegion = nullptr;
  std::atomic<bool> stop{false};
  std::thread target;

  void Start(uint64_t bytes, const MoverOptions& options) {
    ASSERT_TRUE(fabric::fake::CreateFakeDomain({}, &initDomain).ok());
    ASSERT_TRUE(fabric::fake::CreateFakeDomain({}, &targetDomain).ok());
    ASSERT_TRUE(initDomain->CreateWorker(&initWorker).ok());
    ASSERT_TRUE(targetDomain->CreateWorker(&targetWorker).ok());
    cache = std::make_unique<fabric::RegistrationCache>(*initDomain);
    ASSERT_TRUE(BlobMover::Create(*cache, *initWorker, options, &mover).ok());
    source.resize(bytes);
    for (uint64_t i = 0; i < bytes; ++i) source[i] = static_cast<uint8_t>(i * 13 + (i >> 12) + 1);
    ASSERT_TRUE(targetDomain
                    ->Register(source.data(), bytes, fabric::kAccessLocal | fabric::kAccessRemoteRead |
                                                         fabric::kAccessRemoteWrite,
                               fabric::MemoryKind::kHost, &sourceRegion)
                    .ok());
    ASSERT_TRUE(initWorker->Connect(targetWorker->Address(), &ep).ok());
    target = std::thread([this] {
      std::vector<fabric::Event> events;
      while (!stop.load()) {
        events.clear();
        targetWorker->Progress(&events);
      }
    });
  }
  ~MoverPair() {
    stop = true;
    if (target.joinable()) target.join();
    ep.reset();
    mover.reset();
    if (sourceRegion != nullptr) (void)targetDomain->Deregister(sourceRegion);
  }
};

// 1 MiB read in 1 MiB chunks, announced in four 256 KiB pieces: each piece is read
// before the next is announced (the gate, asked to wait only when nothing is in
// flight, finds the pieces so far in `dst`). Before, a chunk waited for its whole
// 1 MiB, so a blob faulted in pieces was read only once all of it had landed.
TEST(BlobMoverGate, APieceShortOfAChunkIsReadAsItIsAnnounced) {
  constexpr uint64_t kBlob = 1 << 20, kPiece = 256 << 10;
  MoverPair p;
  ASSERT_NO_FATAL_FAILURE(p.Start(kBlob, MoverOptions{.chunkBytes = 1 << 20, .chunksPerRail = 4}));
  std::vector<uint8_t> dst(kBlob, 0);
  uint64_t announced = 0;
  std::vector<uint64_t> readWhenAsked;  // bytes of dst already right at each waiting call
  const BlobMover::ReadyGate gate = [&](bool wait, uint64_t* ready) -> Status {
    if (wait) {
      uint64_t right = 0;
      while (right < kBlob && dst[right] == p.source[right]) ++right;
      readWhenAsked.push_back(right);
      announced = std::min(kBlob, announced + kPiece);
    }
    *ready = announced;
    return Status::Ok();
  };
  uint64_t sum = 0;
  Status s = p.mover->Get(*p.ep, p.sourceRegion->Key(), p.sourceRegion->base, dst.data(), kBlob, &sum, gate);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(std::memcmp(dst.data(), p.source.data(), kBlob), 0);
  EXPECT_EQ(sum, BlobChecksum(p.source.data(), kBlob));
  // Asked four times, each time with every piece announced before it already read.
  ASSERT_EQ(readWhenAsked.size(), 4u);
  for (size_t i = 0; i < readWhenAsked.size(); ++i) EXPECT_GE(readWhenAsked[i], i * kPiece) << "call " << i;
}

// A Put's checksum is the whole blob's, whatever the chunking (each chunk hashed once,
// in order, after it is posted), and the bytes land as sent.
TEST(BlobMoverPut, TheChecksumCoversEveryChunkOnceInOrder) {
  for (const uint64_t chunk : {uint64_t{4096}, uint64_t{64} << 10, uint64_t{1} << 20}) {
    SCOPED_TRACE(chunk);
    constexpr uint64_t kBlob = (1 << 20) + 12345;
    MoverPair p;
    ASSERT_NO_FATAL_FAILURE(p.Start(kBlob, MoverOptions{.chunkBytes = chunk, .chunksPerRail = 2}));
    std::vector<uint8_t> blob(kBlob);
    for (uint64_t i = 0; i < kBlob; ++i) blob[i] = static_cast<uint8_t>(i * 7 + 3);
    uint64_t sum = 0;
    Status s = p.mover->Put(*p.ep, p.sourceRegion->Key(), p.sourceRegion->base, blob.data(), kBlob, &sum);
    ASSERT_TRUE(s.ok()) << s.message();
    EXPECT_EQ(sum, BlobChecksum(blob.data(), kBlob));
    EXPECT_EQ(std::memcmp(p.source.data(), blob.data(), kBlob), 0);
  }
}

}  // namespace
}  // namespace railyard::storage::snapshot
