#pragma once
// Note [Deterministic augmentation]
// A DataLoader's batches must not depend on thread scheduling: with one worker or eight, the
// same seed has to give the same order and the same augmented pixels. A shared generator cannot
// do that (the order in which workers draw from it varies), so there is none. Instead every
// sample gets a private Philox stream (see Note [Philox4x32-10]) whose numbers are a pure
// function of (key, stream, position):
//   key    = the epoch's augmentation key, derived by the DataLoader from (seed, epoch),
//   stream = the sample's index in the data set (not its position in the shuffled order, so
//            batch size and shuffling do not change how a given image is augmented),
//   counter = stream * 2^32 + position / 4, four 32-bit numbers per counter.
// A transform draws the numbers of image b from streams[b] in turn, and Compose hands the same
// streams down the chain, so later transforms continue where earlier ones stopped.
// The DataLoader's shuffle is a stream too (key = the epoch's shuffle key, stream 0).
#include <cstdint>

#include "core/kernel_bodies/philox.h"

namespace ember::data {

class RandomStream {
 public:
  RandomStream(uint64_t key, uint64_t stream) : key_(key), counter_(stream << 32) {}

  uint32_t next_u32() {
    if (lane_ == 4) {
      block_ = philox::generate(key_, counter_++);
      lane_ = 0;
    }
    return block_.v[lane_++];
  }
  uint64_t next_u64() { return (static_cast<uint64_t>(next_u32()) << 32) | next_u32(); }
  double uniform() { return philox::to_unit(next_u32()); }  // [0, 1)
  // Uniform in [0, n) for n >= 1; the modulo bias of a 64-bit draw is below 2^-40 for any n
  // a data set can have.
  int64_t below(int64_t n) { return static_cast<int64_t>(next_u64() % static_cast<uint64_t>(n)); }

 private:
  uint64_t key_;
  uint64_t counter_;
  philox::Block block_{};
  int lane_ = 4;  // next word of block_; 4 = draw a new block
};

}  // namespace ember::data
