// The channel-blocked activation layout a plan may choose (runtime/specialize.cpp), asked
// of oneDNN (onednn.cpp) without including it.
#pragma once
#include <cstdint>

namespace baton::kernels::onednn {

// The channel block (8 or 16) of the activations oneDNN's inference convolutions pick on
// this CPU when free to choose (jit:avx2 picks nChw8c), or 0 where they take channels-last
// as fast (brgconv on AVX-512 picks nhwc): asked once, of a 3x3 64-channel convolution. A
// plan stores the values between such convolutions and poolings in that layout.
int64_t preferred_channel_block();
// While one lives, preferred_channel_block() answers `block` (tests of either machine's
// plans on any machine).
class ChannelBlockOverride {
 public:
  explicit ChannelBlockOverride(int64_t block);
  ~ChannelBlockOverride();
  ChannelBlockOverride(const ChannelBlockOverride&) = delete;
  ChannelBlockOverride& operator=(const ChannelBlockOverride&) = delete;

 private:
  int64_t previous_;
};

}  // namespace baton::kernels::onednn
