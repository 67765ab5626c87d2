// SPDX-License-Identifier: MIT
// abc: bounded-memory attention. kernel::online_normalise, one token of a per-slot online softmax.
#pragma once

#include <limits>

#include "../types.hpp"
#include "scalar.hpp"
#include "simd.hpp"

ABC_NAMESPACE_BEGIN
namespace kernel {

/**
 * \brief One token of the per-slot running softmax over time behind every normalised control.
 *
 * For each slot ℓ < n, with the token's log-weight λ = log α (−∞ for no mass), the running max m
 * and the sum z = Σ α_i exp(−m) (both updated in place):
 *     m' = max(m, λ),  z' = exp(m − m') z + exp(λ − m'),
 *     write = exp(λ − m') / z',  decay = exp(m − m') z / z'   (1 when `prefix` is false).
 * One of the two exponents is exactly 0 and the other ≤ 0, so nothing overflows for any λ; −∞ is
 * mapped to a zero weight explicitly instead of through −∞ − (−∞). A slot with z' = 0 (no mass yet)
 * gets decay 1 and write 0, and keeps m.
 *
 * \param lam [n], \param m [n] in/out, \param z [n] in/out, \param decay [n] out, \param write [n] out
 */
template <class T>
void online_normalise(const T* lam, T* m, T* z, T* decay, T* write, Index n, bool prefix) noexcept {
#ifdef ABC_NO_SIMD
  scalar::online_normalise(lam, m, z, decay, write, n, prefix);
#else
  const auto slots = [&](auto tag, Index l) {
    using B = typename decltype(tag)::type;
    const B ninf(-std::numeric_limits<T>::infinity()), zero(T(0)), one(T(1));
    const B lv = B::load_unaligned(lam + l), mv = B::load_unaligned(m + l), zv = B::load_unaligned(z + l);
    const B m_new = xsimd::max(mv, lv);
    // One of the two exponents is exactly 0 and exp(0) is exactly 1 (xsimd's exp, as std::exp), so
    // one exponential per slot, of min(m, λ) − m', gives both factors bit for bit: the slot's
    // normaliser is half the exponentials it was. (λ is finite or −∞, never +∞: to_log_weight
    // saturates the logits.) The argument is clamped to [−1000, ·] (exp(−1000) is 0 in float and
    // double): an empty slot gives −∞ − (−∞) = NaN there, and xsimd's exp converts
    // k = round(x·log2 e) to an integer before its own range select, which for ±∞/NaN is undefined
    // behaviour (UBSan: float-cast-overflow).
    const B lo(T(-1000));
    const B e = xsimd::min(mv, lv) - m_new;
    const B small = xsimd::exp(xsimd::select(e > lo, e, lo));
    const auto m_top = mv >= lv;  // the running max stays: keep = 1, add = exp(λ − m)
    const B keep = xsimd::select(mv == ninf, zero, xsimd::select(m_top, one, small));
    const B add = xsimd::select(lv == ninf, zero, xsimd::select(m_top, small, one));
    const B z_new = impl::fma(keep, zv, add);
    const auto live = z_new > zero;
    if (prefix)
      xsimd::select(live, keep * zv / z_new, one).store_unaligned(decay + l);
    else
      one.store_unaligned(decay + l);
    xsimd::select(live, add / z_new, zero).store_unaligned(write + l);
    xsimd::select(live, m_new, mv).store_unaligned(m + l);
    z_new.store_unaligned(z + l);
  };
  const Index l = impl::for_batches<batch<T>>(0, n, slots);
  // The last few slots (fewer than the narrowest batch) take the scalar path; a slot always falls in
  // the same path for a given n, so step, chunked and split runs compute it identically.
  scalar::online_normalise(lam + l, m + l, z + l, decay + l, write + l, n - l, prefix);
#endif
}

}  // namespace kernel
ABC_NAMESPACE_END
