// SPDX-License-Identifier: MIT
// abc: bounded-memory attention. control::Identity, one slot per token: exact softmax attention.
#pragma once

#include <string>
#include "../detail/control_check.hpp"
#include "../schedule.hpp"
#include "../types.hpp"

namespace abc {
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
  using scalar_type = Scalar;
  /// The control's name in state blobs.
  static std::string tag() { return "abc::control::Identity"; }
  static constexpr int max_writes = 1;
  static constexpr bool has_decay = false;

  /// Capacity n tokens. \throws config_error if n < 1.
  explicit Identity(Index n) : n_(n) {
    detail::require_at_least("abc::control::Identity", "n", n, 1, "at least one slot");
  }

  Index num_slots() const noexcept { return n_; }
  Index max_tokens() const noexcept { return n_; }

  void schedule(Index t, VectorRef<Scalar> /*x*/, MatrixOut<Scalar> /*norm*/,
                SparseWrite<Scalar, 1>& w) const noexcept {
    w.add(t, Scalar(1), Scalar(1));
  }

 private:
  Index n_;
};

}  // namespace control
}  // namespace abc
