// SPDX-License-Identifier: MIT
// abc: bounded-memory attention. control::Dilated, r interleaved ring buffers (dilated window).
#pragma once

#include <string>
#include <utility>

#include "../detail/control_check.hpp"
#include "../schedule.hpp"
#include "../slots.hpp"
#include "../types.hpp"

ABC_NAMESPACE_BEGIN
namespace control {

/**
 * \brief A sliding window with dilation r (ABC paper §A.4, Eq. 9), as r ring buffers.
 *
 * Buffer b holds the tokens with t mod r = b, n slots each (num_slots() = n·r). Token t overwrites
 * slot b·n + (t / r) mod n of buffer b = t mod r (decay 0 there, write 1), and query t reads only
 * buffer t mod r (read_range), so it sees t, t − r, …, t − (n − 1)·r: the paper's two queues for
 * r = 2, generalised. Non-causally query i reads buffer i mod r of the final memory, i.e. the last
 * n tokens of its residue class in the whole sequence.
 */
template <class Scalar = float>
class Dilated {
 public:
  /// float or double.
  using scalar_type = Scalar;
  /// The control's name in state blobs.
  static std::string tag() { return "abc::control::Dilated"; }
  /// One write per token, into the next slot of its buffer's ring.
  static constexpr int max_writes = 1;
  /// No parameters, and piecewise constant in x: no gradient flows through the schedule.
  static constexpr bool constant_schedule = true;
  static constexpr bool has_decay_all = false;  ///< only the overwritten slot decays

  /// n slots per buffer (the window each query reads), dilation r: n·r slots in all.
  /// \throws config_error if either is < 1.
  Dilated(Slots window, Index r) : n_(window.value), r_(r) {
    const Index n = n_;
    detail::require_at_least("abc::control::Dilated", "n", n, 1, "a buffer holds at least one token");
    detail::require_at_least("abc::control::Dilated", "r", r, 1, "the dilation is at least 1");
    detail::require_product("abc::control::Dilated", "n × r (the slot count)", n, r);
  }

  /// n·r: r buffers of n slots.
  Index num_slots() const noexcept { return n_ * r_; }
  /// n, the slots of each buffer: the most tokens one query reads.
  Index buffer_size() const noexcept { return n_; }
  /// r, the dilation: the number of buffers.
  Index dilation() const noexcept { return r_; }

  /// Slots [b·n, (b + 1)·n) of buffer b = t mod r, the only ones query t reads.
  std::pair<Index, Index> read_range(Index t) const noexcept {
    const Index b = t % r_;
    return {b * n_, (b + 1) * n_};
  }

  /// Token t overwrites slot (t mod r)·n + ⌊t/r⌋ mod n (decay 0 there, write 1).
  void schedule(Index t, VectorRef<Scalar> /*x*/, MatrixOut<Scalar> /*slot_state*/,
                SparseWrite<Scalar, 1>& w) const noexcept {
    w.add((t % r_) * n_ + (t / r_) % n_, Scalar(0), Scalar(1));
  }

 private:
  Index n_, r_;
};

}  // namespace control
ABC_NAMESPACE_END
