// SPDX-License-Identifier: MIT
// abc tests: a dense normalised control written only from docs/design.md §2 (the contract and its
// "normalised dense control" rule for the per-slot state), checked against the float64 definition
// of a normalised memory in every form.
#include <abc/bounded_attention.hpp>

#include <cmath>
#include <limits>

#include "support/approx.hpp"
#include "support/catch.hpp"
#include "support/reference.hpp"
#include "support/schedule_reference.hpp"

namespace user_normalised_test {

namespace {

using abc::Index;

// Slot ℓ holds the softmax-over-time average of the keys with logits λ_tℓ = u_ℓ · x_t: a user's
// control, not a copy of a built-in. It keeps (m, Z) in slot_state rows 0 and 1 as §2.4 says.
template <class T>
struct TimeSoftmax {
  using scalar_type = T;
  abc::Matrix<T> u;  // [n × d_x]

  Index num_slots() const { return u.rows(); }
  Index input_dim() const { return u.cols(); }
  void schedule(Index /*t0*/, abc::MatrixRef<T> x, abc::MatrixOut<T> slot_state, abc::MatrixOut<T> decay,
                abc::MatrixOut<T> write) const {
    for (Index t = 0; t < x.rows(); ++t)
      for (Index l = 0; l < u.rows(); ++l) {
        const T lambda = u.row(l).dot(x.row(t));
        const T m = slot_state(0, l), z = slot_state(1, l);
        const T m_new = std::max(m, lambda);
        const T kept = z * std::exp(m - m_new);
        const T z_new = kept + std::exp(lambda - m_new);
        decay(t, l) = kept / z_new;
        write(t, l) = std::exp(lambda - m_new) / z_new;
        slot_state(0, l) = m_new;
        slot_state(1, l) = z_new;
      }
  }
};

// The definition, in float64: after tokens 0..t, slot ℓ is Σ_i softmax_i(λ_iℓ) k_i (and v_i).
ref::Mat normalised_outputs(const ref::Mat& u, const ref::Mat& q, const ref::Mat& k, const ref::Mat& v, double scale,
                            bool causal) {
  const size_t n = u.size(), n_tok = k.size();
  ref::Mat out;
  for (size_t t = 0; t < q.size(); ++t) {
    const size_t upto = causal ? t : n_tok - 1;
    ref::Mat keys = ref::zeros(Index(n), Index(k[0].size())), values = ref::zeros(Index(n), Index(v[0].size()));
    for (size_t l = 0; l < n; ++l) {
      double mx = -std::numeric_limits<double>::infinity();
      for (size_t i = 0; i <= upto; ++i) mx = std::max(mx, ref::dot(u[l], k[i]));
      double total = 0;
      for (size_t i = 0; i <= upto; ++i) total += std::exp(ref::dot(u[l], k[i]) - mx);
      for (size_t i = 0; i <= upto; ++i) {
        const double p = std::exp(ref::dot(u[l], k[i]) - mx) / total;
        for (size_t c = 0; c < k[i].size(); ++c) keys[l][c] += p * k[i][c];
        for (size_t c = 0; c < v[i].size(); ++c) values[l][c] += p * v[i][c];
      }
    }
    out.push_back(ref::read(q[t], keys, values, std::vector<bool>(n, true), scale));
  }
  return out;
}

}  // namespace

TEMPLATE_TEST_CASE("a dense normalised control written from the contract matches its definition in every form",
                   "[control][contract]", float, double) {
  using T = TestType;
  const Index d = 6, dv = 4, n = 5;
  for (Index n_tok : {Index(1), Index(9), Index(40)}) {
    INFO("N = " << n_tok);
    const auto q = ref::random<T>(n_tok, d, 71), k = ref::random<T>(n_tok, d, 72), v = ref::random<T>(n_tok, dv, 73);
    // Logits up to a few tens: the running maximum must be carried, not just summed.
    const abc::Matrix<T> u = (ref::random<T>(n, d, 74).array() * T(8)).matrix();
    const TimeSoftmax<T> control{u};
    const double scale = 1 / std::sqrt(double(d));
    const auto ru = ref::from(u), rq = ref::from(q), rk = ref::from(k), rv = ref::from(v);
    abc::BoundedAttention attn{control};
    ref::require_close(attn.forward(q, k, v), normalised_outputs(ru, rq, rk, rv, scale, false));
    ref::require_causal_forms(control, q, k, v, normalised_outputs(ru, rq, rk, rv, scale, true));
    // The (m, Z) the state carries is the definition's: z = log Σ_i exp(λ_iℓ).
    auto state = attn.make_state(d, dv);
    attn.forward_causal(state, q, k, v);
    for (Index l = 0; l < n; ++l) {
      double mx = -std::numeric_limits<double>::infinity(), total = 0;
      for (const auto& row : rk) mx = std::max(mx, ref::dot(ru[size_t(l)], row));
      for (const auto& row : rk) total += std::exp(ref::dot(ru[size_t(l)], row) - mx);
      REQUIRE(double(state.log_norm()(l)) == Approx(mx + std::log(total)).epsilon(std::is_same<T, float>::value ? 1e-5 : 1e-12));
    }
  }
}

}  // namespace user_normalised_test
