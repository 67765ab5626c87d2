// SPDX-License-Identifier: MIT
// abc: bounded-memory attention. abc::HeadTensor, a [batch, seq, heads, dim] view over strided memory.
#pragma once

#include <algorithm>
#include <string>
#include <type_traits>
#include <vector>

#include "detail/check.hpp"
#include "kernel/finite.hpp"
#include "error.hpp"
#include "types.hpp"

ABC_NAMESPACE_BEGIN

/**
 * \brief A view of per-head token rows: element (b, s, h, j) of sequence b, token s, head h,
 * feature j lives at `data[start(b) + s·seq_stride + h·head_stride + j]` (features contiguous).
 *
 * It covers the layouts transformers use without copies: `bshd` ([batch, seq, heads, dim]),
 * `bhsd` ([batch, heads, seq, dim]), and `packed` ([total, heads, dim] with sequences at given row
 * offsets, the variable-length layout with no padding). Each sequence has its own length, so a
 * padded batch can also carry the true lengths and skip the padding. `head(b, h)` is an Eigen map
 * of one sequence and head, [length(b) × dim] with the seq stride as outer stride.
 *
 * \tparam T float or double (const T for inputs).
 */
template <class T>
class HeadTensor {
 public:
  /// T without const: float or double.
  using scalar_type = std::remove_const_t<T>;
  /// What head() and rows() return: an Eigen map [rows × dim], row-major with outer stride
  /// seq_stride(); read-only when T is const.
  using map_type = Eigen::Map<std::conditional_t<std::is_const<T>::value, const Matrix<scalar_type>, Matrix<scalar_type>>,
                              0, Eigen::OuterStride<>>;

  /// [batch, seq, heads, dim], contiguous; `lengths` (optional) gives each sequence's true length.
  static HeadTensor bshd(T* data, Index batch, Index seq, Index heads, Index dim, std::vector<Index> lengths = {}) {
    constexpr const char* who = "abc::HeadTensor::bshd";
    require_sizes(who, batch, seq, heads, dim);
    return HeadTensor(data, heads, dim, heads * dim, dim, starts(batch, seq * heads * dim),
                      fill_lengths(who, batch, seq, std::move(lengths)));
  }
  /// [batch, heads, seq, dim], contiguous.
  static HeadTensor bhsd(T* data, Index batch, Index heads, Index seq, Index dim, std::vector<Index> lengths = {}) {
    constexpr const char* who = "abc::HeadTensor::bhsd";
    require_sizes(who, batch, seq, heads, dim);
    return HeadTensor(data, heads, dim, dim, seq * dim, starts(batch, heads * seq * dim),
                      fill_lengths(who, batch, seq, std::move(lengths)));
  }
  /// Any strides (in elements; features contiguous): element (b, s, h, j) at
  /// data[b·batch_stride + s·seq_stride + h·head_stride + j]. For example q, k and v sliced out of
  /// a fused [batch, seq, 3, heads, dim] QKV buffer: data + {0, 1, 2}·heads·dim, seq_stride
  /// 3·heads·dim, head_stride dim, batch_stride seq·3·heads·dim.
  static HeadTensor strided(T* data, Index batch, Index seq, Index heads, Index dim, Index batch_stride,
                            Index seq_stride, Index head_stride, std::vector<Index> lengths = {}) {
    constexpr const char* who = "abc::HeadTensor::strided";
    require_nonnegative(who, "batch", batch);
    require_nonnegative(who, "seq", seq);
    require_nonnegative(who, "heads", heads);
    require_nonnegative(who, "dim", dim);
    require_nonnegative(who, "batch_stride", batch_stride);
    require_nonnegative(who, "seq_stride", seq_stride);
    require_nonnegative(who, "head_stride", head_stride);
    // The farthest element, (batch − 1)·batch_stride + (seq − 1)·seq_stride + (heads − 1)·head_stride
    // + dim, must be an Index: offsets are formed from these products.
    Index a = 0, b = 0, c = 0, far = 0;
    if (!(detail::checked_mul(std::max<Index>(batch - 1, 0), batch_stride, a) &&
          detail::checked_mul(std::max<Index>(seq - 1, 0), seq_stride, b) &&
          detail::checked_mul(std::max<Index>(heads - 1, 0), head_stride, c) && detail::checked_add(a, b, far) &&
          detail::checked_add(far, c, far) && detail::checked_add(far, dim, far)))
      overflow(who);
    return HeadTensor(data, heads, dim, seq_stride, head_stride, starts(batch, batch_stride),
                      fill_lengths(who, batch, seq, std::move(lengths)));
  }
  /// [total, heads, dim] with sequence b at rows offsets[b] .. offsets[b + 1] − 1 (offsets has
  /// batch + 1 entries, non-decreasing, from 0).
  static HeadTensor packed(T* data, const std::vector<Index>& offsets, Index heads, Index dim) {
    constexpr const char* who = "abc::HeadTensor::packed";
    require_nonnegative(who, "heads", heads);
    require_nonnegative(who, "dim", dim);
    if (offsets.empty())
      detail::raise(who, detail::value_problem(Status::shape_mismatch, "offsets.size()", 0, "at least ", 1,
                                               "offsets have batch + 1 entries, from 0"));
    if (offsets.front() != 0)
      detail::raise(who, detail::value_problem(Status::shape_mismatch, "offsets.front()", offsets.front(), "", 0,
                                               "sequence 0 starts at row 0"));
    std::vector<Index> st, len;
    for (std::size_t b = 0; b + 1 < offsets.size(); ++b) {
      if (offsets[b + 1] < offsets[b])  // names the entry: a long offsets list is not searched by hand
        ABC_THROW(shape_error(std::string(who) + ": offsets[" + std::to_string(b + 1) + "] is " +
                              std::to_string(offsets[b + 1]) + ", expected at least " + std::to_string(offsets[b]) +
                              " (offsets[" + std::to_string(b) + "]: offsets are non-decreasing)"));
      len.push_back(offsets[b + 1] - offsets[b]);
    }
    Index row = 0, total = 0;  // the element count: offsets.back() rows of heads × dim
    if (!(detail::checked_mul(heads, dim, row) && detail::checked_mul(offsets.back(), row, total))) overflow(who);
    for (std::size_t b = 0; b + 1 < offsets.size(); ++b) st.push_back(offsets[b] * row);
    return HeadTensor(data, heads, dim, heads * dim, dim, std::move(st), std::move(len));
  }

