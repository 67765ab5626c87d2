// SPDX-License-Identifier: MIT
// abc: bounded-memory attention. detail::project, the logits X Wᵀ of a control's input projection.
#pragma once

#include "../kernel/product.hpp"
#include "../kernel/rows.hpp"
#include "../types.hpp"

ABC_NAMESPACE_BEGIN
namespace detail {

// How project sums the one row of a decode step: in the order of a block of rows (`as_block`), so
// that a step gets a chunk's results bit for bit (a feature map's projection promises that), or in
// two interleaved sets of sums (`interleaved`, kernel::weighted_rows_interleaved), half the
// dependent chain: a control's logits over a memory of 16 or 32 slots wait on that chain, and a
// control's step and chunked forms promise the same outputs only to rounding (docs/design.md §3.1).
enum class RowSum { as_block, interleaved };

// out = X Wᵀ for W [m × d_x], given W and its transpose W_t [d_x × m] (kept by the caller, made
// once). One row, a decode step, is summed as Σ_j x_j W_t[j] in the order `one_row` says: several
// times cheaper than a general matrix–vector product at these sizes. Several rows are one
// kernel::product over W_t's rows, which reuses W across the tokens and sums each entry in one chain
// over j, the order of weighted_rows, whatever the number of rows. Either way an entry's bits do not
// depend on W's other rows, and every caller that forms logits goes through here, so one token's
// logits are the same whether a control forms them or a multi-head layer forms them for all its
// memories at once (W stacking the memories' weights).
template <class T>
void project(MatrixRef<T> x, const Matrix<T>& w, const Matrix<T>& w_t, MatrixOut<T> out, RowSum one_row) {
  if (x.rows() != 1)
    kernel::product<false>(kernel::product_args(x, w_t, out));
  else if (one_row == RowSum::interleaved)
    kernel::weighted_rows_interleaved(w_t.data(), w.rows(), w.cols(), w.rows(), x.data(), out.data());
  else
    kernel::weighted_rows(w_t.data(), w.rows(), w.cols(), w.rows(), x.data(), out.data());
}

}  // namespace detail
ABC_NAMESPACE_END
