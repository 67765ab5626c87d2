// SPDX-License-Identifier: MIT
// abc: bounded-memory attention. detail::project, the logits X Wᵀ of a control's input projection.
#pragma once

#include "../kernel/product.hpp"
#include "../kernel/rows.hpp"
#include "../types.hpp"

ABC_NAMESPACE_BEGIN
namespace detail {

// out = X Wᵀ for W [m × d_x], given W and its transpose W_t [d_x × m] (kept by the caller, made
// once). One row, a decode step, is summed as Σ_j x_j W_t[j] (kernel::weighted_rows): several
// times cheaper than a general matrix–vector product at these sizes. Several rows are one
// kernel::product over W_t's rows, which reuses W across the tokens and sums each logit the same way
// whatever the number of rows or of W's rows. Every caller that forms logits goes through here, so
// one token's logits are the same whether a control forms them or a multi-head layer forms them for
// all its memories at once (W stacking the memories' weights).
template <class T>
void project(MatrixRef<T> x, const Matrix<T>& w, const Matrix<T>& w_t, MatrixOut<T> out) {
  if (x.rows() == 1)
    kernel::weighted_rows(w_t.data(), w.rows(), w.cols(), w.rows(), x.data(), out.data());
  else
    kernel::product<false>(kernel::product_args(x, w_t, out));
}

}  // namespace detail
ABC_NAMESPACE_END