  /// The number of sequences.
  Index batch() const noexcept { return Index(lengths_.size()); }
  /// The number of heads.
  Index heads() const noexcept { return heads_; }
  /// The features per head and token.
  Index dim() const noexcept { return dim_; }
  /// The true length of sequence b; unchecked: 0 ≤ b < batch().
  Index length(Index b) const noexcept { return lengths_[std::size_t(b)]; }
  /// Elements from one token to the next within a sequence and head.
  Index seq_stride() const noexcept { return seq_stride_; }

  /// Whether every element of the view is finite (no NaN, no ±∞): a layer call's input check,
  /// in as few vector passes as the layout allows (one per sequence for bshd and packed views),
  /// with no cost per head.
  bool all_finite() const noexcept {
    scalar_type acc = scalar_type(0);
    for (Index b = 0; b < batch(); ++b) acc += residue(b, 0, heads_, 0, length(b));
    return acc == scalar_type(0);
  }
  /// Whether heads [first, first + count) of sequence b are finite, in one pass where the layout
  /// keeps a token's heads together; unchecked: 0 ≤ b < batch(), 0 ≤ first ≤ first + count ≤ heads().
  bool all_finite(Index b, Index first, Index count) const noexcept {
    return residue(b, first, count, 0, length(b)) == scalar_type(0);
  }
  /// Whether tokens [s0, s0 + rows) of sequence b are finite in every head, clipped to the
  /// sequence's length: a long call's check of a block of its rows; unchecked: 0 ≤ b < batch(),
  /// 0 ≤ s0, 0 ≤ rows.
  bool rows_finite(Index b, Index s0, Index rows) const noexcept {
    return residue(b, 0, heads_, s0, std::max<Index>(0, std::min(rows, length(b) - s0))) == scalar_type(0);
  }
  /// Sequence b, head h: [length(b) × dim], no copy.
  map_type head(Index b, Index h) const noexcept { return rows(b, h, 0, length(b)); }
  /// Tokens [s0, s0 + count) of sequence b, head h.
  map_type rows(Index b, Index h, Index s0, Index count) const noexcept {
    // An empty block points nowhere: a tensor of no elements may have no buffer (a null pointer,
    // which no offset may be added to).
    T* at = count == 0 || dim_ == 0 ? nullptr : data_ + starts_[std::size_t(b)] + s0 * seq_stride_ + h * head_stride_;
    return map_type(at, count, dim_, Eigen::OuterStride<>(seq_stride_));
  }

