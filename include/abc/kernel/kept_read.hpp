// SPDX-License-Identifier: MIT
// abc: bounded-memory attention. The read of the selection operators: exact softmax attention of a
// segment over the tokens a cache kept and over the segment's own tokens, causally.
#pragma once

#include <Eigen/Core>

#include "softmax_slots.hpp"
#include "../types.hpp"

ABC_NAMESPACE_BEGIN
namespace kernel {

// Keys and values [m + n rows]: the m kept tokens, then the segment's n. Query i of the segment
// reads rows [0, m + i]: logits = scale · q keysᵀ (+ bias(i, j, logit&) when the operator has a
// position term), one softmax per query over its readable rows, out = P values. Returns P
// [n × (m + n)], held in `buffer` (an operator that accumulates attention mass reads it); unreadable
// entries are exactly 0, and each row sums to 1 (the query's own token is always readable). The
// buffer grows when it is too small and is otherwise reused, so a decode step whose buffer was
// sized for it allocates nothing.
template <class T, class Keys, class Values, class Bias>
Eigen::Map<Matrix<T>> kept_read(const Eigen::Ref<const Matrix<T>>& q, const Keys& keys, const Values& values, Index m,
                                T scale, Matrix<T>& buffer, Eigen::Ref<Matrix<T>> out, const Bias& bias) {
  const Index n = q.rows(), rows = m + n;
  if (buffer.size() < n * rows) buffer.resize(n, rows);
  Eigen::Map<Matrix<T>> p(buffer.data(), n, rows);
  // Scaled after the product: a scaled query inside it would be an Eigen temporary per step.
  p.noalias() = q * keys.topRows(rows).transpose();
  p *= scale;
  for (Index i = 0; i < n; ++i) {
    for (Index j = 0; j < m + i + 1; ++j) bias(i, j, p(i, j));
    softmax_slots(p.row(i).data(), rows, nullptr, false, SlotRange{0, m + i + 1});
  }
  out.noalias() = p * values.topRows(rows);
  return p;
}

// No position term.
struct NoBias {
  template <class T>
  void operator()(Index, Index, T&) const noexcept {}
};

}  // namespace kernel
ABC_NAMESPACE_END
