// SPDX-License-Identifier: MIT
// abc: bounded-memory attention. control::Identity, one slot per token: exact softmax attention.
#pragma once

#include <string>
#include "../detail/control_check.hpp"
#include "../schedule.hpp"
#include "../types.hpp"

ABC_NAMESPACE_BEGIN
namespace control {

/**
 * \brief Token t is written into slot t (φ_t = e_t, n = N): the reference control.
 *
 * With empty slots masked this is exactly softmax attention, causal and not (ABC paper footnote 2).
 * Its memory grows with the sequence, so it is bounded only by its capacity n: it exists to prove
 * the core against plain attention, not to be used for long sequences.
 */
template <class Scalar = float>
class Identity {
 public:
  /// float or double.
  using scalar_type = Scalar;
  /// The control's name in state blobs.
  static std::string tag() { return "abc::control::Identity"; }
  /// One write per token, into slot t.
  static constexpr int max_writes = 1;
  /// No parameters, and piecewise constant in x: no gradient flows through the schedule.
  static constexpr bool constant_schedule = true;
  /// Each slot holds one token as it is (Concat counts such a token once).
  static constexpr bool stores_tokens = true;
  /// False: a_t ≡ 1, nothing written decays.
  static constexpr bool has_decay = false;

  /// Capacity n tokens. \throws config_error if n < 1.
  explicit Identity(Index n) : n_(n) {
    detail::require_at_least("abc::control::Identity", "n", n, 1, "at least one slot");
  }

  /// n, the capacity in tokens.
  Index num_slots() const noexcept { return n_; }
  /// n: token t needs slot t, so BoundedAttention refuses longer sequences with config_error.
  Index max_tokens() const noexcept { return n_; }

  /// Token t writes slot t (weight 1, decay 1).
  void schedule(Index t, VectorRef<Scalar> /*x*/, MatrixOut<Scalar> /*slot_state*/,
                SparseWrite<Scalar, 1>& w) const noexcept {
    w.add(t, Scalar(1), Scalar(1));
  }

 private:
  Index n_;
};

}  // namespace control
ABC_NAMESPACE_END
