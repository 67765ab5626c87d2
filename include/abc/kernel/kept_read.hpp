// SPDX-License-Identifier: MIT
// abc: bounded-memory attention. The read of the selection operators: exact softmax attention of a
// segment over the tokens a cache kept and over the segment's own tokens, causally.
#pragma once

#include <algorithm>

#include <Eigen/Core>

#include "../types.hpp"
#include "product.hpp"
#include "rows.hpp"
#include "softmax_slots.hpp"

ABC_NAMESPACE_BEGIN
namespace kernel {

namespace impl {
// dst [cols × rows] row-major ← srcᵀ, src [rows × cols] at row stride ld: sixteen source rows at a
// time, so that each destination row is written in runs of sixteen while the source block stays in
// cache.
template <class T>
void transpose_into(const T* src, Index ld, Index rows, Index cols, T* dst) noexcept {
  constexpr Index block = 16;
  for (Index j0 = 0; j0 < rows; j0 += block) {
    const Index w = std::min(block, rows - j0);
    for (Index c = 0; c < cols; ++c) {
      T* to = dst + c * rows + j0;
      const T* from = src + j0 * ld + c;
      for (Index r = 0; r < w; ++r) to[r] = from[r * ld];
    }
  }
}
}  // namespace impl

// From this many queries a segment reads through two blocked products; below it, each query reads
// its rows on its own (a decode step: one pass over the keys and one over the values).
inline constexpr Index kept_read_blocked = 8;

namespace impl {
// Query i's logits over its readable entries [0, m + i]: scaled (after the product: a scaled query
// would be a copy per step), the position term added, then the softmax over them.
template <class T, class Bias>
void normalise_read(T* logits, Index rows, Index m, Index i, T scale, const Bias& bias) {
  for (Index j = 0; j < m + i + 1; ++j) {
    logits[j] *= scale;
    bias(i, j, logits[j]);
  }
  softmax_slots(logits, rows, nullptr, false, SlotRange{0, m + i + 1});
}
}  // namespace impl

// kept_read a query at a time over rows wherever they are: key_at(j) and value_at(j) point at
// readable row j (the m kept tokens, then the segment's n). A cache whose kept rows are not one
// block (TRAMS's ring) reads them in place rather than gathering them first. The rows are the same
// as kept_read's, so are the bits: a row's logit does not depend on the rows beside it, and the
// weighted sum runs over the rows in the same order.
template <class T, class KeyAt, class ValueAt, class Bias>
Eigen::Map<Matrix<T>> kept_read_at(const Eigen::Ref<const Matrix<T>>& q, const KeyAt& key_at, const ValueAt& value_at,
                                   Index m, T scale, Matrix<T>& buffer, Eigen::Ref<Matrix<T>> out, const Bias& bias) {
  const Index n = q.rows(), d = q.cols(), dv = out.cols(), rows = m + n;
  if (buffer.size() < n * rows) buffer.resize(n, rows);
  Eigen::Map<Matrix<T>> p(buffer.data(), n, rows);
  for (Index i = 0; i < n; ++i) {
    rows_dot_at(key_at, m + i + 1, d, q.row(i).data(), p.row(i).data());
    impl::normalise_read(p.row(i).data(), rows, m, i, scale, bias);
    weighted_rows_at(value_at, m + i + 1, dv, p.row(i).data(), out.row(i).data());
  }
  return p;
}

// Keys and values [m + n rows], row-major: the m kept tokens, then the segment's n. Query i of the
// segment reads rows [0, m + i]: logits = scale · q keysᵀ (+ bias(i, j, logit&) when the operator has a
// position term), one softmax per query over its readable rows, out = P values. Returns P
// [n × (m + n)], held in `buffer` (an operator that accumulates attention mass reads it); unreadable
// entries are exactly 0, and each row sums to 1 (the query's own token is always readable). The
// buffer grows when it is too small and is otherwise reused, so a decode step whose buffer was
// sized for it allocates nothing.
//
// The products are the library's own kernels on the calling thread (kernel::rows_dot_at and
// weighted_rows_at a query at a time, kernel::product for a segment of kept_read_blocked queries or
// more), not Eigen's: in a program built with OpenMP Eigen splits a large product over threads by
// itself outside a parallel region, with other blocking than inside one, so a multi-head layer's
// pair on a thread would not give the bits of the same call made alone.
template <class T, class Keys, class Values, class Bias>
Eigen::Map<Matrix<T>> kept_read(const Eigen::Ref<const Matrix<T>>& q, const Keys& keys, const Values& values, Index m,
                                T scale, Matrix<T>& buffer, Eigen::Ref<Matrix<T>> out, const Bias& bias) {
  const Index n = q.rows(), d = q.cols(), rows = m + n;
  static_assert(Keys::IsRowMajor && Values::IsRowMajor, "kept_read reads keys and values by rows");
  if (n < kept_read_blocked)
    return kept_read_at<T>(q, StridedRows<const T>{keys.data(), keys.outerStride()},
                           StridedRows<const T>{values.data(), values.outerStride()}, m, scale, buffer, out, bias);
  if (buffer.size() < n * rows) buffer.resize(n, rows);
  Eigen::Map<Matrix<T>> p(buffer.data(), n, rows);
  // kernel::product reads B by rows: the keys transposed, a copy of (m + n) · d entries against
  // the product's n times as many multiply-adds.
  Matrix<T> kt(d, rows);
  impl::transpose_into(keys.data(), keys.outerStride(), rows, d, kt.data());
  product<false>(product_args(q, kt, p));
  for (Index i = 0; i < n; ++i) impl::normalise_read(p.row(i).data(), rows, m, i, scale, bias);
  product<false>(product_args(p, values.topRows(rows), out));
  return p;
}

// No position term.
struct NoBias {
  template <class T>
  void operator()(Index, Index, T&) const noexcept {}
};

}  // namespace kernel
ABC_NAMESPACE_END
