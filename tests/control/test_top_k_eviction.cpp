// SPDX-License-Identifier: MIT
// abc tests: control::TopKEviction: the newest `recent` tokens plus the `topk` best-scoring older
// ones, against a float64 brute force that recomputes the kept set from its definition for every
// token and reads it with plain loops; every form of BoundedAttention must match it.
#include <abc/bounded_attention.hpp>
#include <abc/control/top_k_eviction.hpp>

#include <algorithm>
#include <cmath>
#include <vector>

#include "support/approx.hpp"
#include "support/catch.hpp"
#include "support/reference.hpp"
#include "support/schedule_reference.hpp"

namespace top_k_eviction_test {

namespace {

using abc::Index;
using abc::select::KeyScore;
using abc::select::ScoreKind;
const Index kSizes[] = {1, 7, 63, 65, 100};

// The kept set after token t: tokens t − R + 1..t, and the K best of 0..t − R (higher score, then
// newer). Not an eviction simulation: the definition, evaluated from scratch.
std::vector<size_t> kept(const std::vector<double>& score, size_t t, size_t R, size_t K) {
  const size_t recent_begin = t + 1 > R ? t + 1 - R : 0;
  std::vector<size_t> old;
  for (size_t p = 0; p < recent_begin; ++p) old.push_back(p);
  std::sort(old.begin(), old.end(), [&](size_t a, size_t b) { return score[a] != score[b] ? score[a] > score[b] : a > b; });
  old.resize(std::min(old.size(), K));
  for (size_t p = recent_begin; p <= t; ++p) old.push_back(p);
  return old;
}

ref::Mat read_kept(const std::vector<double>& score, const ref::Mat& q, const ref::Mat& k, const ref::Mat& v,
                   size_t R, size_t K, double scale, bool causal) {
  ref::Mat out;
  for (size_t i = 0; i < q.size(); ++i) {
    const auto keep = kept(score, causal ? i : k.size() - 1, R, K);
    ref::Mat kk, vv;
    for (size_t p : keep) {
      kk.push_back(k[p]);
      vv.push_back(v[p]);
    }
    out.push_back(ref::read(q[i], kk, vv, std::vector<bool>(kk.size(), true), scale));
  }
  return out;
}

// Keys with exact ties: every third repeats an earlier key.
template <class T>
abc::Matrix<T> tied_keys(Index n, Index d, std::uint64_t seed) {
  abc::Matrix<T> k = ref::random<T>(n, d, seed);
  for (Index t = 3; t < n; t += 3) k.row(t) = k.row(t / 2);
  return k;
}

}  // namespace

TEMPLATE_TEST_CASE("TopKEviction equals the brute-force kept set in every form", "[trams][control][top_k_eviction]",
                   float, double) {
  using T = TestType;
  const Index d = 6, dv = 4;
  const auto w = ref::random<T>(d, 16, 801, 0.5);
  struct Sizes { Index R, K; };
  for (ScoreKind kind : {ScoreKind::trams_code, ScoreKind::trams_paper, ScoreKind::key_norm})
    for (Sizes c : {Sizes{4, 4}, Sizes{0, 5}, Sizes{5, 0}, Sizes{1, 3}, Sizes{0, 1}})
      for (Index n_tok : kSizes) {
        const auto score = kind == ScoreKind::key_norm ? KeyScore<T>::norm() : KeyScore<T>(w, kind);
        const auto q = ref::random<T>(n_tok, d, 802), k = tied_keys<T>(n_tok, d, 803), v = ref::random<T>(n_tok, dv, 804);
        std::vector<double> s;
        for (Index t = 0; t < n_tok; ++t) s.push_back(double(score(k.row(t).transpose())));
        const auto rq = ref::from(q), rk = ref::from(k), rv = ref::from(v);
        const double scale = 1 / std::sqrt(double(d));
        INFO("kind " << int(kind) << ", R " << c.R << ", K " << c.K << ", N " << n_tok);
        abc::control::TopKEviction<T> control(abc::Slots{c.R + c.K}, c.R, score);
        REQUIRE(control.num_slots() == c.R + c.K);
        ref::require_close(abc::BoundedAttention{control}.forward(q, k, v),
                           read_kept(s, rq, rk, rv, size_t(c.R), size_t(c.K), scale, false));
        ref::require_causal_forms(control, q, k, v, read_kept(s, rq, rk, rv, size_t(c.R), size_t(c.K), scale, true));
      }
}

TEMPLATE_TEST_CASE("TopKEviction: K = 0 is a sliding window; the state stays flat", "[trams][control][top_k_eviction]",
                   float, double) {
  using T = TestType;
  const Index d = 5, n_tok = 80;
  const auto q = ref::random<T>(n_tok, d, 811), k = ref::random<T>(n_tok, d, 812), v = ref::random<T>(n_tok, d, 813);
  abc::BoundedAttention attn{abc::control::TopKEviction<T>(abc::Slots{9}, 9, KeyScore<T>::norm())};
  ref::require_close(attn.forward_causal(q, k, v),
                     ref::window_attention(ref::from(q), ref::from(k), ref::from(v), 1 / std::sqrt(double(d)), 9));
  abc::BoundedAttention cache{abc::control::TopKEviction<T>(abc::Slots{16}, 4, KeyScore<T>::norm())};
  auto state = cache.make_state(d, d);
  const std::size_t bytes = state.bytes();
  for (Index t = 0; t < n_tok; ++t) cache.step(state, q.row(t).transpose(), k.row(t).transpose(), v.row(t).transpose());
  REQUIRE(state.bytes() == bytes);
  REQUIRE(state.num_written() == 16);
  // Each slot keeps its token's position (an integer in the state): all distinct.
  std::vector<Index> pos;
  for (Index l = 0; l < 16; ++l) pos.push_back(state.slot_position(l));
  std::sort(pos.begin(), pos.end());
  REQUIRE(std::adjacent_find(pos.begin(), pos.end()) == pos.end());
  REQUIRE(pos.back() == n_tok - 1);  // the newest token is kept
}

TEST_CASE("TopKEviction refuses bad sizes and widths, naming the argument", "[trams][control][top_k_eviction][errors]") {
  using C = abc::control::TopKEviction<float>;
  const auto score = KeyScore<float>::norm();
  REQUIRE_THROWS_AS(C(abc::Slots{4}, -1, score), abc::config_error);
  REQUIRE_THROWS_WITH(C(abc::Slots{4}, -1, score), ABC_CONTAINS("abc::control::TopKEviction: recent is -1, expected at least 0"));
  REQUIRE_THROWS_WITH(C(abc::Slots{2}, 3, score), ABC_CONTAINS("recent is 3, expected at most 2"));
  REQUIRE_THROWS_WITH(C(abc::Slots{0}, 0, score), ABC_CONTAINS("n is 0, expected at least 1"));
  REQUIRE(C(abc::Slots{3}, 3, score).topk() == 0);  // every slot for the newest tokens: a sliding window
  REQUIRE(C(abc::Slots{3}, 0, score).topk() == 3);  // every slot by score
  const abc::Matrix<float> w = abc::Matrix<float>::Ones(4, 8);
  abc::BoundedAttention attn{C(abc::Slots{4}, 2, KeyScore<float>(w))};
  REQUIRE(attn.control().input_dim() == 4);
  const abc::Matrix<float> x = abc::Matrix<float>::Ones(3, 5);
  REQUIRE_THROWS_AS(attn.forward_causal(x, x, x), abc::shape_error);
  REQUIRE_THROWS_WITH(attn.forward_causal(x, x, x),
                      ABC_CONTAINS("abc::BoundedAttention::forward_causal: k is [3 x 5], expected [3 x 4] (the control "
                                   "reads the keys as its input"));
  // Positions are integers, so the cache has no capacity in tokens (no max_tokens()), in float too.
  REQUIRE_FALSE(abc::detail::has_max_tokens<C>::value);
}

}  // namespace top_k_eviction_test
