// SPDX-License-Identifier: MIT
// abc tests: GlobalMemoryAttention (GMAT, docs/operators/gmat.md; identities G1… of docs/testing.md) against a float64
// dense attention over the concatenation [X ; X_M] with the additive mask [[B, 0], [0, 0]], written
// with plain loops; and the core's two-range slot read it relies on.
#include <abc/bounded_attention.hpp>
#include <abc/control/concat.hpp>
#include <abc/control/global_tokens.hpp>
#include <abc/kernel/softmax_slots.hpp>
#include <abc/global_memory_attention.hpp>

#include <cmath>
#include <limits>
#include <vector>

#include "support/approx.hpp"
#include "support/catch.hpp"
#include "support/reference.hpp"

namespace global_memory_attention_test {

namespace {

using abc::Index;
using abc::LocalPattern;

// B_ij, from the pattern's definition (not from LocalPattern::range).
bool allowed(const LocalPattern& p, Index i, Index j) {
  switch (p.kind()) {
    case LocalPattern::Kind::full: return true;
    case LocalPattern::Kind::chunked: return i / p.chunk_size() == j / p.chunk_size();
    case LocalPattern::Kind::window: return j >= i - p.left() && j <= i + p.right();
  }
  return false;
}

// Dense attention over [X ; X_M] with the additive mask (0 or −∞); rows [L main ; M memory].
ref::Mat dense(const LocalPattern& p, const ref::Mat& qx, const ref::Mat& kx, const ref::Mat& vx, const ref::Mat& qm,
               const ref::Mat& km, const ref::Mat& vm, double scale) {
  const size_t L = kx.size(), M = km.size();
  ref::Mat keys = kx, values = vx, queries = qx;
  keys.insert(keys.end(), km.begin(), km.end());
  values.insert(values.end(), vm.begin(), vm.end());
  queries.insert(queries.end(), qm.begin(), qm.end());
  ref::Mat out;
  for (size_t i = 0; i < L + M; ++i) {
    std::vector<double> logit(L + M);
    double mx = -std::numeric_limits<double>::infinity();
    for (size_t j = 0; j < L + M; ++j) {
      const bool ok = i >= L || j >= L || allowed(p, Index(i), Index(j));
      logit[j] = scale * ref::dot(queries[i], keys[j]) + (ok ? 0.0 : -std::numeric_limits<double>::infinity());
      mx = std::max(mx, logit[j]);
    }
    std::vector<double> o(values[0].size(), 0.0);
    double total = 0;
    for (size_t j = 0; j < L + M; ++j) {
      const double e = std::exp(logit[j] - mx);
      total += e;
      for (size_t c = 0; c < o.size(); ++c) o[c] += e * values[j][c];
    }
    for (auto& x : o) x /= total;
    out.push_back(o);
  }
  return out;
}

template <class T>
struct Inputs {
  abc::Matrix<T> qx, kx, vx, qm, km, vm;
  Inputs(Index L, Index M, Index d, Index dv, std::uint64_t seed)
      : qx(ref::random<T>(L, d, seed)), kx(ref::random<T>(L, d, seed + 1)), vx(ref::random<T>(L, dv, seed + 2)),
        qm(ref::random<T>(M, d, seed + 3)), km(ref::random<T>(M, d, seed + 4)), vm(ref::random<T>(M, dv, seed + 5)) {}
};

std::vector<LocalPattern> patterns() {
  return {LocalPattern::full(),      LocalPattern::chunked(1),   LocalPattern::chunked(8),
          LocalPattern::chunked(64), LocalPattern::chunked(500), LocalPattern::window(0),
          LocalPattern::window(3),   LocalPattern::window(2, 9), LocalPattern::window(70, 0)};
}

}  // namespace

TEMPLATE_TEST_CASE("GMAT equals dense attention over [X; X_M] with the pattern's mask (G3, G4, G5)", "[gmat]", float,
                   double) {
  using T = TestType;
  const Index d = 7, dv = 5;
  for (Index L : {Index(0), Index(1), Index(7), Index(63), Index(65), Index(100)})
    for (Index M : {Index(0), Index(1), Index(5)}) {
      if (L + M == 0) continue;
      const Inputs<T> in(L, M, d, dv, 500 + std::uint64_t(L * 7 + M));
      const double scale = 1 / std::sqrt(double(d));
      ref::Mat memory_rows;
      for (const auto& p : patterns()) {
        INFO("L " << L << ", M " << M << ", pattern " << int(p.kind()) << " " << p.chunk_size() << " " << p.left()
                  << " " << p.right());
        abc::GlobalMemoryAttention<T> gmat(p);
        const auto out = gmat.forward(in.qx, in.kx, in.vx, in.qm, in.km, in.vm);
        auto want = dense(p, ref::from(in.qx), ref::from(in.kx), ref::from(in.vx), ref::from(in.qm),
                          ref::from(in.km), ref::from(in.vm), scale);
        const ref::Mat want_main(want.begin(), want.begin() + L), want_mem(want.begin() + L, want.end());
        ref::require_close(out.main, want_main);
        ref::require_close(out.memory, want_mem);  // the memory rows do not depend on the pattern
        if (L > 0) ref::require_same(gmat.forward_main(in.qx, in.kx, in.vx, in.km, in.vm), out.main);
      }
    }
}

TEMPLATE_TEST_CASE("GMAT with M = 0: full is vanilla attention, chunked is block-diagonal (G1, G2)", "[gmat]", float,
                   double) {
  using T = TestType;
  const Index L = 100, d = 8, dv = 4, C = 30;  // the last chunk is short
  const Inputs<T> in(L, 0, d, dv, 600);
  const auto rq = ref::from(in.qx), rk = ref::from(in.kx), rv = ref::from(in.vx);
  const double scale = 1 / std::sqrt(double(d));
  ref::require_close(abc::GlobalMemoryAttention<T>(LocalPattern::full()).forward_main(in.qx, in.kx, in.vx, in.km, in.vm),
                     ref::attention(rq, rk, rv, scale, false));
  ref::require_close(abc::GlobalMemoryAttention<T>(LocalPattern::chunked(L)).forward_main(in.qx, in.kx, in.vx, in.km, in.vm),
                     ref::attention(rq, rk, rv, scale, false));
  const auto out = abc::GlobalMemoryAttention<T>(LocalPattern::chunked(C)).forward_main(in.qx, in.kx, in.vx, in.km, in.vm);
  for (Index c0 = 0; c0 < L; c0 += C) {
    const Index n = std::min(C, L - c0);
    const ref::Mat q(rq.begin() + c0, rq.begin() + c0 + n), k(rk.begin() + c0, rk.begin() + c0 + n),
        v(rv.begin() + c0, rv.begin() + c0 + n);
    ref::require_close(abc::Matrix<T>(out.middleRows(c0, n)), ref::attention(q, k, v, scale, false));
  }
}

TEMPLATE_TEST_CASE("GMAT chunk locality in one layer (G6) and the ABC cross-check (G12b)", "[gmat]", float, double) {
  using T = TestType;
  const Index L = 48, M = 3, d = 6, dv = 4, C = 16;
  const Inputs<T> in(L, M, d, dv, 700);
  abc::GlobalMemoryAttention<T> gmat(LocalPattern::chunked(C));
  const auto a = gmat.forward(in.qx, in.kx, in.vx, in.qm, in.km, in.vm);
  Inputs<T> changed = in;
  changed.kx.middleRows(2 * C, C) = ref::random<T>(C, d, 777);  // chunk 2 only
  changed.vx.middleRows(2 * C, C) = ref::random<T>(C, dv, 778);
  const auto b = gmat.forward(changed.qx, changed.kx, changed.vx, changed.qm, changed.km, changed.vm);
  REQUIRE(a.main.topRows(2 * C) == b.main.topRows(2 * C));  // bit-identical: chunks 0 and 1
  REQUIRE(a.main.bottomRows(C) != b.main.bottomRows(C));
  REQUIRE(a.memory != b.memory);  // the memory sees every chunk
  // Chunk c's rows == BoundedAttention over Concat(GlobalTokens(chunk), GlobalTokens(memory)) on [X; X_M].
  abc::Matrix<T> keys(L + M, d), values(L + M, dv);
  keys << in.kx, in.km;
  values << in.vx, in.vm;
  for (Index c0 = 0; c0 < L; c0 += C) {
    std::vector<Index> chunk, memory;
    for (Index j = 0; j < C; ++j) chunk.push_back(c0 + j);
    for (Index j = 0; j < M; ++j) memory.push_back(L + j);
    using G = abc::control::GlobalTokens<T>;
    abc::BoundedAttention attn{abc::control::Concat<G, G>(G(chunk), G(memory))};
    ref::require_same(attn.forward(in.qx.middleRows(c0, C), keys, values), abc::Matrix<T>(a.main.middleRows(c0, C)));
  }
}

TEST_CASE("GMAT score counts (G11)", "[gmat]") {
  using G = abc::GlobalMemoryAttention<float>;
  REQUIRE(G::score_count(LocalPattern::chunked(512), 2048, 64) == 1314816u);  // (512×4, 64)
  REQUIRE(G::score_count(LocalPattern::full(), 2048, 0) == 4194304u);
  const double ratio = 4194304.0 / double(G::score_count(LocalPattern::chunked(512), 2048, 64));
  REQUIRE(std::round(ratio * 100) == 319);  // 3.19× fewer scores than vanilla
  REQUIRE(G::score_count(LocalPattern::chunked(8), 512, 64) == 73728u);  // (8×64, 64)
  REQUIRE(G::score_count(LocalPattern::chunked(512), 4096, 64) == 2625536u);
  REQUIRE(G::score_count(LocalPattern::chunked(512), 8192, 64) == 5246976u);
  // L·C + 2LM + M² for C | L; the memory rows' M(L + M) go when they are skipped.
  REQUIRE(G::score_count(LocalPattern::chunked(10), 100, 7) == 100u * 10 + 2 * 100 * 7 + 49);
  REQUIRE(G::score_count(LocalPattern::chunked(10), 100, 7, false) == 100u * 10 + 2 * 100 * 7 + 49 - 7 * 107);
  // Σ_i |B_i| in general: a short last chunk, a clipped window.
  REQUIRE(G::score_count(LocalPattern::chunked(30), 100, 0) == 3u * 900 + 100);
  std::uint64_t band = 0;
  for (Index i = 0; i < 50; ++i) band += std::uint64_t(std::min<Index>(49, i + 3) - std::max<Index>(0, i - 2) + 1);
  REQUIRE(G::score_count(LocalPattern::window(2, 3), 50, 4) == band + 2 * 50 * 4 + 16);
}

TEMPLATE_TEST_CASE("softmax_slots reads one or two slot ranges", "[gmat][readout]", float, double) {
  using T = TestType;
  const Index n = 12;
  const auto logits = ref::random<T>(1, n, 880, 3.0);
  const std::vector<std::uint8_t> written = {1, 1, 0, 1, 1, 1, 1, 0, 1, 1, 1, 1};
  for (bool mask : {false, true})
    for (auto r : {abc::kernel::SlotRange{2, 5}, abc::kernel::SlotRange{2, 5, 8, 12}, abc::kernel::SlotRange{0, 3, 6, 7},
                   abc::kernel::SlotRange{4, 4, 9, 10}, abc::kernel::SlotRange{0, 12, 3, 3}}) {
      abc::Matrix<T> p = logits;
      abc::kernel::softmax_slots(p.data(), n, written.data(), mask, r);
      std::vector<bool> readable;
      for (Index l = 0; l < n; ++l)
        readable.push_back(((l >= r.lo && l < r.hi) || (l >= r.lo2 && l < r.hi2)) && (!mask || written[size_t(l)]));
      // The reference read of one-hot values e_l is the probability vector itself.
      ref::Mat eye = ref::zeros(n, n);
      for (Index l = 0; l < n; ++l) eye[size_t(l)][size_t(l)] = 1;
      ref::require_close(p, {ref::read(std::vector<double>{1.0}, ref::from(abc::Matrix<T>(logits.transpose())), eye,
                                       readable, 1.0)});
    }
}

TEST_CASE("GMAT refuses bad patterns and shapes, naming the argument", "[gmat][errors]") {
  REQUIRE_THROWS_AS(LocalPattern::chunked(0), abc::config_error);
  REQUIRE_THROWS_WITH(LocalPattern::chunked(0), ABC_CONTAINS("abc::LocalPattern::chunked: size is 0, expected at least 1"));
  REQUIRE_THROWS_WITH(LocalPattern::window(-1, 2), ABC_CONTAINS("left is -1, expected at least 0"));
  REQUIRE_THROWS_WITH(LocalPattern::window(1, -2), ABC_CONTAINS("right is -2, expected at least 0"));
  REQUIRE_THROWS_WITH(abc::GlobalMemoryAttention<float>(LocalPattern::full(), -1.0), ABC_CONTAINS("scale"));
  abc::GlobalMemoryAttention<float> g(LocalPattern::chunked(4));
  const abc::Matrix<float> x = abc::Matrix<float>::Ones(8, 3), m = abc::Matrix<float>::Ones(2, 3);
  REQUIRE_THROWS_AS(g.forward(x, x, x, m, abc::Matrix<float>::Ones(2, 4), m), abc::shape_error);
  REQUIRE_THROWS_WITH(g.forward(x, x, x, m, abc::Matrix<float>::Ones(2, 4), m),
                      ABC_CONTAINS("abc::GlobalMemoryAttention: k_m is [2 x 4], expected [2 x 3]"));
  REQUIRE_THROWS_WITH(g.forward(x, x, x, abc::Matrix<float>::Ones(3, 3), m, m), ABC_CONTAINS("q_m is [3 x 3], expected [2 x 3]"));
  REQUIRE_THROWS_WITH(g.forward(abc::Matrix<float>::Ones(7, 3), x, x, m, m, m), ABC_CONTAINS("q_x is [7 x 3], expected [8 x 3]"));
  REQUIRE_THROWS_WITH(g.forward(x, x, x, m, m, abc::Matrix<float>::Ones(2, 5)), ABC_CONTAINS("v_m is [2 x 5], expected [2 x 3]"));
  abc::Matrix<float> bad = x;
  bad(3, 1) = std::numeric_limits<float>::infinity();
  REQUIRE_THROWS_WITH(g.forward(x, bad, x, m, m, m), ABC_CONTAINS("k_x holds a non-finite value at row 3, column 1"));
  const std::string who = "abc::GlobalMemoryAttention: ";
  REQUIRE_THROWS_WITH(g.forward(x, x, abc::Matrix<float>::Ones(7, 3), m, m, m),
                      who + "v_x is [7 x 3], expected [8 x 3] (one value per main token (k_x.rows()))");
  abc::Matrix<float> out_x(8, 2), out_m(2, 3);
  REQUIRE_THROWS_WITH(g.forward_into(x, x, x, m, m, m, out_x, out_m),
                      who + "out_x is [8 x 2], expected [8 x 3] (the output holds one row per main token)");
  // A non-finite entry in each input, named with its place; nothing is written.
  abc::Matrix<float> main_out = abc::Matrix<float>::Zero(8, 3), memory_out = abc::Matrix<float>::Zero(2, 3);
  abc::Matrix<float> bad_m = m;
  bad_m(1, 2) = std::numeric_limits<float>::quiet_NaN();
  const auto refused = [&](const abc::Matrix<float>& q_x, const abc::Matrix<float>& v_x, const abc::Matrix<float>& q_m,
                           const abc::Matrix<float>& k_m, const abc::Matrix<float>& v_m, const std::string& why) {
    INFO(why);
    REQUIRE_THROWS_WITH(g.forward_into(q_x, x, v_x, q_m, k_m, v_m, main_out, memory_out), who + why);
    REQUIRE(main_out.isZero());
    REQUIRE(memory_out.isZero());
  };
  refused(bad, x, m, m, m, "q_x holds a non-finite value at row 3, column 1, expected finite values");
  refused(x, bad, m, m, m, "v_x holds a non-finite value at row 3, column 1, expected finite values");
  refused(x, x, bad_m, m, m, "q_m holds a non-finite value at row 1, column 2, expected finite values");
  refused(x, x, m, bad_m, m, "k_m holds a non-finite value at row 1, column 2, expected finite values");
  refused(x, x, m, m, bad_m, "v_m holds a non-finite value at row 1, column 2, expected finite values");
}

}  // namespace global_memory_attention_test
