// SPDX-License-Identifier: MIT
// abc: bounded-memory attention. detail::TramsStateAccess, serialisation's door to a TRAMS pool.
#pragma once

#include <cstdint>

#include "../select/trams_attention.hpp"

ABC_NAMESPACE_BEGIN
namespace detail {

// A pool is written oldest token first and read back as a ring starting at slot 0, so a loaded
// pool reads, selects and evicts as the saved one would (the ring's rotation is not part of its
// value). Token positions are not stored: the pool holds the last size() tokens of the stream, so
// the token of age a sits at position() − size() + a.
struct TramsStateAccess {
  template <class T>
  static typename select::TramsAttention<T>::State empty(Index pool, Index d, Index dv) {
    return typename select::TramsAttention<T>::State(pool, d, dv);
  }
  // Appends a token as the pool's newest; `position` is its stream position.
  template <class T>
  static void append(typename select::TramsAttention<T>::State& s, const T* k, const T* v, T score,
                     std::int64_t position) {
    s.next_ = position;
    s.push(k, v, score);
  }
  // Sets the stream position after the last appended token.
  template <class T>
  static void set_position(typename select::TramsAttention<T>::State& s, std::int64_t position) {
    s.next_ = position;
  }
};

}  // namespace detail
ABC_NAMESPACE_END
