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

/// The widest spread of a slot's log-weights within one chunk that chunk_normalise takes: 16, in
/// float and double. A weight taken against the chunk's reference m′ rather than its own prefix's
/// running max m_t has the rounding of λ − m′ in its exponent, a relative error up to about
/// (m′ − m_t) · ε / 2 beyond the token-by-token form's: at most 8 ε here. Chunks whose log-weights
/// rise by less than 16 (a factor of 9 · 10⁶ in weight) over the first token's running max take it.
template <class T>
constexpr T chunk_spread() noexcept {
  return T(16);
}

/**
 * \brief A chunk of c tokens of the per-slot running softmax against one reference per slot, for a
 * causal kernel whose tokens each read the memory of their own prefix: every token's weights as
 * products of one factor per token and one per time, with no decay per token.
 *
 * For each slot ℓ, with the chunk's log-weights λ_i (row i of `lam`, [c × n], −∞ for no mass) and
 * the normaliser (m, z) before it: the reference m′ = max(m, max_i λ_i), u_i = exp(λ_i − m′)
 * (into `lam`), carry = exp(m − m′) z, Z_t = carry + Σ_{i≤t} u_i and r_t = 1 / Z_t (row t of
 * `r`). Token i's weight in the memory at time t ≥ i is then u_i r_t, and what is left of the
 * memory before the chunk is carry · r_t: the prefix-normalised memory of token t, equal to
 * online_normalise's weights folded over the prefix in exact arithmetic. (m, z) ← (m′, Z_{c−1}).
 *
 * The common reference is taken only where it loses nothing: every slot that has mass by the
 * chunk's end must have it from its first token (max(m, λ_0) > −∞), its reference at most
 * chunk_spread() above max(m, λ_0) (the smallest running max of the chunk), and a normaliser z ≥ 1
 * when m > −∞ (the slot's largest weight counts exp(0) = 1, as both normalisers leave it). Then
 * every Z_t ≥ exp(−chunk_spread()) is a normal number, and a flushed u_i (or carry) stands for a
 * weight below exp(log_min_normal + chunk_spread()) of its prefix's largest (times z for the carry):
 * far below the rounding of any sum it could enter. Otherwise returns false having changed
 * nothing (`r` and `carry` are scratch), and the caller takes the token-by-token normaliser. A slot
 * with no mass through the chunk gets u = 0, r = 1, carry = 1 (the memory stays, as
 * online_normalise's decay 1 and write 0) and keeps m and z.
 *
 * \param lam [c × n] row-major, in: log-weights (finite or −∞), out: u; \param m [n] in/out,
 * \param z [n] in/out, \param r [c × n] row-major, out; \param carry [n] out
 */
template <class T>
bool chunk_normalise(T* lam, Index c, Index n, T* m, T* z, T* r, T* carry) noexcept {
  constexpr T ninf = -std::numeric_limits<T>::infinity();
  constexpr T spread = chunk_spread<T>();
  // The reference of each slot into `carry` (scratch until the second pass), and the check, before
  // anything is written.
  const auto fits = [&](T top, T first, T mv, T zv) {
    return !(top > ninf) || (first > ninf && top - first <= spread && (mv == ninf || zv >= T(1)));
  };
#ifndef ABC_NO_SIMD
  bool ok = true;
  const auto check = [&](auto tag, Index l) {
    using B = typename decltype(tag)::type;
    const B mv = B::load_unaligned(m + l), zv = B::load_unaligned(z + l);
    const B first = xsimd::max(mv, B::load_unaligned(lam + l));
    B top = first;
    for (Index i = 1; i < c; ++i) top = xsimd::max(top, B::load_unaligned(lam + i * n + l));
    const auto dead = !(top > B(ninf));
    const auto fine = (first > B(ninf)) & (top - first <= B(spread)) & ((mv == B(ninf)) | (zv >= B(T(1))));
    ok = ok && xsimd::all(dead | fine);
    top.store_unaligned(carry + l);
  };
  const Index l0 = impl::for_batches<batch<T>>(0, n, check);
#else
  bool ok = true;
  const Index l0 = 0;
#endif
  for (Index l = l0; l < n && ok; ++l) {
    T top = std::max(m[l], lam[l]);
    const T first = top;
    for (Index i = 1; i < c; ++i) top = std::max(top, lam[i * n + l]);
    ok = fits(top, first, m[l], z[l]);
    carry[l] = top;
  }
  if (!ok) return false;
#ifndef ABC_NO_SIMD
  const auto slots = [&](auto tag, Index l) {
    using B = typename decltype(tag)::type;
    const B top = B::load_unaligned(carry + l), mv = B::load_unaligned(m + l), zv = B::load_unaligned(z + l);
    const auto live = top > B(ninf);
    const B shift = xsimd::select(live, top, B(T(0)));  // dead lanes: all −∞, exp gives 0
    const B kept = impl::exp_shifted(mv, shift) * zv;  // exp(−∞) = 0: a slot new in this chunk
    const B one(T(1));
    B sum = kept;
    for (Index i = 0; i < c; ++i) {
      const B u = impl::exp_shifted(B::load_unaligned(lam + i * n + l), shift);
      u.store_unaligned(lam + i * n + l);
      sum += u;
      xsimd::select(live, one / xsimd::select(live, sum, one), one).store_unaligned(r + i * n + l);
    }
    xsimd::select(live, kept, one).store_unaligned(carry + l);
    xsimd::select(live, top, mv).store_unaligned(m + l);
    xsimd::select(live, sum, zv).store_unaligned(z + l);
  };
  impl::for_batches<batch<T>>(0, n, slots);
#endif
  constexpr T lo = scalar::log_min_normal<T>();
  for (Index l = l0; l < n; ++l) {
    const T top = carry[l];
    if (!(top > ninf)) {  // no mass: the memory stays
      for (Index i = 0; i < c; ++i) {
        lam[i * n + l] = T(0);
        r[i * n + l] = T(1);
      }
      carry[l] = T(1);
      continue;
    }
    const auto ex = [&](T x) { return x - top >= lo ? std::exp(x - top) : T(0); };
    const T kept = ex(m[l]) * z[l];
    T sum = kept;
    for (Index i = 0; i < c; ++i) {
      sum += lam[i * n + l] = ex(lam[i * n + l]);
      r[i * n + l] = T(1) / sum;
    }
    carry[l] = kept;
    m[l] = top;
    z[l] = sum;
  }
  return true;
}

}  // namespace kernel
ABC_NAMESPACE_END
