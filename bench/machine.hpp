// SPDX-License-Identifier: MIT
// abc bench: the machine's own measured single-core FMA peak, so every kernel reports its fraction.
#pragma once

#include <sys/resource.h>

#include <ctime>
#include <algorithm>
#include <cstddef>
#include <vector>

#include <xsimd/xsimd.hpp>

#include <abc/kernel/simd.hpp>

namespace abc_bench {

// The process's peak resident set so far, in MiB (Linux reports ru_maxrss in KiB).
inline double peak_rss_mib() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return double(u.ru_maxrss) / 1024.0;
}

// CPU time of the calling thread: the probes compare with Google Benchmark's rates, which are CPU
// time by default, and stay meaningful on a shared machine where wall time includes other jobs.
inline double thread_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

namespace detail {
// `blocks` × 1024 rounds of 16 independent FMA chains on the widest registers the build targets:
// enough chains to cover FMA latency × throughput on current cores. Returns the FLOPs done.
inline double fma_chains(std::size_t blocks) {
  using batch = xsimd::batch<float>;
  constexpr int chains = 16;
  const batch mul(1.0000001f), add(1e-7f);
  batch acc[chains];
  for (int c = 0; c < chains; ++c) acc[c] = batch(float(c) * 1e-3f);
  for (std::size_t b = 0; b < blocks; ++b)
    for (int rep = 0; rep < 1024; ++rep)
#ifdef ABC_NO_SIMD
      for (int c = 0; c < chains; ++c) acc[c] = xsimd::fma(acc[c], mul, add);
#else
      for (int c = 0; c < chains; ++c) acc[c] = abc::kernel::impl::fma(acc[c], mul, add);  // fused with clang too
#endif
  // Store and sum the lanes so that the chains are live.
  alignas(64) float lanes[batch::size];
  float sink = 0;
  for (int c = 0; c < chains; ++c) {
    acc[c].store_aligned(lanes);
    for (float x : lanes) sink += x;
  }
  volatile float keep = sink;
  (void)keep;
  return 2.0 * double(batch::size) * chains * 1024.0 * double(blocks);
}
}  // namespace detail

// Peak float FLOP/s of one core. A fixed amount of work, sized once to `seconds_per_try`, is timed
// by two clock reads: the clock is read around the whole run, never inside it (reading it every few
// microseconds, as an earlier probe did, costs a system call each time on a VM and understated the
// peak). Best of `tries` in thread CPU time: the machine is shared and noisy, the peak is what it
// can do.
inline double measure_fma_peak(double seconds_per_try = 0.05, int tries = 5) {
  std::size_t blocks = 16;
  for (;;) {
    const double start = thread_seconds();
    detail::fma_chains(blocks);
    const double took = thread_seconds() - start;
    if (took >= seconds_per_try / 8) {
      blocks = std::max<std::size_t>(blocks, std::size_t(double(blocks) * seconds_per_try / took));
      break;
    }
    blocks *= 2;
  }
  double best = 0;
  for (int attempt = 0; attempt < tries; ++attempt) {
    const double start = thread_seconds();
    const double flops = detail::fma_chains(blocks);
    const double elapsed = thread_seconds() - start;
    best = std::max(best, flops / elapsed);
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
