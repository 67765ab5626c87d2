// SPDX-License-Identifier: MIT
// abc bench: the SIMD kernels against the scalar ones (kernel/scalar.hpp, the ABC_NO_SIMD path), on
// the decode step's shape: n rows of d floats (n = d = 64 by default).
//
//   bench_kernels [--benchmark_filter=...]
//
// `step_rows` is the dense decode step's two passes (update + dot over K̃'s rows, update + axpy
// over Ṽ's rows) without the control and the softmax: the part the SIMD kernels replace.
#include <abc/kernel/online_normalise.hpp>
#include <abc/kernel/rows.hpp>
#include <abc/types.hpp>

#include <benchmark/benchmark.h>

namespace {

using abc::Index;
using Mat = abc::Matrix<float>;
using Vec = abc::Vector<float>;

template <bool Simd>
void step_rows(benchmark::State& st) {
  const Index n = st.range(0), d = st.range(1);
  Mat km = Mat::Random(n, d), vm = Mat::Random(n, d);
  const Vec a = (Vec::Random(n).array() * 0.5f + 0.5f).matrix(), w = Vec::Random(n), q = Vec::Random(d),
            k = Vec::Random(d), v = Vec::Random(d);
  Vec scores(n), out(d);
  for (auto _ : st) {
    for (Index l = 0; l < n; ++l)
      scores[l] = Simd ? abc::kernel::update_dot(km.row(l).data(), a[l], w[l], k.data(), q.data(), d)
                       : abc::kernel::scalar::update_dot(km.row(l).data(), a[l], w[l], k.data(), q.data(), d);
    scores /= scores.cwiseAbs().sum() + 1.0f;  // stand-in for the softmax, keeps values bounded
    out.setZero();
    for (Index l = 0; l < n; ++l) {
      if (Simd)
        abc::kernel::update_axpy(vm.row(l).data(), a[l], w[l], v.data(), scores[l], out.data(), d);
      else
        abc::kernel::scalar::update_axpy(vm.row(l).data(), a[l], w[l], v.data(), scores[l], out.data(), d);
    }
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  // update: 3 flops per element, dot/axpy: 2 more; two matrices of n × d.
  st.counters["FLOPS"] = benchmark::Counter(2.0 * 5.0 * double(n * d), benchmark::Counter::kIsIterationInvariantRate,
                                            benchmark::Counter::OneK::kIs1000);
}

template <bool Simd>
void online_normalise(benchmark::State& st) {
  const Index n = st.range(0);
  Vec lam = Vec::Random(n), m = Vec::Constant(n, -1.0f), z = Vec::Ones(n), decay(n), write(n);
  for (auto _ : st) {
    if (Simd)
      abc::kernel::online_normalise(lam.data(), m.data(), z.data(), decay.data(), write.data(), n, true);
    else
      abc::kernel::scalar::online_normalise(lam.data(), m.data(), z.data(), decay.data(), write.data(), n, true);
    z.setOnes();  // keep the sum from growing across iterations
    benchmark::DoNotOptimize(write.data());
  }
  st.counters["slots_per_s"] = benchmark::Counter(double(n), benchmark::Counter::kIsIterationInvariantRate);
}

}  // namespace

BENCHMARK_TEMPLATE(step_rows, true)->Name("step_rows/simd")->Args({64, 64})->Args({256, 64})->Args({64, 128});
BENCHMARK_TEMPLATE(step_rows, false)->Name("step_rows/scalar")->Args({64, 64})->Args({256, 64})->Args({64, 128});
BENCHMARK_TEMPLATE(online_normalise, true)->Name("online_normalise/simd")->Arg(64)->Arg(256);
BENCHMARK_TEMPLATE(online_normalise, false)->Name("online_normalise/scalar")->Arg(64)->Arg(256);

BENCHMARK_MAIN();
