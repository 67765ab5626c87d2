// SPDX-License-Identifier: MIT
// abc tests: the contract at the edges of every operator's parameters. Every parameter's shape is
// checked against the data it is applied to (a TRAMS score's W_Q against the pool's keys); one rule
// for zero-width inputs across operators (a shape_error naming the argument); and sizes whose sums
// or products would overflow Index are refused by name instead of wrapping (UBSan's finding).
#include <abc/abc.hpp>

#include <cmath>
#include <cstdint>
#include <limits>

#include "support/catch.hpp"
#include "support/reference.hpp"

namespace contract_edges_test {

namespace {

using abc::Index;
using abc::select::KeyScore;
using abc::select::TramsAttention;
constexpr Index kMax = std::numeric_limits<Index>::max();

}  // namespace

TEMPLATE_TEST_CASE("TRAMS refuses a pool whose keys are not the width of its score's W_Q", "[trams][errors]", float,
                   double) {
  using T = TestType;
  const Index dv = 3;
  const TramsAttention<T> narrow({8, 2, 2}, KeyScore<T>(ref::random<T>(4, 6, 1)));
  const TramsAttention<T> wide({8, 2, 2}, KeyScore<T>(ref::random<T>(16, 6, 2)));
  auto s = narrow.make_state(4, dv);  // keys of width 4: the wide score reads 16 entries of each
  const auto q = ref::random<T>(3, 4, 3), k = ref::random<T>(3, 4, 4), v = ref::random<T>(3, dv, 5);
  narrow.segment(s, q, k, v);
  const auto keys_before = s.key(0);
  const Index size_before = s.size();
  REQUIRE_THROWS_AS(wide.segment(s, q, k, v), abc::shape_error);
  REQUIRE_THROWS_WITH(wide.segment(s, q, k, v),
                      ABC_CONTAINS("abc::select::TramsAttention: score.key_dim() is 16, expected 4"));
  REQUIRE_THROWS_AS(wide.step(s, q.row(0).transpose(), k.row(0).transpose(), v.row(0).transpose()), abc::shape_error);
  REQUIRE_THROWS_WITH(wide.step(s, q.row(0).transpose(), k.row(0).transpose(), v.row(0).transpose()),
                      ABC_CONTAINS("abc::select::TramsAttention: score.key_dim() is 16, expected 4"));
  REQUIRE(s.size() == size_before);
  REQUIRE(s.key(0) == keys_before);
  // And the other way: a pool of wide keys read by a narrow score (this read past W_Q's summary).
  auto ws = wide.make_state(16, dv);
  const auto q16 = ref::random<T>(3, 16, 6), k16 = ref::random<T>(3, 16, 7);
  REQUIRE_THROWS_WITH(narrow.segment(ws, q16, k16, v), ABC_CONTAINS("score.key_dim() is 4, expected 16"));
  REQUIRE(ws.size() == 0);
  // The plain key norm reads keys of any width.
  const TramsAttention<T> norm({8, 2, 2}, KeyScore<T>::norm());
  REQUIRE_NOTHROW(norm.segment(s, q, k, v));
}

TEMPLATE_TEST_CASE("zero-width queries, keys or values are a shape_error naming the argument, in every operator",
                   "[errors][shape][zero_width]", float, double) {
  using T = TestType;
  const abc::Matrix<T> q0(5, 0), v = ref::random<T>(5, 3, 1), q = ref::random<T>(5, 4, 2), v0(5, 0);
  const abc::BoundedAttention attn{abc::control::SlidingWindow<T>{4}};
  const abc::BoundedAttention mlp{abc::control::Mlp<T>(abc::Slots{4}, 2, abc::Seed{7})};
  const abc::Matrix<T> x = ref::random<T>(5, 2, 3);
  for (int form = 0; form < 2; ++form) {
    INFO((form == 0 ? "forward" : "forward_causal"));
    const auto call = [&](const auto& a, const abc::Matrix<T>& qq, const abc::Matrix<T>& kk, const abc::Matrix<T>& vv) {
      return form == 0 ? a.forward(qq, kk, vv) : a.forward_causal(qq, kk, vv);
    };
    REQUIRE_THROWS_AS(call(attn, q0, q0, v), abc::shape_error);
    REQUIRE_THROWS_WITH(call(attn, q0, q0, v), ABC_CONTAINS("q.cols() is 0, expected at least 1"));
    REQUIRE_THROWS_AS(call(attn, q, q, v0), abc::shape_error);
    REQUIRE_THROWS_WITH(call(attn, q, q, v0), ABC_CONTAINS("v.cols() is 0, expected at least 1"));
  }
  REQUIRE_THROWS_AS(mlp.forward_causal(q0, q0, v, x), abc::shape_error);
  REQUIRE_THROWS_WITH(mlp.forward_causal(q0, q0, v, x), ABC_CONTAINS("q.cols() is 0, expected at least 1"));
  REQUIRE_THROWS_WITH(mlp.forward_causal(q, q, v0, x), ABC_CONTAINS("v.cols() is 0, expected at least 1"));
  REQUIRE(attn.validate(q0, q0, v) == abc::Status::shape_mismatch);

  const abc::SoftmaxAttention<T> sm;
  REQUIRE_THROWS_AS(sm.forward(q0, q0, v), abc::shape_error);
  REQUIRE_THROWS_WITH(sm.forward(q0, q0, v), ABC_CONTAINS("abc::SoftmaxAttention::forward: q.cols() is 0, expected at least 1"));
  REQUIRE_THROWS_AS(sm.forward_causal(q0, q0, v), abc::shape_error);
  REQUIRE_THROWS_WITH(sm.forward_causal(q0, q0, v),
                      ABC_CONTAINS("abc::SoftmaxAttention::forward_causal: q.cols() is 0, expected at least 1"));
  REQUIRE_THROWS_WITH(sm.forward(q, q, v0), ABC_CONTAINS("v.cols() is 0, expected at least 1"));

  const abc::GlobalMemoryAttention<T> gmat(abc::LocalPattern::full());
  const abc::Matrix<T> m = ref::random<T>(2, 4, 4), mv = ref::random<T>(2, 3, 5);
  REQUIRE_THROWS_AS(gmat.forward(q0, q0, v, abc::Matrix<T>(2, 0), abc::Matrix<T>(2, 0), mv), abc::shape_error);
  REQUIRE_THROWS_WITH(gmat.forward(q0, q0, v, abc::Matrix<T>(2, 0), abc::Matrix<T>(2, 0), mv),
                      ABC_CONTAINS("k_x.cols() is 0, expected at least 1"));

  // TRAMS: a pool of zero width cannot be made (make_state's arguments are sizes: config_error).
  const TramsAttention<T> trams({8, 2, 2}, KeyScore<T>::norm());
  REQUIRE_THROWS_AS(trams.make_state(0, 3), abc::config_error);
  REQUIRE_THROWS_WITH(trams.make_state(0, 3), ABC_CONTAINS("d is 0, expected at least 1"));
  (void)m;
}

TEST_CASE("sizes whose sum or product overflows are refused by name", "[errors][config][overflow]") {
  using namespace abc::control;
  const Index big = Index(1) << 62;
  REQUIRE_THROWS_AS(Compressive<float>(abc::Slots{4}, big), abc::config_error);
  REQUIRE_THROWS_WITH(Compressive<float>(abc::Slots{4}, big),
                      ABC_CONTAINS("abc::control::Compressive: ratio × slots (the capacity in tokens) overflows"));
  REQUIRE_THROWS_AS(Dilated<float>(abc::Slots{Index(1) << 32}, Index(1) << 32), abc::config_error);
  REQUIRE_THROWS_WITH(Dilated<float>(abc::Slots{Index(1) << 32}, Index(1) << 32),
                      ABC_CONTAINS("abc::control::Dilated: n × r (the slot count) overflows"));
  // TopKEviction takes its slot count whole, so recent and topk cannot overflow: the largest n is a
  // valid configuration whose kept tokens are all recent.
  REQUIRE(TopKEviction<float>(abc::Slots{kMax}, kMax, KeyScore<float>::norm()).num_slots() == kMax);
  abc::select::TramsConfig cfg;
  cfg.recent = cfg.topk = kMax;
  REQUIRE_THROWS_AS(TramsAttention<float>(cfg, KeyScore<float>::norm()), abc::config_error);
  REQUIRE_THROWS_WITH(TramsAttention<float>(cfg, KeyScore<float>::norm()),
                      ABC_CONTAINS("abc::select::TramsAttention: config.recent + config.topk overflows"));
  abc::select::TramsConfig huge;
  huge.pool = Index(1) << 62;
  REQUIRE_THROWS_WITH(TramsAttention<float>(huge, KeyScore<float>::norm()).make_state(8, 8),
                      ABC_CONTAINS("abc::select::TramsAttention::make_state: config.pool × (d + dv) overflows"));
  // A window wider than any sequence is valid: its range is clipped, never formed past Index.
  const auto wide = abc::LocalPattern::window(0, kMax);
  REQUIRE(wide.range(0, 10) == std::pair<Index, Index>{0, 10});
  REQUIRE(wide.range(9, 10) == std::pair<Index, Index>{9, 10});
  const auto left = abc::LocalPattern::window(kMax, 0);
  REQUIRE(left.range(9, 10) == std::pair<Index, Index>{0, 10});
  const auto chunk = abc::LocalPattern::chunked(kMax);
  REQUIRE(chunk.range(9, 10) == std::pair<Index, Index>{0, 10});
  REQUIRE(abc::LocalPattern::window(kMax, kMax).main_scores(4) == 16);
}

TEMPLATE_TEST_CASE("KeyScore refuses a key that is not the width of its W_Q", "[trams][errors]", float, double) {
  using T = TestType;
  const KeyScore<T> score(ref::random<T>(4, 6, 1));
  const abc::Vector<T> wide = ref::random<T>(16, 1, 2), narrow = ref::random<T>(2, 1, 3), fits = ref::random<T>(4, 1, 4);
  // A wider key read past W_Q's summary (heap-buffer-overflow under ASan); a narrower one was scored
  // against the wrong rows of G.
  REQUIRE_THROWS_AS(score(wide), abc::shape_error);
  REQUIRE_THROWS_WITH(score(wide), ABC_CONTAINS("abc::select::KeyScore: k.size() is 16, expected 4"));
  REQUIRE_THROWS_WITH(score(narrow), ABC_CONTAINS("abc::select::KeyScore: k.size() is 2, expected 4"));
  REQUIRE(std::isfinite(double(score(fits))));
  // The plain norm reads keys of any width.
  REQUIRE(std::abs(double(KeyScore<T>::norm()(wide)) - wide.template cast<double>().norm()) <= 1e-5);

  // TopKEviction applies its score to the control input (the keys by default): the operator checks
  // that width against the score's.
  const abc::BoundedAttention topk{abc::control::TopKEviction<T>(abc::Slots{4}, 2, score)};
  const auto q8 = ref::random<T>(5, 8, 5), v = ref::random<T>(5, 3, 6), x4 = ref::random<T>(5, 4, 7);
  REQUIRE_THROWS_AS(topk.forward_causal(q8, q8, v), abc::shape_error);
  REQUIRE_THROWS_WITH(topk.forward_causal(q8, q8, v), ABC_CONTAINS("k is [5 x 8], expected [5 x 4]"));
  REQUIRE_THROWS_WITH(topk.forward_causal(q8, q8, v, ref::random<T>(5, 6, 8)), ABC_CONTAINS("x is [5 x 6], expected [5 x 4]"));
  REQUIRE_NOTHROW(topk.forward_causal(q8, q8, v, x4));
  auto s = topk.make_state(8, 3);
  REQUIRE_THROWS_WITH(topk.step(s, q8.row(0).transpose(), q8.row(0).transpose(), v.row(0).transpose()),
                      ABC_CONTAINS("k_t.size() is 8, expected 4"));
  REQUIRE(s.position() == 0);
}

TEMPLATE_TEST_CASE("TRAMS distances refuse a negative or overflowing token count", "[trams][errors][overflow]", float,
                   double) {
  using T = TestType;
  const TramsAttention<T> trams({8, 2, 2}, KeyScore<T>::norm());
  auto s = trams.make_state(4, 3);
  trams.segment(s, ref::random<T>(3, 4, 1), ref::random<T>(3, 4, 2), ref::random<T>(3, 3, 3));
  REQUIRE_THROWS_AS(trams.distances(s, -1), abc::config_error);
  REQUIRE_THROWS_WITH(trams.distances(s, -1),
                      ABC_CONTAINS("abc::select::TramsAttention::distances: n is -1, expected at least 0"));
  // Three kept tokens plus kMax new ones: the row width overflows Index.
  REQUIRE_THROWS_AS(trams.distances(s, kMax), abc::config_error);
  REQUIRE_THROWS_WITH(trams.distances(s, kMax), ABC_CONTAINS("attended(state).size() + n overflows (3 + "));
  // A row width that fits, but not the whole matrix.
  REQUIRE_THROWS_WITH(trams.distances(s, Index(1) << 40), ABC_CONTAINS("n × (attended(state).size() + n) overflows"));
  REQUIRE(trams.distances(s, 0).size() == 0);
  REQUIRE(trams.distances(s, 2).cols() == 5);
}

TEMPLATE_TEST_CASE("TRAMS and GMAT: zero-width arguments are shape_errors naming them, in every call",
                   "[trams][gmat][errors][shape][zero_width]", float, double) {
  using T = TestType;
  using abc::Matrix;
  const TramsAttention<T> trams({8, 2, 2}, KeyScore<T>::norm());
  auto s = trams.make_state(4, 3);
  const Matrix<T> q = ref::random<T>(2, 4, 1), v = ref::random<T>(2, 3, 2), z(2, 0);
  trams.segment(s, q, q, v);
  const auto before = s.key(1);
  const auto bias = [](Index, std::int64_t) { return 0.0; };
  Matrix<T> out(2, 3);
  for (int arg = 0; arg < 3; ++arg) {
    const Matrix<T>& qq = arg == 0 ? z : q;
    const Matrix<T>& kk = arg == 1 ? z : q;
    const Matrix<T>& vv = arg == 2 ? z : v;
    const char* want = arg == 0 ? "abc::select::TramsAttention: q is [2 x 0], expected [2 x 4]"
                       : arg == 1 ? "abc::select::TramsAttention: k is [2 x 0], expected [2 x 4]"
                                  : "abc::select::TramsAttention: v is [2 x 0], expected [2 x 3]";
    INFO(want);
    REQUIRE_THROWS_AS(trams.segment(s, qq, kk, vv), abc::shape_error);
    REQUIRE_THROWS_WITH(trams.segment(s, qq, kk, vv), ABC_CONTAINS(want));
    REQUIRE_THROWS_WITH(trams.segment(s, qq, kk, vv, bias), ABC_CONTAINS(want));
    REQUIRE_THROWS_WITH(trams.segment_into(s, qq, kk, vv, out), ABC_CONTAINS(want));
  }
  const abc::Vector<T> q1 = q.row(0).transpose(), v1 = v.row(0).transpose(), z1(0);
  REQUIRE_THROWS_AS(trams.step(s, z1, q1, v1), abc::shape_error);
  REQUIRE_THROWS_WITH(trams.step(s, z1, q1, v1), ABC_CONTAINS("abc::select::TramsAttention: q.size() is 0, expected 4 (the state's key width)"));
  REQUIRE_THROWS_WITH(trams.step(s, q1, z1, v1), ABC_CONTAINS("k.size() is 0, expected 4"));
  REQUIRE_THROWS_WITH(trams.step(s, q1, q1, z1), ABC_CONTAINS("v.size() is 0, expected 3"));
  REQUIRE(s.size() == 2);
  REQUIRE(s.position() == 2);
  REQUIRE(s.key(1) == before);
  // make_state's arguments are sizes, not data: config_error.
  REQUIRE_THROWS_AS(trams.make_state(4, 0), abc::config_error);
  REQUIRE_THROWS_WITH(trams.make_state(4, 0), ABC_CONTAINS("abc::select::TramsAttention::make_state: dv is 0, expected at least 1"));

  // GMAT: each of the six arguments at zero width, in forward, forward_main and forward_into.
  const abc::GlobalMemoryAttention<T> gmat(abc::LocalPattern::window(1, 1));
  const Matrix<T> x = ref::random<T>(5, 4, 3), xv = ref::random<T>(5, 3, 4), m = ref::random<T>(2, 4, 5),
                  mv = ref::random<T>(2, 3, 6), x0(5, 0), m0(2, 0);
  Matrix<T> ox(5, 3), om(2, 3);
  REQUIRE_THROWS_AS(gmat.forward(x0, x, xv, m, m, mv), abc::shape_error);
  REQUIRE_THROWS_WITH(gmat.forward(x0, x, xv, m, m, mv), ABC_CONTAINS("abc::GlobalMemoryAttention: q_x is [5 x 0], expected [5 x 4]"));
  REQUIRE_THROWS_WITH(gmat.forward(x0, x0, xv, m, m, mv), ABC_CONTAINS("k_x.cols() is 0, expected at least 1"));
  REQUIRE_THROWS_WITH(gmat.forward(x, x, x0, m, m, mv), ABC_CONTAINS("v_x.cols() is 0, expected at least 1"));
  REQUIRE_THROWS_WITH(gmat.forward(x, x, xv, m0, m, mv), ABC_CONTAINS("q_m is [2 x 0], expected [2 x 4]"));
  REQUIRE_THROWS_WITH(gmat.forward(x, x, xv, m, m0, mv), ABC_CONTAINS("k_m is [2 x 0], expected [2 x 4]"));
  REQUIRE_THROWS_WITH(gmat.forward(x, x, xv, m, m, m0), ABC_CONTAINS("v_m is [2 x 0], expected [2 x 3]"));
  REQUIRE_THROWS_AS(gmat.forward_main(x0, x, xv, m, mv), abc::shape_error);
  REQUIRE_THROWS_WITH(gmat.forward_main(x0, x, xv, m, mv), ABC_CONTAINS("q_x is [5 x 0], expected [5 x 4]"));
  REQUIRE_THROWS_WITH(gmat.forward_main(x, x, x0, m, mv), ABC_CONTAINS("v_x.cols() is 0, expected at least 1"));
  REQUIRE_THROWS_WITH(gmat.forward_main(x, x, xv, m0, mv), ABC_CONTAINS("k_m is [2 x 0], expected [2 x 4]"));
  REQUIRE_THROWS_WITH(gmat.forward_into(x, x, xv, m, m, m0, ox, om), ABC_CONTAINS("v_m is [2 x 0], expected [2 x 3]"));
  REQUIRE_THROWS_WITH(gmat.forward_into(x0, x, xv, m, m, mv, ox, om), ABC_CONTAINS("q_x is [5 x 0], expected [5 x 4]"));
}

TEMPLATE_TEST_CASE("BoundedAttention and SoftmaxAttention: zero-width arguments in step, a continued causal call and with x",
                   "[errors][shape][zero_width]", float, double) {
  using T = TestType;
  using abc::Matrix;
  const abc::BoundedAttention attn{abc::control::SlidingWindow<T>{4}};
  const abc::BoundedAttention mlp{abc::control::Mlp<T>(abc::Slots{4}, 2, abc::Seed{7})};
  const Matrix<T> q = ref::random<T>(5, 4, 1), v = ref::random<T>(5, 3, 2), x = ref::random<T>(5, 2, 3), z(5, 0);
  auto s = attn.make_state(4, 3);
  REQUIRE_THROWS_AS(attn.forward_causal(s, z, z, v), abc::shape_error);
  REQUIRE_THROWS_WITH(attn.forward_causal(s, z, z, v), ABC_CONTAINS("abc::BoundedAttention::forward_causal: q.cols() is 0, expected at least 1"));
  REQUIRE_THROWS_WITH(attn.forward_causal(s, q, z, v), ABC_CONTAINS("k is [5 x 0], expected [5 x 4]"));
  REQUIRE_THROWS_WITH(attn.forward_causal(s, q, q, z), ABC_CONTAINS("v.cols() is 0, expected at least 1"));
  REQUIRE_THROWS_WITH(attn.forward_causal(q, z, v), ABC_CONTAINS("k is [5 x 0], expected [5 x 4]"));
  REQUIRE_THROWS_WITH(attn.forward(q, z, v), ABC_CONTAINS("k is [5 x 0], expected [5 x 4]"));
  REQUIRE_THROWS_WITH(mlp.forward_causal(q, q, v, z), ABC_CONTAINS("x is [5 x 0], expected [5 x 2]"));
  REQUIRE_THROWS_WITH(mlp.forward(q, q, v, z), ABC_CONTAINS("x is [5 x 0], expected [5 x 2]"));
  REQUIRE_THROWS_WITH(mlp.forward_causal(q, z, v, x), ABC_CONTAINS("k is [5 x 0], expected [5 x 4]"));
  const abc::Vector<T> q1 = q.row(0).transpose(), v1 = v.row(0).transpose(), z1(0);
  REQUIRE_THROWS_AS(attn.step(s, z1, z1, v1), abc::shape_error);
  REQUIRE_THROWS_WITH(attn.step(s, z1, z1, v1), ABC_CONTAINS("abc::BoundedAttention::step: q_t.size() is 0, expected at least 1"));
  REQUIRE_THROWS_WITH(attn.step(s, q1, z1, v1), ABC_CONTAINS("k_t.size() is 0, expected 4"));
  REQUIRE_THROWS_WITH(attn.step(s, q1, q1, z1), ABC_CONTAINS("v_t.size() is 0, expected at least 1"));
  REQUIRE(s.position() == 0);

  const abc::SoftmaxAttention<T> sm;
  Matrix<T> out(5, 3);
  REQUIRE_THROWS_WITH(sm.forward_causal(q, q, z), ABC_CONTAINS("abc::SoftmaxAttention::forward_causal: v.cols() is 0, expected at least 1"));
  REQUIRE_THROWS_WITH(sm.forward(q, z, v), ABC_CONTAINS("k is [5 x 0], expected [5 x 4]"));
  REQUIRE_THROWS_AS(sm.forward_into(z, z, v, out), abc::shape_error);
  REQUIRE_THROWS_WITH(sm.forward_into(z, z, v, out),
                      ABC_CONTAINS("abc::SoftmaxAttention::forward: q.cols() is 0, expected at least 1"));
  REQUIRE_THROWS_WITH(sm.forward_causal_into(z, z, v, out), ABC_CONTAINS("q.cols() is 0, expected at least 1"));
}

TEST_CASE("composed and weight-drawing controls refuse sizes that overflow Index", "[errors][config][overflow]") {
  using namespace abc::control;
  const Index big = Index(1) << 32;
  // The slot count of a concatenation is a sum (UBSan: signed overflow in Concat::num_slots()).
  using SW = SlidingWindow<float>;
  using Pair = Concat<SW, SW>;
  REQUIRE_THROWS_AS(abc::BoundedAttention<Pair>(Pair(SW(kMax), SW(1))), abc::config_error);
  REQUIRE_THROWS_WITH(abc::BoundedAttention<Pair>(Pair(SW(kMax), SW(1))),
                      ABC_CONTAINS("abc::control::Concat: a.num_slots() + b.num_slots() (the slot count) overflows"));
  REQUIRE_THROWS_WITH(Pair(SW(kMax), SW(1)),
                      ABC_CONTAINS("abc::control::Concat: a.num_slots() + b.num_slots() (the slot count) overflows"));
  using Inner = Concat<SW, Identity<float>>;
  using Nested = Concat<Inner, SW>;
  REQUIRE_THROWS_AS(Nested(Inner(SW(kMax / 2), Identity<float>(kMax / 2)), SW(2)), abc::config_error);
  REQUIRE_THROWS_WITH(Nested(Inner(SW(kMax / 2), Identity<float>(kMax / 2)), SW(2)),
                      ABC_CONTAINS("abc::control::Concat: a.num_slots() + b.num_slots() (the slot count) overflows "
                                   "(9223372036854775806 + 2)"));
  REQUIRE(Pair(SW(kMax - 1), SW(1)).num_slots() == kMax);
  // Drawn weights: slots × input width entries (std::bad_alloc from Eigen, or nothing until a
  // forward call for Cluster's centroids).
  REQUIRE_THROWS_AS(Linformer<float>(abc::Slots{big}, big, abc::Seed{1}), abc::config_error);
  REQUIRE_THROWS_WITH(Linformer<float>(abc::Slots{big}, big, abc::Seed{1}), ABC_CONTAINS("abc::control::Linformer: n × n_max (the weights' entries) overflows"));
  REQUIRE_THROWS_AS(Mlp<float>(abc::Slots{big}, big, abc::Seed{1}), abc::config_error);
  REQUIRE_THROWS_WITH(Mlp<float>(abc::Slots{big}, big, abc::Seed{1}),
                      ABC_CONTAINS("abc::control::Mlp: n × d_x (the weights' entries) overflows"));
  REQUIRE_THROWS_AS(Cluster<float>(abc::Slots{big}, big, abc::Seed{1}), abc::config_error);
  REQUIRE_THROWS_WITH(Cluster<float>(abc::Slots{big}, big, abc::Seed{1}), ABC_CONTAINS("abc::control::Cluster: n × d_x (the centroids' entries) overflows"));
  const abc::Matrix<float> x = abc::Matrix<float>::Ones(3, 4);
  REQUIRE_THROWS_AS(Cluster<float>::kmeans(x, abc::Slots{kMax}, abc::Seed{1}, 1), abc::config_error);
  REQUIRE_THROWS_WITH(Cluster<float>::kmeans(x, abc::Slots{kMax}, abc::Seed{1}, 1),
                      ABC_CONTAINS("abc::control::Cluster::kmeans: n × x.cols() (the centroids' entries) overflows"));
}

}  // namespace contract_edges_test
