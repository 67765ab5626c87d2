// SPDX-License-Identifier: MIT
// abc: bounded-memory attention. kernel::forget_gate, a per-slot forget gate in log space.
#pragma once

#include <limits>

#include "../types.hpp"
#include "scalar.hpp"
#include "simd.hpp"

ABC_NAMESPACE_BEGIN
namespace kernel {

/**
 * \brief One token of per-slot forget gates f = σ(s)^(1/τ) from their logits s, in log space.
 *
 * For each slot ℓ < n: log f = log σ(s) / τ = −softplus(−s) / τ, with
 * softplus(−s) = max(−s, 0) + log1p(exp(−|s|)), so no exponential of a positive number is taken;
 * then decay = exp(log f) = f and write = −expm1(log f) = 1 − f, which keeps 1 − f to full relative
 * precision when f is close to 1 (a gate of 1 − 1e-7 in float) and f when it is tiny (1e-30).
 *
 * Defined for every input: a NaN logit counts as 0 (the gate σ(0)^(1/τ), as Gated does), ±∞ as the
 * largest finite value. Exponentials below the smallest normal number are exactly 0 on both paths,
 * as in exp_sum: a decay below it is 0, and a write below it (1 − f < the smallest normal, i.e. a
 * gate that rounds to 1 in every sense) is 0, so that token does not count as writing the slot. The
 * SIMD lanes and the scalar tail thus agree on every exact 0 and 1.
 *
 * \param logit [n] in (may be `decay`: each entry is read before it is overwritten)
 * \param tau the gate normaliser τ > 0
 * \param decay [n] out, f in [0, 1]
 * \param write [n] out, 1 − f in [0, 1]
 */
template <class T>
void forget_gate(const T* logit, T tau, T* decay, T* write, Index n) noexcept {
#ifdef ABC_NO_SIMD
  scalar::forget_gate(logit, tau, decay, write, n);
#else
  using B = batch<T>;
  constexpr Index width = Index(B::size);
  const B big(std::numeric_limits<T>::max()), tiny(std::numeric_limits<T>::min());
  const B lo(scalar::log_min_normal<T>()), zero(T(0)), one(T(1)), t(tau);
  Index l = 0;
  for (; l + width <= n; l += width) {
    const B raw = B::load_unaligned(logit + l);
    const B s = xsimd::min(xsimd::max(xsimd::select(xsimd::isnan(raw), zero, raw), -big), big);
    // Arguments of exp and expm1 are kept ≥ lo: xsimd converts round(x · log2 e) to an integer
    // before its own range select, which overflows (undefined behaviour) for huge |x|.
    const B e = -xsimd::abs(s);
    const auto e_live = e >= lo;
    const B softplus = xsimd::max(-s, zero) +
                       xsimd::select(e_live, xsimd::log1p(xsimd::exp(xsimd::select(e_live, e, lo))), zero);
    B lf = -softplus / t;
    lf = xsimd::select(lf > -tiny, zero, lf);
    const auto live = lf >= lo;
    const B arg = xsimd::select(live, lf, lo);
    xsimd::select(live, xsimd::exp(arg), zero).store_unaligned(decay + l);
    xsimd::select(live, zero - xsimd::expm1(arg), one).store_unaligned(write + l);
  }
  // The tail takes the scalar path; a slot always falls in the same path for a given n, so the
  // step, chunked and split runs compute its gate identically.
  scalar::forget_gate(logit + l, tau, decay + l, write + l, n - l);
#endif
}

}  // namespace kernel
ABC_NAMESPACE_END
