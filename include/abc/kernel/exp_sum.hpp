// SPDX-License-Identifier: MIT
// abc: bounded-memory attention. kernel::exp_sum, the exponentials of a softmax row.
#pragma once

#include <cmath>
#include <limits>

#include "../types.hpp"
#include "scalar.hpp"
#include "simd.hpp"

ABC_NAMESPACE_BEGIN
namespace kernel {

#ifndef ABC_NO_SIMD
namespace impl {
// exp(x − shift) for one batch of entries ≤ shift or −∞, 0 below log of the smallest normal (see
// exp_sum): the one formula of exp_sum, of softmax_slots' registers-only row and of
// block_normalise, so they give the same bits. `shift` is one number or a batch (one per lane).
template <class B, class S>
ABC_FORCE_INLINE B exp_shifted(const B& x, const S& shift) noexcept {
  using T = typename B::value_type;
  const B e = x - B(shift), lo(scalar::log_min_normal<T>());
  const auto live = e >= lo;
  // exp's argument is kept ≥ lo: xsimd converts round(e · log2 e) to an integer before its own
  // range select, which for −∞ is undefined behaviour (UBSan: float-cast-overflow).
  return xsimd::select(live, xsimd::exp(xsimd::select(live, e, lo)), B(T(0)));
}
}  // namespace impl
#endif

/**
 * \brief x ← exp(x − shift) in place over n entries, returning their sum: the exponentials of a
 * softmax row whose largest entry is `shift` (every exponent ≤ 0, so nothing overflows).
 *
 * −∞ entries (masked slots, hidden keys) give exactly 0, and so does any exponent below log of the
 * smallest normal number (−87.3 in float, −708.4 in double): such a weight is below the rounding
 * of a sum that is ≥ 1, and flushing it in both paths keeps the SIMD and scalar paths equal on
 * which weights are zero. Eigen's vectorised exp is not used: Eigen 3.4 returns a tiny positive
 * number, not 0, for −∞ and for exponents below about −708 (double, SSE2 and AVX2 paths) or −104
 * (float, SSE2 path), so a masked slot would keep a weight.
 *
 * \param x [n] in/out, entries ≤ shift or −∞ (not NaN); \param shift finite
 */
template <class T>
T exp_sum(T* x, Index n, T shift) noexcept {
#ifdef ABC_NO_SIMD
  return scalar::exp_sum(x, n, shift);
#else
  const auto exps = [&](auto tag, Index l) {
    using B = typename decltype(tag)::type;
    const B r = impl::exp_shifted(B::load_unaligned(x + l), shift);
    r.store_unaligned(x + l);
    return r;
  };
  // The full batches' sums in one accumulator; each narrower batch (at most one of each width) and
  // the last few entries (the scalar path; a slot always falls in the same path for a given n, so the
  // step, chunked and split runs compute it identically) added after it.
  using B = batch<T>;
  B acc(T(0));
  Index l = 0;
  for (; l + Index(B::size) <= n; l += Index(B::size)) acc += exps(impl::batch_tag<B>{}, l);
  T sum = impl::hsum(acc);
  l = impl::for_batches<impl::half_batch_t<B>>(l, n, [&](auto tag, Index at) { sum += impl::hsum(exps(tag, at)); });
  return sum + scalar::exp_sum(x + l, n - l, shift);
#endif
}

}  // namespace kernel
ABC_NAMESPACE_END
