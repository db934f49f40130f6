#include "proxy/fabric/stripe_scheduler.h"

#include <algorithm>
#include <string>

namespace railyard::fabric {

StripeOptions StripeOptions::FromConfig(const env::Config& config) {
  StripeOptions o;
  o.thresholdBytes = config.stripeThresholdBytes;
  o.chunkBytes = config.stripeChunkBytes;
  o.chunksInFlightPerRail = config.stripeChunksPerRail;
  return o;
}

Status StripeOptions::Validate() const {
  if (chunkBytes < 4096 || chunkBytes > (64ull << 20)) {
    return InvalidArgument("stripe chunk of " + std::to_string(chunkBytes) + " bytes (4 KiB..64 MiB)");
  }
  if (chunksInFlightPerRail < 1 || chunksInFlightPerRail > 1024) {
    return InvalidArgument("stripe chunks in flight per rail " + std::to_string(chunksInFlightPerRail) +
                           " (1..1024)");
  }
  return Status::Ok();
}

std::vector<Chunk> CutIntoChunks(uint64_t bytes, int rails, const StripeOptions& options) {
  uint64_t chunk = std::max<uint64_t>(options.chunkBytes, 1);
  if (IsStriped(bytes, rails, options)) {
    const uint64_t share = (bytes + static_cast<uint64_t>(rails) - 1) / static_cast<uint64_t>(rails);
    chunk = std::min(chunk, (share + 4095) & ~uint64_t{4095});
  }
  std::vector<Chunk> out;
  if (bytes == 0) {
    out.push_back({0, 0});
    return out;
  }
  out.reserve(static_cast<size_t>((bytes + chunk - 1) / chunk));
  for (uint64_t off = 0; off < bytes; off += chunk) out.push_back({off, std::min(chunk, bytes - off)});
  return out;
}

StripeScheduler::StripeScheduler(std::vector<uint32_t> speedsMbps, int maxInFlight)
    : maxInFlight_(std::max(1, maxInFlight)) {
  for (uint32_t s : speedsMbps) weight_.push_back(s == 0 ? 1 : static_cast<int64_t>(s));
  current_.assign(weight_.size(), 0);
  inFlight_.assign(weight_.size(), 0);
}

int StripeScheduler::Pick() {
  int best = -1;
  int64_t total = 0;
  for (size_t i = 0; i < weight_.size(); ++i) {
    if (inFlight_[i] >= maxInFlight_) continue;
    current_[i] += weight_[i];
    total += weight_[i];
    if (best < 0 || current_[i] > current_[static_cast<size_t>(best)]) best = static_cast<int>(i);
  }
  if (best >= 0) current_[static_cast<size_t>(best)] -= total;
  return best;
}

int StripeScheduler::Peek() const {
  int best = -1;
  int64_t bestCurrent = 0;
  for (size_t i = 0; i < weight_.size(); ++i) {
    if (inFlight_[i] >= maxInFlight_) continue;
    const int64_t c = current_[i] + weight_[i];
    if (best < 0 || c > bestCurrent) {
      best = static_cast<int>(i);
      bestCurrent = c;
    }
  }
  return best;
}

}  // namespace railyard::fabric
