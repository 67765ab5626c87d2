// SPDX-License-Identifier: MIT
// abc tests: select::KeyScore and select::TramsAttention (docs/operators/trams.md; identities T1… of docs/testing.md)
// against a float64 brute force: rebuild the pool, sort by (score, newer), read with plain loops.
#include <abc/kernel/kept_read.hpp>
#include <abc/select/key_score.hpp>
#include <abc/select/trams_attention.hpp>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "support/approx.hpp"
#include "support/catch.hpp"
#include "support/reference.hpp"

namespace trams_attention_test {

namespace {

using abc::Index;
using abc::select::KeyScore;
using abc::select::ScoreKind;
using abc::select::TramsAttention;
using abc::select::TramsConfig;

// The score of every key, from the materialised reformulated key k′ = W_Qᵀ k (float64).
std::vector<double> ref_scores(const ref::Mat& w_q, const ref::Mat& k, ScoreKind kind) {
  const size_t d = w_q.size(), dm = w_q.empty() ? 0 : w_q[0].size();
  std::vector<double> s;
  for (const auto& key : k) {
    std::vector<double> kp(dm, 0.0);
    for (size_t c = 0; c < dm; ++c)
      for (size_t r = 0; r < d; ++r) kp[c] += w_q[r][c] * key[r];
    double norm = std::sqrt(ref::dot(kp, kp)), sum = 0;
    for (double x : kp) sum += x;
    const double cos1 = sum / (norm * std::sqrt(double(dm)));  // cos⟨k′, 1⟩
    switch (kind) {
      case ScoreKind::trams_code: s.push_back(norm * std::abs(sum)); break;
      case ScoreKind::trams_paper: s.push_back(cos1 * norm); break;
      case ScoreKind::reformulated_norm: s.push_back(norm); break;
      case ScoreKind::key_norm: s.push_back(std::sqrt(ref::dot(key, key))); break;
    }
  }
  return s;
}

// Positions (ascending) a segment starting at t0 attends to before itself: the pool is tokens
// [max(0, t0 − M), t0); the newest R always, and the K best older ones (higher score, then newer).
std::vector<size_t> ref_attended(const std::vector<double>& score, size_t t0, size_t M, size_t R, size_t K) {
  const size_t begin = t0 > M ? t0 - M : 0;
  const size_t recent_begin = t0 - std::min(R, t0 - begin);
  std::vector<size_t> old;
  for (size_t p = begin; p < recent_begin; ++p) old.push_back(p);
  std::sort(old.begin(), old.end(), [&](size_t a, size_t b) {
    return score[a] != score[b] ? score[a] > score[b] : a > b;
  });
  old.resize(std::min(old.size(), K));
  std::sort(old.begin(), old.end());
  for (size_t p = recent_begin; p < t0; ++p) old.push_back(p);
  return old;
}

// The whole stream fed in segments of `seg` tokens, each query reading its segment's selection and
// the segment causally.
ref::Mat ref_trams(const ref::Mat& q, const ref::Mat& k, const ref::Mat& v, const std::vector<double>& score,
                   size_t M, size_t R, size_t K, size_t seg, double scale) {
  ref::Mat out;
  for (size_t t0 = 0; t0 < q.size(); t0 += seg) {
    const auto keep = ref_attended(score, t0, M, R, K);
    for (size_t t = t0; t < std::min(q.size(), t0 + seg); ++t) {
      ref::Mat kk, vv;
      for (size_t p : keep) {
        kk.push_back(k[p]);
        vv.push_back(v[p]);
      }
      for (size_t p = t0; p <= t; ++p) {
        kk.push_back(k[p]);
        vv.push_back(v[p]);
      }
      out.push_back(ref::read(q[t], kk, vv, std::vector<bool>(kk.size(), true), scale));
    }
  }
  return out;
}

// Keys with exact ties: every third key repeats an earlier one, so scores tie exactly.
template <class T>
abc::Matrix<T> tied_keys(Index n, Index d, std::uint64_t seed) {
  abc::Matrix<T> k = ref::random<T>(n, d, seed);
  for (Index t = 3; t < n; t += 3) k.row(t) = k.row(t / 2);
  return k;
}

template <class T>
abc::Matrix<T> run_segments(const TramsAttention<T>& attn, const abc::Matrix<T>& q, const abc::Matrix<T>& k,
                            const abc::Matrix<T>& v, Index seg) {
  auto state = attn.make_state(k.cols(), v.cols());
  abc::Matrix<T> out(q.rows(), v.cols());
  for (Index t0 = 0; t0 < q.rows(); t0 += seg) {
    const Index c = std::min(seg, q.rows() - t0);
    if (c == 1 && seg == 1)
      out.row(t0) = attn.step(state, q.row(t0).transpose(), k.row(t0).transpose(), v.row(t0).transpose()).transpose();
    else
      out.middleRows(t0, c) = attn.segment(state, q.middleRows(t0, c), k.middleRows(t0, c), v.middleRows(t0, c));
  }
  REQUIRE(state.position() == q.rows());
  REQUIRE(state.size() == std::min(q.rows(), attn.config().pool));
  return out;
}

const ScoreKind kKinds[] = {ScoreKind::trams_code, ScoreKind::trams_paper, ScoreKind::reformulated_norm,
                            ScoreKind::key_norm};

template <class T>
KeyScore<T> make_score(const abc::Matrix<T>& w_q, ScoreKind kind) {
  return kind == ScoreKind::key_norm ? KeyScore<T>::norm() : KeyScore<T>(w_q, kind);
}

}  // namespace

TEMPLATE_TEST_CASE("KeyScore equals its definition through the materialised k' = W_Q^T k (T4, T5)", "[trams]",
                   float, double) {
  using T = TestType;
  const Index d = 6, dm = 24, n = 40;
  const auto w = ref::random<T>(d, dm, 901, 0.5);
  const auto k = ref::random<T>(n, d, 902);
  const auto rw = ref::from(w), rk = ref::from(k);
  for (ScoreKind kind : kKinds) {
    const auto score = make_score(w, kind);
    const auto want = ref_scores(rw, rk, kind);
    INFO("kind " << int(kind));
    for (Index t = 0; t < n; ++t) {
      const double got = double(score(k.row(t).transpose()));
      const double tol = std::is_same<T, double>::value ? 1e-12 : 2e-6;
      REQUIRE(std::abs(got - want[size_t(t)]) <= tol * std::max(1.0, std::abs(want[size_t(t)])));
      const abc::Vector<T> neg = -k.row(t).transpose();
      if (kind == ScoreKind::trams_paper)
        REQUIRE(score(neg) == -score(k.row(t).transpose()));  // signed and linear
      else
        REQUIRE(score(neg) == score(k.row(t).transpose()));  // the absolute value, or a norm
    }
  }
  REQUIRE(KeyScore<T>(w).kind() == ScoreKind::trams_code);  // the released code's score by default
  REQUIRE(KeyScore<T>(w).key_dim() == d);
  REQUIRE(KeyScore<T>::norm().key_dim() == 0);
  // A 3-key case where the two TRAMS scores rank differently: W_Q = [1 0; 0 2], 1 = (1, 1).
  abc::Matrix<T> w2(2, 2);
  w2 << 1, 0, 0, 2;
  abc::Matrix<T> keys(3, 2);
  keys << -3, 0, 1, 0, 0, 1;  // u = (1, 2): u·k = −3, 1, 2; ‖k′‖ = 3, 1, 2
  const KeyScore<T> code(w2), paper(w2, ScoreKind::trams_paper);
  REQUIRE(code(keys.row(0).transpose()) > code(keys.row(2).transpose()));   // 9 > 4 > 1
  REQUIRE(code(keys.row(2).transpose()) > code(keys.row(1).transpose()));
  REQUIRE(paper(keys.row(2).transpose()) > paper(keys.row(1).transpose()));  // 2 > 1 > −3
  REQUIRE(paper(keys.row(1).transpose()) > paper(keys.row(0).transpose()));
}

TEMPLATE_TEST_CASE("KeyScore equals its definition at key widths that fill SIMD batches, and their tails",
                   "[trams]", float, double) {
  // kᵀGk sums G k a block of whole batches at a time in registers (blocks of four, then one of the
  // batches left), the rest in a scalar loop: widths below, at and past a block, with a tail, all
  // against the float64 definition.
  using T = TestType;
  for (Index d : {Index(7), Index(24), Index(33), Index(37), Index(59), Index(64), Index(70)}) {
    const Index dm = 24, n = 12;
    const auto w = ref::random<T>(d, dm, 903 + std::uint64_t(d), 0.5);
    const auto k = ref::random<T>(n, d, 904 + std::uint64_t(d));
    const auto want_all = ref_scores(ref::from(w), ref::from(k), ScoreKind::reformulated_norm);
    const auto code_want = ref_scores(ref::from(w), ref::from(k), ScoreKind::trams_code);
    const KeyScore<T> norm(w, ScoreKind::reformulated_norm), code(w);
    for (Index t = 0; t < n; ++t) {
      INFO("d = " << d << ", key " << t);
      const double tol = std::is_same<T, double>::value ? 1e-12 : 2e-6;
      const double got = double(norm(k.row(t).transpose())), want = want_all[size_t(t)];
      REQUIRE(std::abs(got - want) <= tol * std::max(1.0, std::abs(want)));
      REQUIRE(std::abs(double(code(k.row(t).transpose())) - code_want[size_t(t)]) <=
              tol * std::max(1.0, std::abs(code_want[size_t(t)])));
      const abc::Vector<T> neg = -k.row(t).transpose();
      REQUIRE(norm(neg) == norm(k.row(t).transpose()));
    }
  }
}

TEMPLATE_TEST_CASE("TRAMS equals a brute-force selection and dense read, in segments and step (T1, T2, T6, T13)",
                   "[trams]", float, double) {
  using T = TestType;
  const Index d = 5, dv = 4, dm = 12, n_tok = 70;
  const auto w = ref::random<T>(d, dm, 911, 0.6);
  const auto q = ref::random<T>(n_tok, d, 912), k = tied_keys<T>(n_tok, d, 913), v = ref::random<T>(n_tok, dv, 914);
  const auto rq = ref::from(q), rk = ref::from(k), rv = ref::from(v);
  const double scale = 1 / std::sqrt(double(d));
  struct Sizes { Index M, R, K; };
  const Sizes configs[] = {{16, 4, 4}, {16, 0, 16}, {16, 16, 0}, {16, 6, 0}, {16, 0, 0}, {9, 3, 6},
                           {1, 0, 1},  {1, 1, 0},   {200, 5, 20}, {200, 10, 190}};
  for (ScoreKind kind : kKinds) {
    const auto score = make_score(w, kind);
    const auto rs = ref_scores(ref::from(w), rk, kind);
    for (const auto& c : configs)
      for (Index seg : {Index(1), Index(5), Index(13)}) {
        INFO("kind " << int(kind) << ", M " << c.M << ", R " << c.R << ", K " << c.K << ", segment " << seg);
        TramsAttention<T> attn({c.M, c.R, c.K}, score);
        ref::require_close(run_segments(attn, q, k, v, seg),
                           ref_trams(rq, rk, rv, rs, size_t(c.M), size_t(c.R), size_t(c.K), size_t(seg), scale));
      }
  }
}

TEMPLATE_TEST_CASE("TRAMS selection is a brute-force sort with the tie rule, ascending (T6, T7, T8)", "[trams]",
                   float, double) {
  using T = TestType;
  const Index d = 4, n_tok = 60;
  const auto k = tied_keys<T>(n_tok, d, 921);
  const auto score = KeyScore<T>::norm();
  std::vector<double> rs;
  for (Index t = 0; t < n_tok; ++t) rs.push_back(double(score(k.row(t).transpose())));
  TramsAttention<T> attn({20, 5, 7}, score);
  auto state = attn.make_state(d, d);
  for (Index t = 0; t < n_tok; ++t) {
    const auto got = attn.attended(state);
    const auto want = ref_attended(rs, size_t(t), 20, 5, 7);
    REQUIRE(got.size() == want.size());
    for (size_t j = 0; j < got.size(); ++j)  // ages → positions
      REQUIRE(size_t(state.token_position(got[j])) == want[j]);
    REQUIRE(std::is_sorted(got.begin(), got.end()));
    // The pool is the last M tokens, in order, with the scores they had at insertion.
    for (Index a = 0; a < state.size(); ++a) {
      REQUIRE(state.token_position(a) == t - state.size() + a);
      REQUIRE(state.score(a) == score(k.row(t - state.size() + a).transpose()));
    }
    attn.step(state, ref::random<T>(1, d, 2000 + std::uint64_t(t)).row(0).transpose(), k.row(t).transpose(),
              k.row(t).transpose());
  }
  // Warm-up: K is clamped to the old region, which is empty while the pool holds ≤ R tokens.
  auto fresh = attn.make_state(d, d);
  REQUIRE(attn.attended(fresh).empty());
}

// A short segment reads the kept rows where the pool's ring holds them; the rows, their order and
// the kernels are those of the read over the rows gathered into one block, so are the bits.
TEMPLATE_TEST_CASE("TRAMS: a step reading the ring in place gives the bits of the gathered read", "[trams]", float,
                   double) {
  using T = TestType;
  const Index d = 24, dv = 20, n_tok = 90;
  const auto q = ref::random<T>(n_tok, d, 931), k = tied_keys<T>(n_tok, d, 932), v = ref::random<T>(n_tok, dv, 933);
  TramsAttention<T> attn({23, 6, 9}, KeyScore<T>::norm());  // a pool of 23 wraps its ring many times
  auto state = attn.make_state(d, dv);
  const T scale = T(1) / std::sqrt(T(d));
  abc::Matrix<T> buffer;
  for (Index t = 0; t < n_tok; ++t) {
    INFO("token " << t);
    const auto kept = attn.attended(state);
    const Index m = Index(kept.size());
    abc::Matrix<T> keys(m + 1, d), values(m + 1, dv), want(1, dv);
    for (Index j = 0; j < m; ++j) {
      keys.row(j) = state.key(kept[size_t(j)]);
      values.row(j) = state.value(kept[size_t(j)]);
    }
    keys.row(m) = k.row(t);
    values.row(m) = v.row(t);
    abc::kernel::kept_read<T>(q.row(t), keys, values, m, scale, buffer, want, abc::kernel::NoBias{});
    const auto got = attn.step(state, q.row(t).transpose(), k.row(t).transpose(), v.row(t).transpose());
    for (Index j = 0; j < dv; ++j) REQUIRE(got(j) == want(0, j));
  }
}

TEMPLATE_TEST_CASE("TRAMS keeping the whole pool is causal softmax attention; topk = 0 is a window of recent (T1, T2)",
                   "[trams]", float, double) {
  using T = TestType;
  const Index d = 6, dv = 3, n_tok = 65;
  const auto w = ref::random<T>(d, 10, 931);
  const auto q = ref::random<T>(n_tok, d, 932), k = ref::random<T>(n_tok, d, 933), v = ref::random<T>(n_tok, dv, 934);
  const auto rq = ref::from(q), rk = ref::from(k), rv = ref::from(v);
  const double scale = 1 / std::sqrt(double(d));
  for (Index seg : {Index(1), Index(7), Index(64)}) {
    INFO("segment " << seg);
    TramsAttention<T> all({n_tok, 3, n_tok - 3}, KeyScore<T>(w));
    ref::require_close(run_segments(all, q, k, v, seg), ref::attention(rq, rk, rv, scale, true));
  }
  TramsAttention<T> recency({30, 8, 0}, KeyScore<T>(w));  // step: 8 pool tokens + the query's own
  ref::require_close(run_segments(recency, q, k, v, 1), ref::window_attention(rq, rk, rv, scale, 9));
}

TEMPLATE_TEST_CASE("TRAMS: the captured attention mass bounds the output error (T12)", "[trams]", float, double) {
  using T = TestType;
  const Index d = 8, dv = 6, n_tok = 120;
  const auto w = ref::random<T>(d, 32, 941);
  const auto q = ref::random<T>(n_tok, d, 942, 2.0), k = ref::random<T>(n_tok, d, 943, 2.0),
             v = ref::random<T>(n_tok, dv, 944);
  const auto rq = ref::from(q), rk = ref::from(k), rv = ref::from(v);
  const double scale = 1 / std::sqrt(double(d));
  for (ScoreKind kind : kKinds) {
    TramsAttention<T> attn({n_tok, 10, 20}, make_score(w, kind));  // no expiry: full = all past tokens
    auto state = attn.make_state(d, dv);
    const auto rs = ref_scores(ref::from(w), rk, kind);
    double worst = 0;
    for (Index t = 0; t < n_tok; ++t) {
      const auto keep = ref_attended(rs, size_t(t), size_t(n_tok), 10, 20);
      const abc::Vector<T> got = attn.step(state, q.row(t).transpose(), k.row(t).transpose(), v.row(t).transpose());
      // ρ: the kept set's share of query t's full causal softmax.
      std::vector<double> p;
      double mx = -1e300, total = 0, rho = 0;
      for (Index j = 0; j <= t; ++j) mx = std::max(mx, scale * ref::dot(rq[size_t(t)], rk[size_t(j)]));
      for (Index j = 0; j <= t; ++j) total += (p.emplace_back(std::exp(scale * ref::dot(rq[size_t(t)], rk[size_t(j)]) - mx)));
      for (size_t j : keep) rho += p[j] / total;
      rho += p[size_t(t)] / total;  // the query's own token is always read
      const auto full = ref::attention({rq[size_t(t)]}, ref::Mat(rk.begin(), rk.begin() + t + 1),
                                       ref::Mat(rv.begin(), rv.begin() + t + 1), scale, false)[0];
      double spread = 0, err = 0;
      for (Index a = 0; a <= t; ++a)
        for (Index b = 0; b <= t; ++b) {
          double dd = 0;
          for (Index c = 0; c < dv; ++c) dd += std::pow(rv[size_t(a)][size_t(c)] - rv[size_t(b)][size_t(c)], 2);
          spread = std::max(spread, std::sqrt(dd));
        }
      for (Index c = 0; c < dv; ++c) err += std::pow(double(got(c)) - full[size_t(c)], 2);
      err = std::sqrt(err);
      const double bound = (1 - rho) * spread;
      REQUIRE(err <= bound + (std::is_same<T, double>::value ? 1e-12 : 1e-5));
      worst = std::max(worst, err);
    }
    REQUIRE(worst > 0);  // the selection drops mass once the stream outgrows recent + topk
  }
}

TEMPLATE_TEST_CASE("TRAMS positions: compacted and original distances, and the bias hook (T9, T14)", "[trams]",
                   float, double) {
  using T = TestType;
  const Index d = 4, dv = 3, n_tok = 40, seg = 5;
  const auto q = ref::random<T>(n_tok, d, 951), k = ref::random<T>(n_tok, d, 952), v = ref::random<T>(n_tok, dv, 953);
  for (auto mode : {abc::select::PositionMode::compacted, abc::select::PositionMode::original}) {
    TramsConfig cfg{12, 3, 4};
    cfg.positions = mode;
    TramsAttention<T> attn(cfg, KeyScore<T>::norm());
    auto state = attn.make_state(d, dv);
    attn.segment(state, q.topRows(30), k.topRows(30), v.topRows(30));
    const auto kept = attn.attended(state);
    const auto dist = attn.distances(state, seg);
    const Index m = Index(kept.size());
    REQUIRE(m == 7);
    REQUIRE(dist.rows() == seg);
    REQUIRE(dist.cols() == m + seg);
    for (Index i = 0; i < seg; ++i) {
      for (Index a = 0; a < m; ++a)
        REQUIRE(dist(i, a) == (mode == abc::select::PositionMode::compacted
                                   ? std::int64_t(m + i - a)
                                   : std::int64_t(30 + i) - state.token_position(kept[size_t(a)])));
      for (Index j = 0; j < seg; ++j) REQUIRE(dist(i, m + j) == std::int64_t(i - j));
    }
    // The bias hook adds bias(i, distance) to the logits: equal to a read with those logits.
    auto before = state;
    auto bias = [](Index, std::int64_t delta) { return 0.05 * double(delta); };
    const abc::Matrix<T> got = attn.segment(state, q.middleRows(30, seg), k.middleRows(30, seg),
                                            v.middleRows(30, seg), bias);
    ref::Mat want;
    const double scale = 0.5;
    for (Index i = 0; i < seg; ++i) {
      std::vector<double> logit, w8;
      ref::Mat vals;
      for (Index a = 0; a < m + i + 1; ++a) {
        const Index row = a < m ? before.token_position(kept[size_t(a)]) : 30 + a - m;
        logit.push_back(scale * ref::dot(ref::from(abc::Matrix<T>(q.row(30 + i)))[0],
                                         ref::from(abc::Matrix<T>(k.row(row)))[0]) +
                        0.05 * double(dist(i, a)));
        vals.push_back(ref::from(abc::Matrix<T>(v.row(row)))[0]);
      }
      const double mx = *std::max_element(logit.begin(), logit.end());
      double total = 0;
      std::vector<double> o(size_t(dv), 0.0);
      for (size_t a = 0; a < logit.size(); ++a) {
        const double e = std::exp(logit[a] - mx);
        total += e;
        for (Index c = 0; c < dv; ++c) o[size_t(c)] += e * vals[a][size_t(c)];
      }
      for (auto& x : o) x /= total;
      want.push_back(o);
    }
    ref::require_close(got, want);
  }
  // T14: a segment keeps one selection for all its queries; step reselects every token.
  TramsAttention<T> attn({12, 2, 3}, KeyScore<T>::norm());
  auto s1 = attn.make_state(d, dv), s2 = attn.make_state(d, dv);
  attn.segment(s1, q.topRows(30), k.topRows(30), v.topRows(30));
  attn.segment(s2, q.topRows(30), k.topRows(30), v.topRows(30));
  const abc::Matrix<T> a = attn.segment(s1, q.bottomRows(10), k.bottomRows(10), v.bottomRows(10));
  abc::Matrix<T> b(10, dv);
  for (Index t = 0; t < 10; ++t)
    b.row(t) = attn.step(s2, q.row(30 + t).transpose(), k.row(30 + t).transpose(), v.row(30 + t).transpose()).transpose();
  REQUIRE(double((a.row(0) - b.row(0)).cwiseAbs().maxCoeff()) <= 1e-6);  // same first selection
  REQUIRE(double((a - b).cwiseAbs().maxCoeff()) > 1e-3);
}

TEST_CASE("TRAMS refuses bad configurations and shapes, naming the argument", "[trams][errors]") {
  using A = TramsAttention<float>;
  const auto score = KeyScore<float>::norm();
  REQUIRE_THROWS_AS(A({10, 6, 5}, score), abc::config_error);
  REQUIRE_THROWS_WITH(A({10, 6, 5}, score),
                      ABC_CONTAINS("abc::select::TramsAttention: config.recent + config.topk is 11, expected at most 10"));
  REQUIRE_THROWS_WITH(A({0, 0, 0}, score), ABC_CONTAINS("config.pool is 0, expected at least 1"));
  REQUIRE_THROWS_WITH(A({10, -1, 0}, score), ABC_CONTAINS("config.recent is -1, expected at least 0"));
  REQUIRE_THROWS_WITH(A({10, 0, -2}, score), ABC_CONTAINS("config.topk is -2, expected at least 0"));
  TramsConfig bad_scale{10, 2, 2};
  bad_scale.scale = -1;
  REQUIRE_THROWS_WITH(A(bad_scale, score), ABC_CONTAINS("config.scale"));
  const abc::Matrix<float> w = abc::Matrix<float>::Ones(4, 8);
  A attn({10, 2, 2}, KeyScore<float>(w));
  REQUIRE_THROWS_AS(attn.make_state(5, 3), abc::shape_error);
  REQUIRE_THROWS_WITH(attn.make_state(5, 3), ABC_CONTAINS("d is 5, expected exactly 4"));
  auto state = attn.make_state(4, 3);
  const abc::Matrix<float> q = abc::Matrix<float>::Ones(2, 4), v = abc::Matrix<float>::Ones(2, 3);
  REQUIRE_THROWS_AS(attn.segment(state, q, q, abc::Matrix<float>::Ones(2, 2)), abc::shape_error);
  REQUIRE_THROWS_WITH(attn.segment(state, q, q, abc::Matrix<float>::Ones(2, 2)), ABC_CONTAINS("v is [2 x 2], expected [2 x 3]"));
  REQUIRE_THROWS_WITH(attn.segment(state, q, abc::Matrix<float>::Ones(3, 4), v), ABC_CONTAINS("k is [3 x 4], expected [2 x 4]"));
  abc::Matrix<float> nan = q;
  nan(1, 2) = std::nanf("");
  REQUIRE_THROWS_WITH(attn.segment(state, q, nan, v), ABC_CONTAINS("k holds a non-finite value at row 1, column 2"));
  REQUIRE(state.position() == 0);  // nothing half-written
  REQUIRE(state.size() == 0);
  REQUIRE_THROWS_WITH(KeyScore<float>(abc::Matrix<float>(0, 3)), ABC_CONTAINS("w_q is [0 x 3]"));
  REQUIRE_THROWS_AS(KeyScore<float>(w, ScoreKind::key_norm), abc::config_error);
  REQUIRE_THROWS_WITH(KeyScore<float>(w, ScoreKind::key_norm),
                      ABC_CONTAINS("abc::select::KeyScore: kind is key_norm, expected a score of W_Q (KeyScore::norm() "
                                   "needs no W_Q)"));
}

}  // namespace trams_attention_test
