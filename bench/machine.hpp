// SPDX-License-Identifier: MIT
// abc bench: the machine's own measured single-core FMA peak, so every kernel reports its fraction.
#pragma once

#include <chrono>
#include <cstddef>

#include <xsimd/xsimd.hpp>

namespace abc_bench {

// Peak float FLOP/s of one core: 16 independent FMA chains on the widest registers the build
// targets (AVX-512 with -march=native here), enough to cover FMA latency × throughput on current
// cores. Best of several runs: the machine is shared and noisy, the peak is what it can do.
inline double measure_fma_peak(double seconds_per_try = 0.05, int tries = 5) {
  using batch = xsimd::batch<float>;
  constexpr int chains = 16;
  const batch mul(1.0000001f), add(1e-7f);
  double best = 0;
  for (int attempt = 0; attempt < tries; ++attempt) {
    batch acc[chains];
    for (int c = 0; c < chains; ++c) acc[c] = batch(float(c) * 1e-3f);
    std::size_t iters = 0;
    const auto start = std::chrono::steady_clock::now();
    double elapsed = 0;
    do {
      for (int rep = 0; rep < 1024; ++rep)
        for (int c = 0; c < chains; ++c) acc[c] = xsimd::fma(acc[c], mul, add);
      iters += 1024;
      elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    } while (elapsed < seconds_per_try);
    // Store and sum the lanes (xsimd 8.1 calls the reduction hadd, later versions reduce_add).
    alignas(64) float lanes[batch::size];
    float sink = 0;
    for (int c = 0; c < chains; ++c) {
      acc[c].store_aligned(lanes);
      for (float x : lanes) sink += x;
    }
    volatile float keep = sink;
    (void)keep;
    const double flops = 2.0 * double(batch::size) * chains * double(iters);
    if (flops / elapsed > best) best = flops / elapsed;
  }
  return best;
}

inline double fma_peak() {
  static const double peak = measure_fma_peak();
  return peak;
}

}  // namespace abc_bench
