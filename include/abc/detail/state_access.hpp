// SPDX-License-Identifier: MIT
// abc: bounded-memory attention. detail::StateAccess, the one door to a State's members.
#pragma once

#include <cstdint>
#include <vector>

#include "../state.hpp"
#include "../types.hpp"
#include "control_kind.hpp"

ABC_NAMESPACE_BEGIN
namespace detail {

// The engines (abc/kernel/), the operators' checks and serialisation (abc/state_io.hpp) read and
// write a State's members through here, so State has one friend instead of one per user.
struct StateAccess {
  template <class T>
  static ColMatrix<T>& keys(State<T>& s) noexcept { return s.keys_; }
  template <class T>
  static Matrix<T>& values(State<T>& s) noexcept { return s.values_; }
  template <class T>
  static Matrix<T>& slot_state(State<T>& s) noexcept { return s.slot_state_; }
  template <class T>
  static const Matrix<T>& slot_state(const State<T>& s) noexcept { return s.slot_state_; }
  template <class T>
  static PositionsRow& positions(State<T>& s) noexcept { return s.positions_; }
  template <class T>
  static const PositionsRow& positions(const State<T>& s) noexcept { return s.positions_; }
  template <class T>
  static std::vector<std::uint8_t>& written(State<T>& s) noexcept { return s.written_; }
  template <class T>
  static const std::vector<std::uint8_t>& written(const State<T>& s) noexcept { return s.written_; }
  template <class T>
  static Index& position(State<T>& s) noexcept { return s.position_; }
  template <class T>
  static Matrix<T>& scratch(State<T>& s) noexcept { return s.scratch_; }
  // Room in the scratch rows of an n-slot state for a step read by `heads` heads: the decays, the
  // writes and one score row per head (make_state makes room for one, so one head allocates nothing).
  template <class T>
  static void reserve_scratch(State<T>& s, Index heads, Index n) {
    if (s.scratch_.rows() < 2 + heads || s.scratch_.cols() != n) s.scratch_.resize(2 + heads, n);
  }
  template <class T>
  static const ControlKind* kind(const State<T>& s) noexcept { return s.kind_; }
  template <class T>
  static State<T> empty(Index n, Index d, Index dv, const ControlKind* kind) { return State<T>(n, d, dv, kind); }
};

}  // namespace detail
ABC_NAMESPACE_END
