// SPDX-License-Identifier: MIT
// abc: bounded-memory attention. control::SlidingWindow, the last n tokens in a ring buffer.
#pragma once

#include <string>
#include "../detail/control_check.hpp"
#include "../schedule.hpp"
#include "../types.hpp"

ABC_NAMESPACE_BEGIN
namespace control {

/**
 * \brief The memory holds the last n keys and values (ABC paper §3.3).
 *
 * Schedule: token t overwrites slot t mod n (decay 0 on that slot, write 1), every other slot is
 * kept. This is the paper's upper-shift form `K̃_t = U K̃_{t-1} + e_n ⊗ k_t` up to the order of the
 * slots, which a softmax read ignores; a ring buffer never moves O(n · d) data. With n ≥ N it is
 * causal softmax attention; with n < N, attention over the last n tokens.
 *
 * \code
 * abc::BoundedAttention attn{abc::control::SlidingWindow{32}};
 * \endcode
 */
template <class Scalar = float>
class SlidingWindow {
 public:
  /// float or double.
  using scalar_type = Scalar;
  /// The control's name in state blobs.
  static std::string tag() { return "abc::control::SlidingWindow"; }
  /// One write per token, into slot t mod n.
  static constexpr int max_writes = 1;
  /// No parameters, and piecewise constant in x: no gradient flows through the schedule.
  static constexpr bool constant_schedule = true;
  /// Each slot holds one token as it is (Concat counts such a token once).
  static constexpr bool stores_tokens = true;
  static constexpr bool has_decay_all = false;  ///< only the overwritten slot decays (Concat stays sparse)

  /// \throws config_error if n < 1.
  explicit SlidingWindow(Index n) : n_(n) {
    detail::require_at_least("abc::control::SlidingWindow", "n", n, 1,
                             "the window holds at least one token");
  }

  /// n, the window: the number of newest tokens kept.
  Index num_slots() const noexcept { return n_; }

  /// Token t overwrites slot t mod n (decay 0 there, write 1).
  void schedule(Index t, VectorRef<Scalar> /*x*/, MatrixOut<Scalar> /*slot_state*/,
                SparseWrite<Scalar, 1>& w) const noexcept {
    w.add(t % n_, Scalar(0), Scalar(1));
  }

 private:
  Index n_;
};

}  // namespace control
ABC_NAMESPACE_END
