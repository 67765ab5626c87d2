// SPDX-License-Identifier: MIT
// abc: bounded-memory attention. detail::StateAccess, the one door to a State's members.
#pragma once

#include <cstdint>
#include <type_traits>
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
  // A native state's memory, read in place (a bfloat16 state's is read through keys() and values()).
  template <class T>
  static const ColMatrix<T>& keys(const State<T>& s) noexcept { return s.keys_; }
  template <class T>
  static const Matrix<T>& values(const State<T>& s) noexcept { return s.values_; }
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
  static State<T> empty(Index n, Index d, Index dv, const ControlKind* kind,
                        StateStorage storage = StateStorage::native) {
    return State<T>(n, d, dv, kind, storage);
  }

  // A bfloat16 state's memory: K̃ column-major at packed_keys, Ṽ row-major at packed_values.
  template <class T>
  static kernel::bf16* packed_keys(State<T>& s) noexcept { return s.packed_.data(); }
  template <class T>
  static kernel::bf16* packed_values(State<T>& s) noexcept {
    return s.packed_.data() + s.num_slots() * s.key_dim();
  }
  // Whether the memory is in keys_ and values_ now: a native state always, a bfloat16 one while
  // unpacked (what the kernels that work in T assert).
  template <class T>
  static bool unpacked(const State<T>& s) noexcept { return s.keys_.rows() == s.num_slots(); }

  // A bfloat16 state's memory widened into keys_ and values_ (exact), and rounded back into packed_
  // (nearest even, saturating; kernel::to_bf16) with keys_ and values_ freed again.
  template <class T>
  static void unpack(State<T>& s) {
    ColMatrix<T> k(s.num_slots(), s.key_dim());  // both allocated before the state changes
    Matrix<T> v(s.num_slots(), s.value_dim());
    if constexpr (std::is_same<T, float>::value) {
      kernel::decode_bf16(packed_keys(s), k.data(), k.size());
      kernel::decode_bf16(packed_values(s), v.data(), v.size());
    }
    s.keys_.swap(k);
    s.values_.swap(v);
  }
  template <class T>
  static void repack(State<T>& s) noexcept {
    if constexpr (std::is_same<T, float>::value) {
      kernel::encode_bf16(s.keys_.data(), packed_keys(s), s.keys_.size());
      kernel::encode_bf16(s.values_.data(), packed_values(s), s.values_.size());
    }
    s.keys_.resize(0, s.key_dim());
    s.values_.resize(0, s.value_dim());
  }
  // A native state of the same value (itself when it is native): the kernels that take a const
  // State read its members in T.
  template <class T>
  static State<T> as_native(const State<T>& s) {
    State<T> out = s;
    if (s.storage_ == StateStorage::native) return out;
    out.keys_ = s.keys();
    out.values_ = s.values();
    out.packed_.clear();
    out.packed_.shrink_to_fit();
    out.storage_ = StateStorage::native;
    return out;
  }
  // A native state's memory rounded to `storage` (nothing to do for native).
  template <class T>
  static void convert(State<T>& s, StateStorage storage) {
    ABC_ASSERT(s.storage_ == StateStorage::native, "only a native state is converted (load_state's)");
    if (storage == StateStorage::native) return;
    s.packed_.assign(static_cast<std::size_t>(s.num_slots() * (s.key_dim() + s.value_dim())), kernel::bf16{0});
    s.storage_ = storage;
    repack(s);
  }
};

// For the length of one call, a bfloat16 state's memory in T, so that every kernel runs on it
// unchanged; rounded back to bfloat16 when the call ends (on any exit). A native state passes
// through. One call of N tokens therefore rounds once, where N steps round N times.
template <class T>
class UnpackedMemory {
 public:
  explicit UnpackedMemory(State<T>& s) : s_(s.storage() == StateStorage::bfloat16 ? &s : nullptr) {
    if (s_ != nullptr) StateAccess::unpack(*s_);
  }
  ~UnpackedMemory() {
    if (s_ != nullptr) StateAccess::repack(*s_);
  }
  UnpackedMemory(const UnpackedMemory&) = delete;
  UnpackedMemory& operator=(const UnpackedMemory&) = delete;

 private:
  State<T>* s_;
};

}  // namespace detail
ABC_NAMESPACE_END
