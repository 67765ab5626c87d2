// SPDX-License-Identifier: MIT
// abc tests: RFA's linear readout at the edges of the floating-point range. The readout
// φ(q)ᵀS / φ(q)·z is a ratio, so it has an exact answer whenever the denominator is not 0, however
// small or large φ(q) is: subnormal features, a subnormal denominator, features near overflow.
// Every form must give it (no NaN or Inf for finite input), and empty inputs must be empty outputs.
// Extreme features come from W's scale or from raw inputs (feature::InputNorm::raw): under the
// default unit inputs, the input's own magnitude does not reach the features (its edge cases are
// in test_random_feature.cpp).
#include <abc/bounded_attention.hpp>
#include <abc/control/random_feature.hpp>
#include <abc/feature/arc_cosine.hpp>
#include <abc/detail/gate.hpp>
#include <abc/detail/random.hpp>
#include <abc/feature/input_norm.hpp>
#include <abc/feature/projection.hpp>
#include <abc/feature/random_fourier.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "support/catch.hpp"
#include "support/reference.hpp"

namespace random_feature_edges_test {

namespace {

using abc::Index;

template <class Attn, class T = typename Attn::scalar_type>
std::vector<abc::Matrix<T>> every_form(const Attn& attn, const abc::Matrix<T>& q, const abc::Matrix<T>& k,
                                       const abc::Matrix<T>& v) {
  std::vector<abc::Matrix<T>> outs{attn.forward(q, k, v)};
  for (auto kernel : {abc::CausalKernel::chunked, abc::CausalKernel::recurrent}) {
    abc::Options o = attn.options();
    o.causal_kernel = kernel;
    outs.push_back(Attn(attn.control(), o).forward_causal(q, k, v));
  }
  auto s = attn.make_state(k.cols(), v.cols());
  abc::Matrix<T> loop(q.rows(), v.cols());
  for (Index t = 0; t < q.rows(); ++t)
    loop.row(t) = attn.step(s, q.row(t).transpose(), k.row(t).transpose(), v.row(t).transpose()).transpose();
  outs.push_back(loop);
  return outs;
}

}  // namespace

TEMPLATE_TEST_CASE("RFA arc-cos: a subnormal denominator gives the exact ratio, not NaN", "[control][random_feature][numerics]",
                   float, double) {
  using T = TestType;
  using Arc = abc::feature::ArcCosine<T>;
  // Raw inputs, W = −1, q = −denorm_min, k = −0.5, v = [0 1]: φ(q) = denorm_min, φ(k) = 0.5, so
  // num = denorm_min · 0.5 · [0 1] and den = denorm_min · 0.5 both underflow, yet the ratio is [0 1].
  const abc::BoundedAttention attn{abc::control::RandomFeature<T, Arc>(
      Arc(abc::Matrix<T>::Constant(1, 1, T(-1)), abc::feature::InputNorm::raw))};
  const abc::Matrix<T> q = abc::Matrix<T>::Constant(1, 1, -std::numeric_limits<T>::denorm_min());
  const abc::Matrix<T> k = abc::Matrix<T>::Constant(1, 1, T(-0.5));
  abc::Matrix<T> v(1, 2);
  v << T(0), T(1);
  for (const auto& out : every_form(attn, q, k, v)) {
    INFO(out);
    REQUIRE(out(0, 0) == T(0));
    REQUIRE(out(0, 1) == T(1));
  }
  // A denominator of a few denorm_min whose reciprocal overflows: 1/den is +inf, and 0 · inf is NaN.
  const abc::Matrix<T> q2 = abc::Matrix<T>::Constant(1, 1, -std::numeric_limits<T>::denorm_min() * T(3));
  abc::Matrix<T> v2(1, 2);
  v2 << T(0), T(-2);
  for (const auto& out : every_form(attn, q2, k, v2)) {
    INFO(out);
    REQUIRE(out(0, 0) == T(0));
    REQUIRE(out(0, 1) == T(-2));
  }
}

TEMPLATE_TEST_CASE("RFA arc-cos: features of any magnitude give the same ratio to the last bit",
                   "[control][random_feature][numerics]", float, double) {
  using T = TestType;
  using Arc = abc::feature::ArcCosine<T>;
  const Index d = 3, dv = 2, N = 11, D = 4;
  // Small integers everywhere, so that with raw inputs and W scaled by 2^e every feature (integer ×
  // 2^(e−1): the map divides by sqrt(D) = 2), every memory entry and every sum is exact. Scaling W
  // scales φ(q), φ(k), z and S by 2^e: the ratio is the same real number, and the readout must
  // return the same bits as at e = 0. Unit inputs (the default) make the features W x̂ inexact, but
  // a power of two still scales every rounded intermediate exactly while all are normal numbers:
  // the bits must match as well.
  const auto ints = [](Index r, Index c, std::uint64_t seed, int lo, int hi) {
    abc::Matrix<T> m(r, c);
    for (Index i = 0; i < m.size(); ++i)
      m.data()[i] = T(lo + int(abc::detail::hash(seed, std::uint64_t(i)) % std::uint64_t(hi - lo + 1)));
    return m;
  };
  const abc::Matrix<T> w = ints(D, d, 41, 1, 3), q = ints(N, d, 42, 1, 3), k = ints(N, d, 43, 1, 3);
  const abc::Matrix<T> v = ints(N, dv, 44, -3, 3);
  for (auto norm : {abc::feature::InputNorm::raw, abc::feature::InputNorm::unit}) {
    INFO("unit inputs " << (norm == abc::feature::InputNorm::unit));
    const auto at = [&](int e) {
      return every_form(abc::BoundedAttention{abc::control::RandomFeature<T, Arc>(Arc(w * std::ldexp(T(1), e), norm))}, q,
                        k, v);
    };
    const auto want = at(0);
    // From the smallest normal range (z and S stay normal numbers, so their products with the
    // balanced φ(q) are exact; a state that is itself subnormal has lost digits already) up to near
    // overflow. Unbalanced, φ(q)·z is about 2^(2e): it underflows to 0 or overflows to inf at both ends.
    const int lo = std::numeric_limits<T>::min_exponent + 8;
    const int hi = std::numeric_limits<T>::max_exponent - 12;
    for (int e : {lo, lo / 2 - 20, -40, 40, hi / 2 + 20, hi}) {
      INFO("W scaled by 2^" << e);
      const auto got = at(e);
      for (std::size_t f = 0; f < got.size(); ++f) {
        INFO("form " << f);
        REQUIRE(got[f].allFinite());
        REQUIRE(got[f] == want[f]);
      }
    }
  }
}

TEMPLATE_TEST_CASE("RFA with no queries or no keys: empty outputs, no pointer arithmetic on empty buffers",
                   "[control][random_feature][empty]", float, double) {
  using T = TestType;
  const Index d = 3, dv = 2;
  const abc::Matrix<T> w = ref::random<T>(4, d, 51);
  const abc::BoundedAttention sincos{abc::control::RandomFeature<T>(abc::feature::RandomFourier<T>(w))};
  const abc::BoundedAttention arc{
      abc::control::RandomFeature<T, abc::feature::ArcCosine<T>>(abc::feature::ArcCosine<T>(w))};
  const abc::BoundedAttention gated{abc::control::RandomFeature<T>(abc::feature::RandomFourier<T>(w),
                                                                   abc::Vector<T>::Ones(d), T(0.5))};
  const abc::Matrix<T> none(0, d), k = ref::random<T>(5, d, 52), v = ref::random<T>(5, dv, 53);
  for (int which = 0; which < 3; ++which) {
    INFO("map " << which);
    const auto run = [&](const auto& attn) {
      const abc::Matrix<T> a = attn.forward(none, k, v);  // no queries
      REQUIRE(a.rows() == 0);
      REQUIRE(a.cols() == dv);
      const abc::Matrix<T> b = attn.forward(ref::random<T>(2, d, 54), none, abc::Matrix<T>(0, dv));  // no keys
      REQUIRE(b.rows() == 2);
      REQUIRE(b.isZero());  // an empty memory reads as zero
      const abc::Matrix<T> c = attn.forward_causal(none, none, abc::Matrix<T>(0, dv));
      REQUIRE(c.rows() == 0);
    };
    if (which == 0) run(sincos);
    if (which == 1) run(arc);
    if (which == 2) run(gated);
  }
}

TEST_CASE("RFA gate near 1: the write keeps 1 - g from sigma(-s), as control::Gated does", "[control][random_feature][numerics]") {
  // s = 20: σ(s) rounds to 1 in float, so 1 − σ(s) would be 0 and the memory would stop being
  // written; σ(−s) = 2.06e-9 is the write's true weight.
  using T = float;
  const Index d = 8, D = 4;
  const abc::Matrix<T> w = abc::feature::Projection<T>(D, d, abc::Seed{11}).draw();
  using RF = abc::control::RandomFeature<T>;
  const abc::BoundedAttention attn{RF{abc::feature::RandomFourier<T>(w), abc::Vector<T>(abc::Vector<T>::Zero(d)), T(20)}};
  abc::Matrix<T> k = abc::Matrix<T>::Constant(1, d, T(0.25)), v = abc::Matrix<T>::Constant(1, d, T(-0.5));
  k(0, 3) = T(0.75);
  auto s = attn.make_state(d, d);
  attn.step(s, k.row(0).transpose(), k.row(0).transpose(), v.row(0).transpose());
  abc::Matrix<T> phi(1, attn.num_slots());
  attn.control().query_features(k, phi);
  const double keep = 1.0 / (1.0 + std::exp(20.0));
  REQUIRE(s.values().rows() == attn.num_slots());
  for (Index i = 0; i < attn.num_slots(); ++i)
    for (Index j = 0; j < d; ++j) {
      const double expected = keep * double(phi(0, i)) * double(v(0, j));
      CHECK(double(s.values()(i, j)) == Approx(expected).epsilon(1e-5).margin(1e-30));
    }
  CHECK(abc::detail::sigmoid_gate(T(20)).second == Approx(keep).epsilon(1e-6));
  CHECK(abc::detail::sigmoid_gate(T(20)).first == T(1));
  CHECK(abc::detail::sigmoid_gate(std::numeric_limits<T>::quiet_NaN()).first == T(0.5));
}

}  // namespace random_feature_edges_test