 private:
  static void require_nonnegative(const char* who, const char* arg, Index value) {
    if (value < 0) detail::raise(who, detail::at_least(Status::shape_mismatch, arg, value, 0, "a count"));
  }
  [[noreturn]] static void overflow(const char* who) {
    ABC_THROW(shape_error(std::string(who) + ": the element count overflows Index (the sizes are not a buffer's)"));
  }
  // Non-negative sizes whose element count batch · seq · heads · dim is an Index.
  static void require_sizes(const char* who, Index batch, Index seq, Index heads, Index dim) {
    require_nonnegative(who, "batch", batch);
    require_nonnegative(who, "seq", seq);
    require_nonnegative(who, "heads", heads);
    require_nonnegative(who, "dim", dim);
    Index n = 0;
    if (!(detail::checked_mul(batch, seq, n) && detail::checked_mul(n, heads, n) && detail::checked_mul(n, dim, n)))
      overflow(who);
  }

  // Σ e · 0 over heads [first, first + count) of sequence b's tokens [s0, s0 + len)
  // (kernel::finite_residue): ±0 when all are finite, NaN otherwise.
  // NOLINTNEXTLINE(bugprone-easily-swappable-parameters): private
  scalar_type residue(Index b, Index first, Index count, Index s0, Index len) const noexcept {
    using S = scalar_type;
    if (len == 0 || count == 0 || dim_ == 0) return S(0);
    const S* at = data_ + starts_[std::size_t(b)] + s0 * seq_stride_ + first * head_stride_;
    const bool heads_run = count == 1 || head_stride_ == dim_;  // a token's heads lie in one run
    if (heads_run && (len == 1 || seq_stride_ == count * dim_)) return kernel::finite_residue(at, len * count * dim_);
    if (heads_run) return kernel::finite_residue_rows(at, len, count * dim_, seq_stride_);
    S acc = S(0);
    for (Index h = 0; h < count; ++h) acc += kernel::finite_residue_rows(at + h * head_stride_, len, dim_, seq_stride_);
    return acc;
  }

  // NOLINTNEXTLINE(bugprone-easily-swappable-parameters): private: the factories name each stride
  HeadTensor(T* data, Index heads, Index dim, Index seq_stride, Index head_stride, std::vector<Index> starts,
             std::vector<Index> lengths)
      : data_(data), heads_(heads), dim_(dim), seq_stride_(seq_stride), head_stride_(head_stride),
        starts_(std::move(starts)), lengths_(std::move(lengths)) {}

  // NOLINTNEXTLINE(bugprone-easily-swappable-parameters): private
  static std::vector<Index> starts(Index batch, Index batch_stride) {
    std::vector<Index> s;
    for (Index b = 0; b < batch; ++b) s.push_back(b * batch_stride);
    return s;
  }
  static std::vector<Index> fill_lengths(const char* who, Index batch, Index seq, std::vector<Index> lengths) {
    if (lengths.empty()) return std::vector<Index>(std::size_t(batch), seq);
    if (Index(lengths.size()) != batch)
      detail::raise(who, detail::value_problem(Status::shape_mismatch, "lengths.size()", Index(lengths.size()), "",
                                               batch, "one length per sequence"));
    // The entry is named, and the bound it breaks: a negative length is not "at most seq".
    for (std::size_t b = 0; b < lengths.size(); ++b)
      if (lengths[b] < 0 || lengths[b] > seq)
        ABC_THROW(shape_error(std::string(who) + ": lengths[" + std::to_string(b) + "] is " +
                              std::to_string(lengths[b]) + ", expected " +
                              (lengths[b] < 0 ? std::string("at least 0 (a sequence length)")
                                              : "at most " + std::to_string(seq) +
                                                    " (seq: lengths are within the padded length)")));
    return lengths;
  }

  T* data_;
  Index heads_, dim_, seq_stride_, head_stride_;
  std::vector<Index> starts_, lengths_;
};

ABC_NAMESPACE_END
