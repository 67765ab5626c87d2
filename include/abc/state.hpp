// SPDX-License-Identifier: MIT
// abc: bounded-memory attention. abc::State, the O(n·d) decode state of one sequence and head.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

#include "detail/control_kind.hpp"
#include "kernel/bf16.hpp"
#include "schedule.hpp"
#include "types.hpp"

ABC_NAMESPACE_BEGIN

namespace detail {
struct StateAccess;  // the engines, the checks and serialisation reach the members through it
}  // namespace detail

/// How a State holds its memory K̃ and Ṽ between calls (BoundedAttention::make_state's choice).
enum class StateStorage {
  native,   ///< in the state's scalar type T
  bfloat16  ///< float states only: rounded to bfloat16 when each call ends (half the bytes; docs/design.md §6)
};

/**
 * \brief The bounded memory of one sequence: K̃ [n × d], Ṽ [n × dv], the control's per-slot state,
 * the slots written so far, and the number of tokens consumed.
 *
 * Size is O(n·(d + dv)) whatever the sequence length. The per-slot state, `slot_state()` [2 × n], is
 * what a control carries from token to token besides the memory itself, so that a copied State forks
 * a sequence and a split sequence equals an unsplit one. What each control keeps there:
 * - normalised controls (ABC-MLP, and a running mean of one's own): the normaliser. Slot ℓ of K̃ holds
 *   Σ_i exp(λ_iℓ − z_ℓ) k_i with z_ℓ = log Σ_i exp(λ_iℓ), carried split in two, row 0 the running
 *   maximum m of the log-weights and row 1 the sum Z = Σ_i exp(λ_iℓ − m) ∈ [1, t], because a single
 *   z = m + log Z would lose log Z to rounding once |m| is large (float's spacing at 1e4 is 1e-3);
 * - Cluster: (0, the slot's token count); TopKEviction: (the kept token's score, 0); the
 *   random-feature readout: (−∞, z_ℓ), z the decayed sum of the written features φ(k);
 * - every other control: nothing, left at (−∞, 0) as make_state made it.
 *
 * A control may also keep an integer per slot, `slot_position(l)` (TopKEviction: the token the slot
 * holds; −1 elsewhere), exact at any stream length.
 *
 * The memory is held in T, or (float states made with StateStorage::bfloat16) in bfloat16 between
 * calls: see StateStorage and storage(); keys() and values() return it widened to T either way.
 *
 * A State belongs to the control type that made it (BoundedAttention::make_state or load_state):
 * a call with another control type refuses it, whatever the shapes. A State is a plain value:
 * copy it to fork a sequence.
 *
 * \tparam T float or double.
 */
template <class T>
class State {
 public:
  /// float or double.
  using scalar_type = T;

  /// No memory: make one with BoundedAttention::make_state (or fill this one with load_state).
  State() = default;

  /// n, the number of slots (0 for a default-constructed State).
  Index num_slots() const noexcept { return slot_state_.cols(); }
  /// d, the width of K̃; 0 for a linear readout, which keeps no K̃.
  Index key_dim() const noexcept { return keys_.cols(); }
  /// dv, the width of Ṽ.
  Index value_dim() const noexcept { return values_.cols(); }
  /// Tokens consumed since construction or the last reset().
  Index position() const noexcept { return position_; }

  /// How the memory is held: in T, or in bfloat16 (see StateStorage).
  StateStorage storage() const noexcept { return storage_; }

  /// K̃, [n × d], a copy in T (column-major, the state's layout: a decode step's scores are a sum of
  /// its columns). Exact for either storage: every bfloat16 is a float.
  ColMatrix<T> keys() const {
    if (storage_ == StateStorage::native) return keys_;
    ColMatrix<T> k(num_slots(), key_dim());
    decode(packed_.data(), k.data(), k.size());
    return k;
  }
  /// Ṽ, [n × dv], a copy in T.
  Matrix<T> values() const {
    if (storage_ == StateStorage::native) return values_;
    Matrix<T> v(num_slots(), value_dim());
    decode(packed_.data() + num_slots() * key_dim(), v.data(), v.size());
    return v;
  }
  /// The control's per-slot state, [2 × n] (see above); for a normalised control row 0 is the running
  /// max m and row 1 the sum Z relative to it.
  const Matrix<T>& slot_state() const noexcept { return slot_state_; }
  /// z = m + log Z per slot, [n]; −∞ where a slot has no mass (for inspection; not used by kernels).
  Vector<T> log_norm() const {
    Vector<T> z(slot_state_.cols());
    for (Index l = 0; l < z.size(); ++l)
      z(l) = slot_state_(1, l) > T(0) ? slot_state_(0, l) + std::log(slot_state_(1, l)) : -std::numeric_limits<T>::infinity();
    return z;
  }
  /// The integer a control keeps for slot `slot` (TopKEviction: its token's position); −1 if none.
  Index slot_position(Index slot) const noexcept { return positions_(slot); }
  /// Whether slot `slot` has received a non-zero write.
  bool written(Index slot) const noexcept { return written_[static_cast<std::size_t>(slot)] != 0; }
  /// Number of slots written so far.
  Index num_written() const noexcept {
    Index c = 0;
    for (auto w : written_) c += w;
    return c;
  }

