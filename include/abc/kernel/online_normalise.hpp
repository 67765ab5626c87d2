// SPDX-License-Identifier: MIT
// abc: bounded-memory attention. kernel::online_normalise, one token of a per-slot online softmax.
#pragma once

#include <algorithm>
#include <cmath>
#include <limits>

#include "../types.hpp"
#include "exp_sum.hpp"
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

/**
 * \brief A block of c tokens of the per-slot running softmax at once, for a memory that is read only
 * at the block's end (the non-causal build): the weights online_normalise would give, as
 * suffix_weights would fold them, without a decay per token.
 *
 * For each slot ℓ, with the block's log-weights λ_i (row i of `lam`, [c × n], −∞ for no mass):
 *     m' = max(m, max_i λ_i),  u_i = exp(λ_i − m'),  z' = exp(m − m') z + Σ_i u_i,
 *     eff_i = u_i / z'  (into `lam`),  dcum = exp(m − m') z / z',
 * each division a multiply by the slot's 1/z' (one rounding more, c divisions fewer), so that the
 * memory advances as diag(dcum) memory + Σ_i eff_i ⊗ k_i, the prefix-normalised memory of the
 * block's last token. Every exponent is ≤ 0. A slot whose m' is −∞ (no mass before
 * or in the block) keeps m and z, with dcum 1 and zero weights; otherwise z' ≥ 1 (the largest
 * entry contributes exp(0)), so no division is by 0. Exponents below log of the smallest normal give
 * 0 (kernel::exp_sum's rule). Equal to the token-by-token form in exact arithmetic; the rounding
 * differs (one exponential per weight and one normaliser per block, not per token).
 *
 * \param lam [c × n] row-major, in: log-weights (finite or −∞), out: the weights at the block's end;
 * \param m [n] in/out, \param z [n] in/out, \param dcum [n] out
 */
template <class T>
void block_normalise(T* lam, Index c, Index n, T* m, T* z, T* dcum) noexcept {
  constexpr T ninf = -std::numeric_limits<T>::infinity();
#ifndef ABC_NO_SIMD
  // A batch of slots down the block's rows: every operation is lane-wise, no horizontal sum.
  const auto slots = [&](auto tag, Index l) {
    using B = typename decltype(tag)::type;
    const B mv = B::load_unaligned(m + l), zv = B::load_unaligned(z + l);
    B top = mv;
    for (Index i = 0; i < c; ++i) top = xsimd::max(top, B::load_unaligned(lam + i * n + l));
    const auto live = top > B(ninf);
    // Dead lanes shift by 0 (their entries are all −∞ and give 0): no −∞ − (−∞).
    const B shift = xsimd::select(live, top, B(T(0)));
    B sum(T(0));
    for (Index i = 0; i < c; ++i) {
      const B u = impl::exp_shifted(B::load_unaligned(lam + i * n + l), shift);
      u.store_unaligned(lam + i * n + l);
      sum += u;
    }
    const B keep = xsimd::select(live, impl::exp_shifted(mv, shift), B(T(1)));  // exp(−∞) = 0
    const B z_new = xsimd::select(live, impl::fma(keep, zv, sum), zv);
    const B r = B(T(1)) / xsimd::select(live, z_new, B(T(1)));
    for (Index i = 0; i < c; ++i) (B::load_unaligned(lam + i * n + l) * r).store_unaligned(lam + i * n + l);
    xsimd::select(live, keep * zv * r, B(T(1))).store_unaligned(dcum + l);
    xsimd::select(live, top, mv).store_unaligned(m + l);
    z_new.store_unaligned(z + l);
  };
  const Index l0 = impl::for_batches<batch<T>>(0, n, slots);
#else
  const Index l0 = 0;
#endif
  constexpr T lo = scalar::log_min_normal<T>();
  for (Index l = l0; l < n; ++l) {
    T top = m[l];
    for (Index i = 0; i < c; ++i) top = std::max(top, lam[i * n + l]);
    if (!(top > ninf)) {  // no mass: zero weights, and the memory stays
      for (Index i = 0; i < c; ++i) lam[i * n + l] = T(0);
      dcum[l] = T(1);
      continue;
    }
    const auto ex = [&](T x) { return x - top >= lo ? std::exp(x - top) : T(0); };
    T sum = T(0);
    for (Index i = 0; i < c; ++i) sum += lam[i * n + l] = ex(lam[i * n + l]);
    const T keep = ex(m[l]);
    const T z_new = scalar::mul_add(keep, z[l], sum);
    const T r = T(1) / z_new;
    for (Index i = 0; i < c; ++i) lam[i * n + l] *= r;
    dcum[l] = keep * z[l] * r;
    m[l] = top;
    z[l] = z_new;
  }
}

}  // namespace kernel
ABC_NAMESPACE_END
