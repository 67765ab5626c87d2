// SPDX-License-Identifier: MIT
// What each of the two differently compiled translation units of test_mixed_isa returns: plain
// standard types only, as between the copies of any program that dispatches (docs/simd.md).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

struct MixedResult {
  std::string isa;            // abc::simd_arch() of the translation unit
  std::vector<float> values;  // forward_causal, the decode loop's outputs, the pooled prefill
  std::size_t pool_bytes = 0;
  std::vector<std::uint8_t> blob;  // save_state of the decode loop's state
};

MixedResult mixed_part_baseline();
MixedResult mixed_part_native();
