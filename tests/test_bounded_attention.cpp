// SPDX-License-Identifier: MIT
// abc tests: BoundedAttention with the Identity and SlidingWindow controls against the float64
// reference; the three forms agree; options; the state.
#include <abc/bounded_attention.hpp>
#include <abc/control/identity.hpp>
#include <abc/control/sliding_window.hpp>

#include "support/approx.hpp"
#include "support/catch.hpp"
#include "support/reference.hpp"

namespace bounded_attention_test {

namespace {

using abc::Index;

// Sizes that are not multiples of anything: the SIMD width, the chunk (64), the window.
const Index kSizes[] = {1, 7, 63, 65, 100};

abc::Options with_kernel(abc::CausalKernel k, Index chunk = 64) {
  abc::Options o;
  o.causal_kernel = k;
  o.chunk = chunk;
  return o;
}

const abc::CausalKernel kKernels[] = {abc::CausalKernel::automatic, abc::CausalKernel::chunked,
                                      abc::CausalKernel::recurrent};

// Outputs of a step loop over the whole sequence.
template <class Attn, class T>
abc::Matrix<T> step_loop(const Attn& attn, const abc::Matrix<T>& q, const abc::Matrix<T>& k,
                         const abc::Matrix<T>& v) {
  auto state = attn.make_state(k.cols(), v.cols());
  abc::Matrix<T> out(q.rows(), v.cols());
  for (Index t = 0; t < q.rows(); ++t)
    out.row(t) = attn.step(state, q.row(t).transpose(), k.row(t).transpose(), v.row(t).transpose()).transpose();
  REQUIRE(state.position() == q.rows());
  return out;
}

// forward_causal on [0, split) then continued from the carried state on [split, N).
template <class Attn, class T>
abc::Matrix<T> split_run(const Attn& attn, const abc::Matrix<T>& q, const abc::Matrix<T>& k,
                         const abc::Matrix<T>& v, Index split) {
  auto state = attn.make_state(k.cols(), v.cols());
  abc::Matrix<T> out(q.rows(), v.cols());
  out.topRows(split) = attn.forward_causal(state, q.topRows(split), k.topRows(split), v.topRows(split));
  const Index rest = q.rows() - split;
  out.bottomRows(rest) = attn.forward_causal(state, q.bottomRows(rest), k.bottomRows(rest), v.bottomRows(rest));
  return out;
}

}  // namespace

TEMPLATE_TEST_CASE("Identity equals softmax attention, non-causal and cross", "[bounded_attention][identity]",
                   float, double) {
  using T = TestType;
  for (Index n : kSizes) {
    const Index d = 16, dv = 9, m = n + 3;  // queries and keys differ in count; d ≠ dv
    auto q = ref::random<T>(m, d, 1 + std::uint64_t(n)), k = ref::random<T>(n, d, 2 + std::uint64_t(n));
    auto v = ref::random<T>(n, dv, 3 + std::uint64_t(n));
    abc::BoundedAttention attn{abc::control::Identity<T>{n}};
    INFO("N = " << n);
    ref::require_close(attn.forward(q, k, v),
                       ref::attention(ref::from(q), ref::from(k), ref::from(v), 1 / std::sqrt(16.0), false));
  }
}

TEMPLATE_TEST_CASE("Identity equals causal softmax attention with every kernel", "[bounded_attention][identity]",
                   float, double) {
  using T = TestType;
  for (Index n : kSizes)
    for (auto kernel : kKernels)
      for (Index chunk : {Index(1), Index(7), Index(64)}) {
        const Index d = 12, dv = 5;
        auto q = ref::random<T>(n, d, 11), k = ref::random<T>(n, d, 12), v = ref::random<T>(n, dv, 13);
        abc::BoundedAttention attn{abc::control::Identity<T>{n}, with_kernel(kernel, chunk)};
        INFO("N = " << n << ", kernel " << int(kernel) << ", chunk " << chunk);
        ref::require_close(attn.forward_causal(q, k, v),
                           ref::attention(ref::from(q), ref::from(k), ref::from(v), 1 / std::sqrt(12.0), true));
      }
}

TEMPLATE_TEST_CASE("SlidingWindow is attention over the last n tokens", "[bounded_attention][sliding_window]",
                   float, double) {
  using T = TestType;
  for (Index n_tok : kSizes)
    for (Index window : {Index(1), Index(3), Index(16), Index(64), Index(200)})
      for (auto kernel : kKernels) {
        const Index d = 8, dv = 11;
        auto q = ref::random<T>(n_tok, d, 21), k = ref::random<T>(n_tok, d, 22);
        auto v = ref::random<T>(n_tok, dv, 23);
        abc::BoundedAttention attn{abc::control::SlidingWindow<T>{window}, with_kernel(kernel, 16)};
        const auto rq = ref::from(q), rk = ref::from(k), rv = ref::from(v);
        const double scale = 1 / std::sqrt(8.0);
        INFO("N = " << n_tok << ", n = " << window << ", kernel " << int(kernel));
        // The closed form (oracle 6): with n ≥ N this is plain causal softmax attention.
        const auto want = window >= n_tok ? ref::attention(rq, rk, rv, scale, true)
                                          : ref::window_attention(rq, rk, rv, scale, window);
        ref::require_close(attn.forward_causal(q, k, v), want);
        // Non-causal: every query reads the last n keys of the sequence.
        const Index begin = std::max<Index>(0, n_tok - window);
        ref::Mat lk(rk.begin() + long(begin), rk.end()), lv(rv.begin() + long(begin), rv.end());
        ref::require_close(attn.forward(q, k, v), ref::attention(rq, lk, lv, scale, false));
      }
}

TEMPLATE_TEST_CASE("forward_causal, a step loop and a split at every position agree",
                   "[bounded_attention][recurrent]", float, double) {
  using T = TestType;
  const Index n_tok = 65, d = 7, dv = 10;
  auto q = ref::random<T>(n_tok, d, 31), k = ref::random<T>(n_tok, d, 32), v = ref::random<T>(n_tok, dv, 33);
  auto check = [&](const auto& attn) {
    const abc::Matrix<T> whole = attn.forward_causal(q, k, v);
    ref::require_same(step_loop(attn, q, k, v), whole);
    for (Index split = 0; split <= n_tok; ++split) {
      INFO("split at " << split);
      ref::require_same(split_run(attn, q, k, v, split), whole);
    }
  };
  for (auto kernel : kKernels) {
    INFO("kernel " << int(kernel));
    check(abc::BoundedAttention{abc::control::SlidingWindow<T>{9}, with_kernel(kernel, 8)});
    check(abc::BoundedAttention{abc::control::Identity<T>{n_tok}, with_kernel(kernel, 8)});
  }
}

TEMPLATE_TEST_CASE("empty slots: masked by default, literal on request", "[bounded_attention][empty_slots]",
                   float, double) {
  using T = TestType;
  const Index n_tok = 5, d = 4, dv = 3, window = 8;
  auto q = ref::random<T>(n_tok, d, 41), k = ref::random<T>(n_tok, d, 42), v = ref::random<T>(n_tok, dv, 43);
  const auto rq = ref::from(q), rk = ref::from(k), rv = ref::from(v);
  const double scale = 0.5;
  abc::Options literal;
  literal.empty_slots = abc::EmptySlots::literal;
  for (auto kernel : kKernels) {
    literal.causal_kernel = kernel;
    abc::BoundedAttention attn{abc::control::SlidingWindow<T>{window}, literal};
    // Literal reading (oracle 3): the 8 − (t + 1) zero rows each take mass exp(0) with a zero value.
    ref::Mat want;
    for (Index t = 0; t < n_tok; ++t) {
      ref::Mat keys(size_t(window), std::vector<double>(size_t(d), 0.0)), vals(size_t(window), std::vector<double>(size_t(dv), 0.0));
      for (Index i = 0; i <= t; ++i) {
        keys[size_t(i)] = rk[size_t(i)];
        vals[size_t(i)] = rv[size_t(i)];
      }
      want.push_back(ref::read(rq[size_t(t)], keys, vals, std::vector<bool>(size_t(window), true), scale));
    }
    ref::require_close(attn.forward_causal(q, k, v), want);
  }
  // ... which is not causal attention, while the masked default is.
  abc::Options opts;
  opts.scale = scale;
  literal.scale = scale;
  abc::BoundedAttention masked{abc::control::SlidingWindow<T>{window}, opts};
  abc::BoundedAttention lit{abc::control::SlidingWindow<T>{window}, literal};
  const auto exact = ref::attention(rq, rk, rv, scale, true);
  ref::require_close(masked.forward_causal(q, k, v), exact);
  REQUIRE(ref::errors(lit.forward_causal(q, k, v), exact).max_abs > 1e-3);
}

TEMPLATE_TEST_CASE("a memory with no written slot reads as zero", "[bounded_attention][empty_slots]", float, double) {
  using T = TestType;
  abc::BoundedAttention attn{abc::control::SlidingWindow<T>{4}};
  auto q = ref::random<T>(3, 5, 1);
  abc::Matrix<T> k(0, 5), v(0, 2);
  const abc::Matrix<T> out = attn.forward(q, k, v);
  REQUIRE(out.rows() == 3);
  REQUIRE(out.cols() == 2);
  REQUIRE(out.isZero(0));
  const abc::Matrix<T> none = attn.forward_causal(k, k, v);
  REQUIRE(none.rows() == 0);
}

TEMPLATE_TEST_CASE("scale is configurable and defaults to 1/sqrt(d)", "[bounded_attention][options]", float, double) {
  using T = TestType;
  const Index n_tok = 20, d = 9, dv = 4;
  auto q = ref::random<T>(n_tok, d, 51), k = ref::random<T>(n_tok, d, 52), v = ref::random<T>(n_tok, dv, 53);
  const auto rq = ref::from(q), rk = ref::from(k), rv = ref::from(v);
  abc::Options one;
  one.scale = 1.0;
  abc::BoundedAttention plain{abc::control::Identity<T>{n_tok}};
  abc::BoundedAttention unscaled{abc::control::Identity<T>{n_tok}, one};
  REQUIRE(plain.scale(d) == T(1) / std::sqrt(T(9)));
  ref::require_close(unscaled.forward(q, k, v), ref::attention(rq, rk, rv, 1.0, false));
  ref::require_close(unscaled.forward_causal(q, k, v), ref::attention(rq, rk, rv, 1.0, true));
  REQUIRE(ref::errors(plain.forward(q, k, v), ref::attention(rq, rk, rv, 1.0, false)).max_abs > 1e-4);
}

TEMPLATE_TEST_CASE("a separate control input X is accepted by input-free controls", "[bounded_attention][input]",
                   float, double) {
  using T = TestType;
  const Index n_tok = 10, d = 6, dv = 3;
  auto q = ref::random<T>(n_tok, d, 61), k = ref::random<T>(n_tok, d, 62), v = ref::random<T>(n_tok, dv, 63);
  auto x = ref::random<T>(n_tok, 17, 64);  // any width: the window reads no input
  abc::BoundedAttention attn{abc::control::SlidingWindow<T>{4}};
  ref::require_same(attn.forward(q, k, v, x), attn.forward(q, k, v));
  ref::require_same(attn.forward_causal(q, k, v, x), attn.forward_causal(q, k, v));
  auto s1 = attn.make_state(d, dv), s2 = attn.make_state(d, dv);
  const abc::Matrix<T> a = attn.step(s1, q.row(0).transpose(), k.row(0).transpose(), v.row(0).transpose(), x.row(0).transpose());
  const abc::Matrix<T> b = attn.step(s2, q.row(0).transpose(), k.row(0).transpose(), v.row(0).transpose());
  ref::require_same(a, b);
}

TEMPLATE_TEST_CASE("allocation-free overloads write the caller's buffers", "[bounded_attention][into]", float, double) {
  using T = TestType;
  const Index n_tok = 33, d = 8, dv = 5;
  auto q = ref::random<T>(n_tok, d, 71), k = ref::random<T>(n_tok, d, 72), v = ref::random<T>(n_tok, dv, 73);
  abc::BoundedAttention attn{abc::control::SlidingWindow<T>{6}};
  abc::Matrix<T> big = abc::Matrix<T>::Constant(n_tok + 4, dv + 2, T(7));
  attn.forward_into(q, k, v, big.block(2, 1, n_tok, dv));
  ref::require_same(abc::Matrix<T>(big.block(2, 1, n_tok, dv)), attn.forward(q, k, v));
  REQUIRE(big(0, 0) == T(7));  // nothing outside the block was touched
  auto state = attn.make_state(d, dv);
  attn.forward_causal_into(state, q, k, v, big.block(2, 1, n_tok, dv));
  ref::require_same(abc::Matrix<T>(big.block(2, 1, n_tok, dv)), attn.forward_causal(q, k, v));
  abc::Vector<T> out(dv);
  state.reset();
  attn.step_into(state, q.row(0).transpose(), k.row(0).transpose(), v.row(0).transpose(), out);
  ref::require_same(abc::Matrix<T>(out.transpose()), abc::Matrix<T>(v.row(0)));  // one token reads itself
}

TEMPLATE_TEST_CASE("the state is a constant-size value that can be copied and reset", "[bounded_attention][state]",
                   float, double) {
  using T = TestType;
  const Index d = 8, dv = 8;
  abc::BoundedAttention attn{abc::control::SlidingWindow<T>{16}};
  auto state = attn.make_state(d, dv);
  const auto bytes0 = state.bytes();
  auto q = ref::random<T>(1000, d, 81), k = ref::random<T>(1000, d, 82), v = ref::random<T>(1000, dv, 83);
  attn.forward_causal(state, q.topRows(500), k.topRows(500), v.topRows(500));
  REQUIRE(state.bytes() == bytes0);  // flat in N
  REQUIRE(state.position() == 500);
  REQUIRE(state.num_written() == 16);
  auto fork = state;  // a copy continues independently and identically
  const abc::Matrix<T> a = attn.forward_causal(state, q.bottomRows(500), k.bottomRows(500), v.bottomRows(500));
  const abc::Matrix<T> b = attn.forward_causal(fork, q.bottomRows(500), k.bottomRows(500), v.bottomRows(500));
  REQUIRE(a == b);
  REQUIRE(state == fork);
  state.reset();
  REQUIRE(state.position() == 0);
  REQUIRE(state.num_written() == 0);
  REQUIRE(state == attn.make_state(d, dv));
}

}  // namespace bounded_attention_test
