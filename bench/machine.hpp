// SPDX-License-Identifier: MIT
// abc bench: the machine's own measured single-core FMA peak, so every kernel reports its fraction.
#pragma once

#include <ctime>
#include <algorithm>
#include <cstddef>
#include <vector>

#include <xsimd/xsimd.hpp>

namespace abc_bench {

// CPU time of the calling thread: the probes compare with Google Benchmark's rates, which are CPU
// time by default, and stay meaningful on a shared machine where wall time includes other jobs.
inline double thread_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

// Peak float FLOP/s of one core: 16 independent FMA chains on the widest registers the build
// targets (AVX-512 with -march=native here), enough to cover FMA latency × throughput on current
// cores. Best of several runs in thread CPU time: the machine is shared and noisy, the peak is
// what it can do.
inline double measure_fma_peak(double seconds_per_try = 0.05, int tries = 5) {
  using batch = xsimd::batch<float>;
  constexpr int chains = 16;
  const batch mul(1.0000001f), add(1e-7f);
  double best = 0;
  for (int attempt = 0; attempt < tries; ++attempt) {
    batch acc[chains];
    for (int c = 0; c < chains; ++c) acc[c] = batch(float(c) * 1e-3f);
    std::size_t iters = 0;
    const double start = thread_seconds();
    double elapsed = 0;
    do {
      for (int rep = 0; rep < 1024; ++rep)
        for (int c = 0; c < chains; ++c) acc[c] = xsimd::fma(acc[c], mul, add);
      iters += 1024;
      elapsed = thread_seconds() - start;
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

// Sustained memory bandwidth of one core: the STREAM triad a[i] = b[i] + s·c[i] over arrays far
// larger than the caches (3 × 64 MiB), counting 3 × 4 bytes per element; best of 5.
inline double memory_bandwidth() {
  const std::size_t n = std::size_t(16) << 20;
  std::vector<float> a(n, 0.0f), b(n, 1.0f), c(n, 2.0f);
  double best = 0;
  for (int attempt = 0; attempt < 5; ++attempt) {
    const double start = thread_seconds();
    for (std::size_t i = 0; i < n; ++i) a[i] = b[i] + 0.5f * c[i];
    const double s = thread_seconds() - start;
    volatile float keep = a[n / 2];
    (void)keep;
    best = std::max(best, 12.0 * double(n) / s);
  }
  return best;
}

inline double fma_peak() {
  static const double peak = measure_fma_peak();
  return peak;
}

}  // namespace abc_bench
