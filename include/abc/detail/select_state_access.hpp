// SPDX-License-Identifier: MIT
// abc: bounded-memory attention. Serialisation's doors to the selection caches (TRAMS pools, KV caches).
#pragma once

#include <cstdint>
#include <string>

#include "../select/kv_cache_attention.hpp"
#include "../select/trams_attention.hpp"
#include "blob.hpp"
#include "check.hpp"

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

// A cache is written and read back oldest token first, each with its score and position: that is
// its whole value (the rows after size() are work space).
struct KvCacheStateAccess {
  template <class Policy>
  static typename select::KvCacheAttention<Policy>::State empty(Index budget, Index d, Index dv) {
    return typename select::KvCacheAttention<Policy>::State(budget, d, dv);
  }
  // Appends a kept token as the cache's newest. Unchecked: the cache holds fewer than its budget.
  template <class Policy, class T>
  static void append(typename select::KvCacheAttention<Policy>::State& s, const T* k, const T* v, double score,
                     std::int64_t position) {
    const Index r = s.size_++;
    s.keys_.row(r) = Eigen::Map<const Eigen::Matrix<T, 1, Eigen::Dynamic>>(k, s.keys_.cols());
    s.values_.row(r) = Eigen::Map<const Eigen::Matrix<T, 1, Eigen::Dynamic>>(v, s.values_.cols());
    s.score_[std::size_t(r)] = score;
    s.pos_[std::size_t(r)] = position;
  }
  template <class Policy>
  static void set_position(typename select::KvCacheAttention<Policy>::State& s, std::int64_t position) {
    s.next_ = position;
  }
};

// What a selection cache's blob says about its size, read from its header.
struct SelectBlobShape {
  std::uint64_t d, dv, tokens, position;
};

// The checks the selection blobs share, after their own header fields: widths in [1, max_width]
// (a loaded cache allocates `rows` rows of that width before any token is read, so the blob's
// length does not bound them) and the destination's unless it is default-constructed (dst_d = 0);
// at most `capacity` tokens (`capacity_rule` names it); tokens ≤ position < 2^62; rows × (d + dv)
// an Index; and exactly `token_bytes(d, dv)` per token and the checksum after `at`.
template <class TokenBytes>
void check_select_blob(const char* who, const SelectBlobShape& b, Index dst_d, Index dst_dv, std::uint64_t capacity,
                       const char* capacity_rule, std::uint64_t rows, std::uint64_t max_width,
                       const TokenBytes& token_bytes, std::size_t at, std::size_t size) {
  const auto str = [](auto x) { return std::to_string(x); };
  const std::string widths = "widths are d = " + str(b.d) + ", dv = " + str(b.dv);
  if (b.d < 1 || b.dv < 1 || b.d > max_width || b.dv > max_width)
    blob_error(who, widths + ", expected each in [1, " + str(max_width) + "] (a loaded cache holds " + str(rows) +
                        " rows of that width)");
  if (dst_d > 0 && (b.d != std::uint64_t(dst_d) || b.dv != std::uint64_t(dst_dv)))
    blob_error(who, widths + ", expected d = " + str(dst_d) + ", dv = " + str(dst_dv) + " (the destination's)");
  if (b.tokens > capacity)
    blob_error(who, "size is " + str(b.tokens) + ", expected at most " + str(capacity) + " (" + capacity_rule + ")");
  if (b.position >= (std::uint64_t(1) << 62) || b.position < b.tokens)
    blob_error(who, "position is " + str(b.position) + ", expected in [" + str(b.tokens) +
                        ", 2^62) (at least the tokens held)");
  Index cells = 0;
  if (!checked_mul(Index(rows), Index(b.d + b.dv), cells))
    blob_error(who, str(rows) + " rows × (d + dv) overflows (" + str(rows) + " × " + str(b.d + b.dv) + ")");
  const std::uint64_t payload = b.tokens * token_bytes(b.d, b.dv) + 8;  // tokens ≤ capacity: no overflow
  if (size - at != payload) blob_error(who, "length is " + str(size) + " bytes, expected " + str(at + payload));
}

}  // namespace detail
ABC_NAMESPACE_END
