// SPDX-License-Identifier: MIT
// abc bench: the SIMD kernels against the scalar ones (kernel/scalar.hpp, the ABC_NO_SIMD path), on
// the decode step's shape: n rows of d floats (n = d = 64 by default).
//
//   bench_kernels [--benchmark_filter=...]
//
// `step_rows` is the dense decode step's two passes (update + dot over K̃'s rows, update + axpy
// over Ṽ's rows) without the control and the softmax: the part the SIMD kernels replace.
// `product` is the chunked kernels' matrix product (kernel/product.hpp) at their shapes, against
// its scalar form and against the Eigen product it replaced.
#include <abc/kernel/exp_sum.hpp>
#include <abc/kernel/online_normalise.hpp>
#include <abc/kernel/product.hpp>
#include <abc/kernel/rows.hpp>
#include <abc/types.hpp>

#include <benchmark/benchmark.h>

#include <random>
#include <utility>

namespace {

using abc::Index;
using Mat = abc::Matrix<float>;
using Vec = abc::Vector<float>;

enum class Path { simd, scalar, simd_per_row };

// The update + dot and update + axpy passes, as the library runs them (columns_dot over a
// column-major K̃, rows_axpy over Ṽ; SIMD or scalar) or a row at a time over a row-major K̃
// (update_dot / update_axpy per row: the kernels before the block passes).
template <Path P>
void step_rows(benchmark::State& st) {
  const Index n = st.range(0), d = st.range(1);
  Mat km = Mat::Random(n, d), vm = Mat::Random(n, d);
  abc::ColMatrix<float> kc = km;
  const Vec a = (Vec::Random(n).array() * 0.5f + 0.5f).matrix(), w = Vec::Random(n), q = Vec::Random(d),
            k = Vec::Random(d), v = Vec::Random(d);
  Vec scores(n), out(d);
  for (auto _ : st) {
    if constexpr (P == Path::simd)
      abc::kernel::columns_dot<true>(kc.data(), n, n, d, a.data(), w.data(), k.data(), q.data(), 1.0f, scores.data());
    else if constexpr (P == Path::scalar)
      abc::kernel::scalar::columns_dot<true>(kc.data(), n, n, d, a.data(), w.data(), k.data(), q.data(), 1.0f,
                                             scores.data());
    else
      for (Index l = 0; l < n; ++l)
        scores[l] = abc::kernel::update_dot(km.row(l).data(), a[l], w[l], k.data(), q.data(), d);
    scores /= scores.cwiseAbs().sum() + 1.0f;  // stand-in for the softmax, keeps values bounded
    if constexpr (P == Path::simd) {
      abc::kernel::rows_axpy<true>(vm.data(), d, n, d, a.data(), w.data(), v.data(), scores.data(), out.data());
    } else if constexpr (P == Path::scalar) {
      abc::kernel::scalar::rows_axpy<true>(vm.data(), d, n, d, a.data(), w.data(), v.data(), scores.data(), out.data());
    } else {
      out.setZero();
      for (Index l = 0; l < n; ++l)
        abc::kernel::update_axpy(vm.row(l).data(), a[l], w[l], v.data(), scores[l], out.data(), d);
    }
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  // update: 3 flops per element, dot/axpy: 2 more; two matrices of n × d.
  st.counters["FLOPS"] = benchmark::Counter(2.0 * 5.0 * double(n * d), benchmark::Counter::kIsIterationInvariantRate,
                                            benchmark::Counter::OneK::kIs1000);
}

// The read-only passes of a one-hot control's step (the row write is O(d) and done before them).
template <bool Simd>
void read_rows(benchmark::State& st) {
  const Index n = st.range(0), d = st.range(1);
  const Mat km = Mat::Random(n, d), vm = Mat::Random(n, d);
  abc::ColMatrix<float> kc = km;
  Mat vc = vm;
  const Vec q = Vec::Random(d), none = Vec::Zero(n);
  Vec scores(n), out(d);
  for (auto _ : st) {
    if (Simd)
      abc::kernel::columns_dot<false>(kc.data(), n, n, d, none.data(), none.data(), q.data(), q.data(), 1.0f,
                                      scores.data());
    else
      abc::kernel::scalar::columns_dot<false>(kc.data(), n, n, d, none.data(), none.data(), q.data(), q.data(), 1.0f,
                                              scores.data());
    scores /= scores.cwiseAbs().sum() + 1.0f;
    if (Simd)
      abc::kernel::rows_axpy<false>(vc.data(), d, n, d, none.data(), none.data(), q.data(), scores.data(), out.data());
    else
      abc::kernel::scalar::rows_axpy<false>(vc.data(), d, n, d, none.data(), none.data(), q.data(), scores.data(),
                                            out.data());
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  st.counters["FLOPS"] = benchmark::Counter(2.0 * 2.0 * double(n * d), benchmark::Counter::kIsIterationInvariantRate,
                                            benchmark::Counter::OneK::kIs1000);
}

// The read of Ṽ alone (weighted_rows, n = dv = 64) as its weights' zeros fall: none (0); half of
// them at random, a different pattern each call (1: a peaked softmax flushes its small weights to 0
// in no order a branch predictor learns; 1021 patterns in turn); the first half (2: the empty slots
// of a memory still filling, a run a branch learns).
template <int Zeros>
void weighted_rows_zeros(benchmark::State& st) {
  const Index n = 64, d = 64, patterns = 1021;
  const Mat vm = Mat::Random(n, d);
  abc::ColMatrix<float> p = (Mat::Random(n, patterns).array() * 0.5f + 0.5f).matrix() / float(n);
  std::mt19937 bits(7);
  for (Index c = 0; c < patterns; ++c)
    for (Index l = 0; l < n; ++l) {
      const bool zero = Zeros == 1 ? (bits() & 1u) != 0 : Zeros == 2 && l < n / 2;
      if (zero) p(l, c) = 0.0f;
    }
  Vec out(d);
  Index c = 0;
  for (auto _ : st) {
    abc::kernel::weighted_rows(vm.data(), d, n, d, p.col(c).data(), out.data());
    c = c + 1 == patterns ? 0 : c + 1;
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
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

// The exponentials of the softmax over slots: the kernel, its scalar oracle, and the Eigen
// expression the read used before (which is not exact at −∞ on SSE2/AVX2, see kernel/exp_sum.hpp).
enum class ExpPath { simd, scalar, eigen };

template <ExpPath P>
void exp_sum(benchmark::State& st) {
  const Index n = st.range(0);
  const Vec logits = Vec::Random(n);
  const float mx = logits.maxCoeff();
  Vec a(n);
  for (auto _ : st) {
    a = logits;
    float sum;
    if (P == ExpPath::simd) {
      sum = abc::kernel::exp_sum(a.data(), n, mx);
    } else if (P == ExpPath::scalar) {
      sum = abc::kernel::scalar::exp_sum(a.data(), n, mx);
    } else {
      a = (a.array() - mx).exp().matrix();
      sum = a.sum();
    }
    benchmark::DoNotOptimize(sum);
    benchmark::DoNotOptimize(a.data());
  }
  st.counters["slots_per_s"] = benchmark::Counter(double(n), benchmark::Counter::kIsIterationInvariantRate);
}

// C [m × 64] from A and B of depth p: `assign` is C = α A B (a chunk's scores against the carried
// memory, q K̃ᵀ, or its read P Ṽ; m = 4096 is the non-causal read of a whole sequence), `decay` is
// C = diag(s) C + Aᵀ B with A [p × m] stored token-major (the chunk's addition to Ṽ, Eᵀ V).
enum class ProductPath { simd, scalar, eigen };

template <ProductPath P>
void product(benchmark::State& st) {
  const Index m = st.range(0), depth = st.range(1), cols = 64;
  const bool decay = st.range(2) != 0;
  const Mat a = decay ? Mat(Mat::Random(depth, m)) : Mat(Mat::Random(m, depth)), b = Mat::Random(depth, cols);
  const Vec s = (Vec::Random(m).array() * 0.001f + 0.999f).matrix();
  Mat c = Mat::Random(m, cols);
  abc::kernel::ProductArgs<float> x = decay ? abc::kernel::product_args(a.transpose(), b, c)
                                            : abc::kernel::product_args(a, b, c);
  if (decay) x.row_scale = s.data();
  for (auto _ : st) {
    if constexpr (P == ProductPath::eigen) {
      if (decay) {
        c.array().colwise() *= s.array();
        c.noalias() += a.transpose() * b;
      } else {
        c.noalias() = 0.125f * a * b;
      }
    } else if constexpr (P == ProductPath::simd) {
      if (decay)
        abc::kernel::product<true>(x);
      else
        abc::kernel::product<false>(x, 0.125f);
    } else {
      if (decay)
        abc::kernel::scalar::product<true>(x, 1.0f);
      else
        abc::kernel::scalar::product<false>(x, 0.125f);
    }
    benchmark::DoNotOptimize(c.data());
    benchmark::ClobberMemory();
  }
  st.counters["FLOPS"] = benchmark::Counter(2.0 * double(m * depth * cols), benchmark::Counter::kIsIterationInvariantRate,
                                            benchmark::Counter::OneK::kIs1000);
}

}  // namespace

// The step's shapes (n, d); n = 40, 56 and 100 slots and d = 72 are counts past the last full batch
// (of 16 floats with AVX-512), which take narrower batches before the scalar path; n = 48 and d = 48
// are three full batches, less than a block of four, which the passes take as one block.
static void step_shapes(benchmark::internal::Benchmark* b) {
  for (const auto& nd : {std::pair<int, int>{64, 64}, {256, 64}, {64, 128}, {40, 64}, {56, 64}, {100, 64}, {64, 72},
                         {48, 64}, {64, 48}})
    b->Args({nd.first, nd.second});
}
BENCHMARK_TEMPLATE(step_rows, Path::simd)->Name("step_rows/simd")->Apply(step_shapes);
BENCHMARK_TEMPLATE(step_rows, Path::scalar)->Name("step_rows/scalar")->Apply(step_shapes);
BENCHMARK_TEMPLATE(step_rows, Path::simd_per_row)
    ->Name("step_rows/simd_per_row")
    ->Args({64, 64})
    ->Args({256, 64})
    ->Args({64, 128});
BENCHMARK_TEMPLATE(read_rows, true)->Name("read_rows/simd")->Args({64, 64})->Args({256, 64})->Args({40, 64})->Args({64, 48});
BENCHMARK_TEMPLATE(read_rows, false)->Name("read_rows/scalar")->Args({64, 64})->Args({256, 64})->Args({40, 64});
BENCHMARK_TEMPLATE(weighted_rows_zeros, 0)->Name("weighted_rows/no_zeros");
BENCHMARK_TEMPLATE(weighted_rows_zeros, 1)->Name("weighted_rows/half_zero_scattered");
BENCHMARK_TEMPLATE(weighted_rows_zeros, 2)->Name("weighted_rows/half_zero_run");
BENCHMARK_TEMPLATE(online_normalise, true)->Name("online_normalise/simd")->Arg(64)->Arg(256)->Arg(40)->Arg(100);
BENCHMARK_TEMPLATE(online_normalise, false)->Name("online_normalise/scalar")->Arg(64)->Arg(256)->Arg(40)->Arg(100);

BENCHMARK_TEMPLATE(exp_sum, ExpPath::simd)->Name("exp_sum/simd")->Arg(64)->Arg(256)->Arg(40)->Arg(100);
BENCHMARK_TEMPLATE(exp_sum, ExpPath::scalar)->Name("exp_sum/scalar")->Arg(64)->Arg(256)->Arg(40)->Arg(100);
BENCHMARK_TEMPLATE(exp_sum, ExpPath::eigen)->Name("exp_sum/eigen")->Arg(64)->Arg(256)->Arg(40)->Arg(100);

BENCHMARK_TEMPLATE(product, ProductPath::simd)->Name("product/simd")->Args({16, 64, 0})->Args({64, 16, 1})->Args({4096, 64, 0});
BENCHMARK_TEMPLATE(product, ProductPath::scalar)->Name("product/scalar")->Args({16, 64, 0})->Args({64, 16, 1})->Args({4096, 64, 0});
BENCHMARK_TEMPLATE(product, ProductPath::eigen)->Name("product/eigen")->Args({16, 64, 0})->Args({64, 16, 1})->Args({4096, 64, 0});

BENCHMARK_MAIN();
