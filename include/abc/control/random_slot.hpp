// SPDX-License-Identifier: MIT
// abc: bounded-memory attention. control::RandomSlot (ABC_RD), each token into a random slot.
#pragma once

#include <cstdint>
#include <string>

#include "../detail/control_check.hpp"
#include "../detail/random.hpp"
#include "../schedule.hpp"
#include "../seed.hpp"
#include "../slots.hpp"
#include "../types.hpp"

ABC_NAMESPACE_BEGIN
namespace control {

/**
 * \brief ABC_RD (ABC paper §A.2): token t is added to slot i_t = hash(seed, t) mod n.
 *
 * Schedule: decay 1, write e_{i_t}. Every token is kept, squashed with the others of its slot. The
 * slot is a counter-based hash of the absolute position t, never a draw from a stream, so the
 * parallel, recurrent and split-and-continue forms see the same slots; the same seed gives the
 * same slots on every platform.
 */
template <class Scalar = float>
class RandomSlot {
 public:
  /// float or double.
  using scalar_type = Scalar;
  /// The control's name in state blobs.
  static std::string tag() { return "abc::control::RandomSlot"; }
  /// One write per token, into slot(t).
  static constexpr int max_writes = 1;
  /// No parameters, and piecewise constant in x: no gradient flows through the schedule.
  static constexpr bool constant_schedule = true;
  /// False: a_t ≡ 1, nothing written decays.
  static constexpr bool has_decay = false;

  /// n slots, slots drawn from `seed`. \throws config_error if n < 1.
  RandomSlot(Slots n, Seed seed) : n_(n.value), seed_(seed.value) {
    detail::require_at_least("abc::control::RandomSlot", "n", n_, 1, "at least one slot");
  }

  /// n, the number of slots.
  Index num_slots() const noexcept { return n_; }
  /// The seed of the slot hash.
  std::uint64_t seed() const noexcept { return seed_; }

  /// The slot token t is written to.
  Index slot(Index t) const noexcept {
    return static_cast<Index>(detail::hash(seed_, static_cast<std::uint64_t>(t)) %
                              static_cast<std::uint64_t>(n_));
  }

  /// Token t is added to slot(t) (weight 1, decay 1).
  void schedule(Index t, VectorRef<Scalar> /*x*/, MatrixOut<Scalar> /*slot_state*/,
                SparseWrite<Scalar, 1>& w) const noexcept {
    w.add(slot(t), Scalar(1), Scalar(1));
  }

 private:
  Index n_;
  std::uint64_t seed_;
};

}  // namespace control
ABC_NAMESPACE_END