  /// Bytes of memory the state holds (matrices, per-slot state, flags): O(n·(d + dv)), flat in N.
  std::size_t bytes() const noexcept {
    return sizeof(T) * static_cast<std::size_t>(keys_.size() + values_.size() + slot_state_.size() +
                                                scratch_.size()) +
           sizeof(kernel::bf16) * packed_.size() + sizeof(Index) * static_cast<std::size_t>(positions_.size()) +
           written_.size() + sizeof(*this);
  }

  /// Back to the empty memory at position 0, keeping the shapes.
  void reset() noexcept {
    keys_.setZero();
    values_.setZero();
    std::fill(packed_.begin(), packed_.end(), kernel::bf16{0});
    slot_state_.row(0).setConstant(-std::numeric_limits<T>::infinity());
    slot_state_.row(1).setZero();
    positions_.setConstant(-1);
    std::fill(written_.begin(), written_.end(), std::uint8_t{0});
    position_ = 0;
  }

  /// Equal values: the same shapes, storage, position, K̃, Ṽ, per-slot state, written slots, slot
  /// positions and control type, compared exactly (the step work space is ignored).
  friend bool operator==(const State& a, const State& b) noexcept {
    return a.position_ == b.position_ && a.storage_ == b.storage_ && a.num_slots() == b.num_slots() &&
           a.keys_.rows() == b.keys_.rows() && a.keys_.cols() == b.keys_.cols() &&
           a.values_.cols() == b.values_.cols() && a.keys_ == b.keys_ && a.values_ == b.values_ &&
           a.packed_ == b.packed_ && a.written_ == b.written_ &&
           a.slot_state_ == b.slot_state_ && a.positions_ == b.positions_ && a.kind_ == b.kind_;
  }
  /// Not equal in the sense of operator==.
  friend bool operator!=(const State& a, const State& b) noexcept { return !(a == b); }

 private:
  friend struct detail::StateAccess;

  // Empty memory of n slots for keys of width d and values of width dv, of the control `kind`. A
  // bfloat16 state keeps its memory in packed_ (K̃ column-major, then Ṽ row-major) and keys_ and
  // values_ empty but for their widths, except during a call (detail::UnpackedMemory).
  State(Index n, Index d, Index dv, const detail::ControlKind* kind, StateStorage storage = StateStorage::native)
      : keys_(ColMatrix<T>::Zero(storage == StateStorage::native ? n : 0, d)),
        values_(Matrix<T>::Zero(storage == StateStorage::native ? n : 0, dv)),
        packed_(storage == StateStorage::native ? 0 : static_cast<std::size_t>(n * (d + dv)), kernel::bf16{0}),
        storage_(storage),
        slot_state_(empty_slot_state(n)),
        positions_(PositionsRow::Constant(n, -1)),
        written_(static_cast<std::size_t>(n), 0),
        kind_(kind) {}

  // Only float states are ever held in bfloat16 (make_state refuses the rest).
  static void decode(const kernel::bf16* h, T* out, Index size) noexcept {
    if constexpr (std::is_same<T, float>::value) kernel::decode_bf16(h, out, size);
  }

  ColMatrix<T> keys_;
  Matrix<T> values_;
  std::vector<kernel::bf16> packed_;
  StateStorage storage_ = StateStorage::native;
  static Matrix<T> empty_slot_state(Index n) {
    Matrix<T> z(2, n);
    z.row(0).setConstant(-std::numeric_limits<T>::infinity());
    z.row(1).setZero();
    return z;
  }

  Matrix<T> slot_state_;
  PositionsRow positions_;
  std::vector<std::uint8_t> written_;
  Index position_ = 0;
  const detail::ControlKind* kind_ = nullptr;
  // Per-token work space of step (scores, decays, writes: [3 × n]), kept here so a step allocates
  // nothing. Not part of the state's value: ignored by ==.
  Matrix<T> scratch_;
};

ABC_NAMESPACE_END
