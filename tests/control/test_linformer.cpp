// SPDX-License-Identifier: MIT
// abc tests: control::Linformer (ABC paper §3.1) against the float64 recurrence with w_t = W_LF[:, t], a_t = 1;
// its memory is W_LF K (oracle 1); its capacity N_max.
#include <abc/bounded_attention.hpp>
#include <abc/control/linformer.hpp>

#include "support/approx.hpp"
#include "support/catch.hpp"
#include "support/reference.hpp"
#include "support/schedule_reference.hpp"

namespace linformer_test {

namespace {

using abc::Index;
const Index kSizes[] = {1, 7, 63, 65, 100};

ref::ScheduleFn linformer_schedule(const ref::Mat& w) {
  return [w](size_t t) {
    ref::Step s{std::vector<double>(w.size(), 1.0), std::vector<double>(w.size())};
    for (size_t l = 0; l < w.size(); ++l) s.w[l] = w[l][t];
    return s;
  };
}

}  // namespace

TEMPLATE_TEST_CASE("Linformer matches the float64 reference in every form", "[control][linformer]", float, double) {
  using T = TestType;
  const Index d = 8, dv = 5, n = 6;
  for (Index n_tok : kSizes) {
    const std::uint64_t seed = std::uint64_t(n_tok);
    auto q = ref::random<T>(n_tok, d, seed + 1), k = ref::random<T>(n_tok, d, seed + 2);
    auto v = ref::random<T>(n_tok, dv, seed + 3), qx = ref::random<T>(n_tok + 4, d, seed + 4);
    abc::control::Linformer<T> control(abc::Slots{n}, n_tok + 3, abc::Seed{11});  // N_max above N: unused columns do not matter
    const auto sched = linformer_schedule(ref::from(control.weights()));
    const double scale = 1 / std::sqrt(double(d));
    const auto rq = ref::from(q), rk = ref::from(k), rv = ref::from(v);
    INFO("N = " << n_tok);
    abc::BoundedAttention attn{control};
    ref::require_close(attn.forward(q, k, v), ref::recurrence_noncausal(sched, size_t(n), rq, rk, rv, scale));
    ref::require_close(attn.forward(qx, k, v), ref::recurrence_noncausal(sched, size_t(n), ref::from(qx), rk, rv, scale));
    ref::require_causal_forms(control, q, k, v, ref::recurrence_causal(sched, size_t(n), rq, rk, rv, scale));
  }
}

TEMPLATE_TEST_CASE("Linformer memory is W_LF K and W_LF V (oracle 1)", "[control][linformer][identity]", float, double) {
  using T = TestType;
  const Index d = 4, dv = 3, n = 5, n_tok = 30;
  auto q = ref::random<T>(n_tok, d, 21), k = ref::random<T>(n_tok, d, 22), v = ref::random<T>(n_tok, dv, 23);
  abc::Matrix<T> w = ref::random<T>(n, n_tok, 24);
  abc::BoundedAttention attn{abc::control::Linformer<T>(w)};
  auto state = attn.make_state(d, dv);
  attn.forward_causal(state, q, k, v);
  // Φ[i][ℓ] = W_LF[ℓ][i]: Σ_i φ_i ⊗ k_i with plain loops.
  ref::Mat phi(static_cast<size_t>(n_tok), std::vector<double>(size_t(n)));
  for (Index i = 0; i < n_tok; ++i)
    for (Index l = 0; l < n; ++l) phi[size_t(i)][size_t(l)] = double(w(l, i));
  ref::require_close(state.keys(), ref::memory(phi, ref::from(k), size_t(n_tok)));
  ref::require_close(state.values(), ref::memory(phi, ref::from(v), size_t(n_tok)));
}

TEST_CASE("Linformer's seeded weights are reproducible and N(0, 1/N_max)", "[control][linformer]") {
  abc::control::Linformer<double> a(abc::Slots{8}, 512, abc::Seed{3}), b(abc::Slots{8}, 512, abc::Seed{3}),
      c(abc::Slots{8}, 512, abc::Seed{4});
  REQUIRE(a.weights() == b.weights());
  REQUIRE(a.weights() != c.weights());
  REQUIRE(a.num_slots() == 8);
  REQUIRE(a.max_tokens() == 512);
  const double var = a.weights().squaredNorm() / double(a.weights().size());
  REQUIRE(var == Approx(1.0 / 512).epsilon(0.1));  // 4096 draws: ±2.2 % standard error
  abc::control::Linformer f(abc::Slots{4}, 16, abc::Seed{1});  // CTAD: float
  static_assert(std::is_same<decltype(f)::scalar_type, float>::value, "float by default");
}

TEMPLATE_TEST_CASE("Linformer refuses more than N_max tokens", "[control][linformer][errors]", float, double) {
  using T = TestType;
  abc::BoundedAttention attn{abc::control::Linformer<T>(abc::Slots{3}, 10, abc::Seed{1})};
  auto q = ref::random<T>(11, 4, 1), k = ref::random<T>(11, 4, 2), v = ref::random<T>(11, 2, 3);
  REQUIRE_THROWS_AS(attn.forward(q, k, v), abc::config_error);
  REQUIRE_THROWS_WITH(attn.forward(q, k, v), ABC_CONTAINS("is 11, expected at most 10 (the control's capacity, max_tokens())"));
  REQUIRE_THROWS_WITH(attn.forward_causal(q, k, v), ABC_CONTAINS("forward_causal: the token count"));
  REQUIRE(attn.validate(q, k, v) == abc::Status::bad_config);
  // Continuing a state: 8 tokens fit, then 3 more do not, and the state is left as it was.
  auto state = attn.make_state(4, 2);
  attn.forward_causal(state, q.topRows(8), k.topRows(8), v.topRows(8));
  const auto before = state;
  REQUIRE_THROWS_WITH(attn.forward_causal(state, q.bottomRows(3), k.bottomRows(3), v.bottomRows(3)),
                      ABC_CONTAINS("is 11, expected at most 10"));
  REQUIRE(state == before);
  attn.step(state, q.row(8).transpose(), k.row(8).transpose(), v.row(8).transpose());
  attn.step(state, q.row(9).transpose(), k.row(9).transpose(), v.row(9).transpose());
  REQUIRE_THROWS_AS(attn.step(state, q.row(10).transpose(), k.row(10).transpose(), v.row(10).transpose()),
                    abc::config_error);
  REQUIRE_THROWS_WITH(attn.step(state, q.row(10).transpose(), k.row(10).transpose(), v.row(10).transpose()),
                      ABC_CONTAINS("abc::BoundedAttention::step: the token count (state position + new tokens) is 11, "
                                   "expected at most 10"));
  REQUIRE_THROWS_WITH(abc::control::Linformer<T>(abc::Matrix<T>(0, 5)), ABC_CONTAINS("W_LF.rows() (slots) is 0"));
  REQUIRE_THROWS_WITH(abc::control::Linformer<T>(abc::Slots{3}, 0, abc::Seed{1}), ABC_CONTAINS("n_max is 0, expected at least 1"));
}

}  // namespace linformer_test
