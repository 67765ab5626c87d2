// SPDX-License-Identifier: MIT
// abc: bounded-memory attention. control::Compressive, mean pooling of blocks of c tokens.
#pragma once

#include <string>
#include "../detail/control_check.hpp"
#include "../schedule.hpp"
#include "../slots.hpp"
#include "../types.hpp"

ABC_NAMESPACE_BEGIN
namespace control {

/**
 * \brief Compressive transformer, mean-pooling variant (ABC paper §A.3, Eq. 8).
 *
 * Schedule: decay 1, write e_{⌊t/c⌋} / c: slot j holds the mean of tokens jc .. jc + c − 1. Eq. 8
 * is taken literally (Table 1's e_{⌊nt/N⌋} is an erratum): while block j is being filled, causal
 * reads see its partial sum / c, not the mean of the tokens so far. The ratio c is fixed so that
 * decoding does not need N; the capacity is n·c tokens (max_tokens()), beyond is a config_error.
 *
 * Constructor order: ratio first, then slots, as in "compress by c into n slots".
 */
template <class Scalar = float>
class Compressive {
 public:
  /// float or double.
  using scalar_type = Scalar;
  /// The control's name in state blobs.
  static std::string tag() { return "abc::control::Compressive"; }
  /// One write per token, into the slot of its block.
  static constexpr int max_writes = 1;
  /// No parameters, and piecewise constant in x: no gradient flows through the schedule.
  static constexpr bool constant_schedule = true;
  /// False: a_t ≡ 1, nothing written decays.
  static constexpr bool has_decay = false;

  /// `slots` slots, each pooling a block of `ratio` tokens. \throws config_error if either is < 1.
  Compressive(Slots n, Index ratio) : c_(ratio), n_(n.value) {
    const Index slots = n_;
    detail::require_at_least("abc::control::Compressive", "ratio", ratio, 1,
                             "a block holds at least one token");
    detail::require_at_least("abc::control::Compressive", "slots", slots, 1, "at least one slot");
    detail::require_product("abc::control::Compressive", "ratio × slots (the capacity in tokens)", ratio, slots);
  }

  /// n, the number of slots (blocks).
  Index num_slots() const noexcept { return n_; }
  /// c, the number of tokens pooled into each slot.
  Index ratio() const noexcept { return c_; }
  /// The capacity n·c in tokens; BoundedAttention refuses longer sequences with config_error.
  Index max_tokens() const noexcept { return n_ * c_; }

  /// Token t adds 1/c of itself to slot ⌊t/c⌋ (decay 1).
  void schedule(Index t, VectorRef<Scalar> /*x*/, MatrixOut<Scalar> /*slot_state*/,
                SparseWrite<Scalar, 1>& w) const noexcept {
    w.add(t / c_, Scalar(1), Scalar(1) / Scalar(c_));
  }

 private:
  Index c_, n_;
};

}  // namespace control
ABC_NAMESPACE_END
