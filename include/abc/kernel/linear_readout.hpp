// SPDX-License-Identifier: MIT
// abc: bounded-memory attention. Kernels of the linear readout φ(q)ᵀ Ṽ / (φ(q)·z) (random features).
#pragma once

#include <algorithm>
#include <cmath>

#include "finite.hpp"
#include "rows.hpp"
#include "../types.hpp"
#include "recurrence.hpp"

ABC_NAMESPACE_BEGIN
namespace kernel {

// The readout φ(q)ᵀṼ / φ(q)·z is a ratio, unchanged when φ(q) is scaled by any positive factor. A
// row of φ(q) whose largest |entry| lies outside [2^-32, 2^32] (subnormal features, or features
// near overflow) is scaled by a power of two so that it lies in [1, 2): the scaled numerator and
// denominator then neither underflow to 0 nor overflow, and the exact ratio comes out. Powers of
// two scale exactly, and rows of ordinary magnitude are not touched, so their results are bit for
// bit those of the plain formula. Returns the factor applied (1 if none), by which the floor is
// scaled too. A row that is all zero, or holds a feature that is not finite, is left: its
// denominator rule applies.
template <class T>
T balance_features(T* phi, Index n) noexcept {
  const T m = max_magnitude(phi, n);  // NaN when a feature is not finite
  if (!(m > T(0)) || !std::isfinite(m)) return T(1);
  const int e = std::ilogb(m);
  if (e >= -32 && e <= 32) return T(1);
  for (Index l = 0; l < n; ++l) phi[l] = std::ldexp(phi[l], -e);
  return std::ldexp(T(1), -e);
}

// The denominator rule, applied to a numerator row `out` [dv]. With a floor ε > 0 the denominator
// is max(den, ε) (the production choice for sin/cos features, whose estimate φ(q)·z can be ≤ 0; any
// floor breaks exactness). Without a floor the formula is used as it is, except that an exactly
// zero denominator, which would divide by zero, reads as the zero vector. The numerator is divided,
// never multiplied by 1/den: a subnormal den has an infinite reciprocal.
template <class T>
void divide_by_denominator(T* out, Index dv, T den, T floor) noexcept {
  if (floor > T(0)) den = std::max(den, floor);
  for (Index j = 0; j < dv; ++j) out[j] = den == T(0) ? T(0) : out[j] / den;
}

// One token: Ṽ ← diag(a) Ṽ + w ⊗ v, z ← a ⊙ z + w, out = φ(q)ᵀ Ṽ / (φ(q)·z). One pass over Ṽ.
template <class T>
void step_linear(Matrix<T>& values, T* z, T* phi_q, const T* a, const T* w, const T* v, T floor,
                 T* out, Index dv) {
  const Index n = values.rows();
  floor *= balance_features(phi_q, n);
  rows_axpy<true>(values.data(), dv, n, dv, a, w, v, phi_q, out);
  for (Index l = 0; l < n; ++l) z[l] = a[l] * z[l] + w[l];
  divide_by_denominator(out, dv, dot(phi_q, z, n), floor);
}

// A read of the memory step_linear has just advanced, by another query head sharing it: the same
// operations as step_linear's read, without the update (Ṽ is only read).
template <class T>
void read_linear(const Matrix<T>& values, const T* z, T* phi_q, T floor, T* out, Index dv) {
  const Index n = values.rows();
  floor *= balance_features(phi_q, n);
  weighted_rows(values.data(), dv, n, dv, phi_q, out);
  divide_by_denominator(out, dv, dot(phi_q, z, n), floor);
}

// (Ṽ, z) advanced over a chunk: Ṽ ← diag(D) Ṽ + Eᵀ v and z ← D ⊙ z + Σ_i E[i], for E the tokens'
// weights at the chunk's end [c × n] and D what the chunk leaves of the memory (null: no decay).
template <class T, class Weights>
void add_chunk_linear(Matrix<T>& values, Eigen::Ref<Vector<T>> z, const Weights& e, const T* dcum,
                      const Eigen::Ref<const Matrix<T>>& v) {
  add_values(values, e, dcum, v);
  if (dcum) z.array() *= Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>>(dcum, z.size());
  z += e.colwise().sum().transpose();
}

// Causal outputs of one chunk under the linear readout, then (Ṽ, z) advanced to the chunk's end.
// As causal_chunk, with the query features p_t = φ(q_t) in place of the softmax:
//   num_t = (p_t ⊙ D_t)ᵀ Ṽ_prev + Σ_{i≤t} (E_t[i]·p_t) v_i,
//   den_t = (p_t ⊙ D_t)·z_prev  + Σ_{i≤t} (E_t[i]·p_t).
// `heads` query heads read the memory: head g's features are in ws.read(g).prev (its [c × n] rows,
// scaled in place) and its outputs go to output(g).
template <class T, class OutputOf>
void causal_chunk_linear(Matrix<T>& values, Eigen::Ref<Vector<T>> z, ChunkWorkspace<T>& ws, Index c,
                         bool has_decay, Index heads, const OutputOf& output, const Eigen::Ref<const Matrix<T>>& v,
                         T floor) {
  const Index n = values.rows();
  for (Index g = 0; g < heads; ++g) {
    ReadScratch<T>& r = ws.read(g);
    r.mix.topLeftCorner(c, c).setZero();
    for (Index t = 0; t < c; ++t) r.floors(t) = floor * balance_features(r.prev.row(t).data(), r.prev.cols());
  }
  ws.dcum.setOnes();
  T* e = ws.eff.data();  // row i of E at e + i · n
  T* dcum = ws.dcum.data();
  for (Index t = 0; t < c; ++t) {
    const T* a = ws.decay.row(t).data();
    if (has_decay) {
      scale_rows(e, n, t, n, a);     // E_t[i] = a_t ⊙ E_{t−1}[i]
      scale_rows(dcum, n, 1, n, a);  // D_t = a_t ⊙ D_{t−1}
    }
    const T* w = ws.write.row(t).data();
    std::copy(w, w + n, e + t * n);  // E_t[t] = w_t
    for (Index g = 0; g < heads; ++g) {
      ReadScratch<T>& r = ws.read(g);
      const T* p = r.prev.row(t).data();
      T* pd = r.pd.row(t).data();
      for (Index l = 0; l < n; ++l) pd[l] = p[l] * dcum[l];
      T* mix = r.mix.row(t).data();
      rows_dot(e, n, t + 1, n, p, mix);  // p_t · E_t[i]
      T den = dot(pd, z.data(), n);
      for (Index i = 0; i <= t; ++i) den += mix[i];
      r.den(t) = den;
    }
  }
  for (Index g = 0; g < heads; ++g) {
    ReadScratch<T>& r = ws.read(g);
    auto out = output(g);
    product<false>(product_args(r.pd.topRows(c), values, out));
    product<true>(product_args(r.mix.topLeftCorner(c, c), v, out));
    for (Index t = 0; t < c; ++t) divide_by_denominator(out.row(t).data(), out.cols(), r.den(t), r.floors(t));
  }
  add_chunk_linear(values, z, ws.eff.topRows(c), has_decay ? dcum : nullptr, v);
}

// (Ṽ, z) advanced over one chunk without reads (the non-causal memory).
template <class T>
void advance_chunk_linear(Matrix<T>& values, Eigen::Ref<Vector<T>> z, ChunkWorkspace<T>& ws, Index c,
                          bool has_decay, const Eigen::Ref<const Matrix<T>>& v) {
  if (!has_decay) return add_chunk_linear(values, z, ws.write.topRows(c), static_cast<const T*>(nullptr), v);
  suffix_weights(ws, c);
  add_chunk_linear(values, z, ws.eff.topRows(c), ws.dcum.data(), v);
}

// Every query reads the finished memory: num = Φ(Q) Ṽ, den = Φ(Q) z.
template <class T>
void read_all_linear(const Matrix<T>& values, const Eigen::Ref<const Vector<T>>& z, Eigen::Ref<Matrix<T>> phi_q,
                     T floor, Eigen::Ref<Matrix<T>> out) {
  if (phi_q.rows() == 0) return;  // no queries: nothing to read (and no row of an empty buffer to form)
  Vector<T> floors(phi_q.rows());
  for (Index i = 0; i < phi_q.rows(); ++i) floors(i) = floor * balance_features(phi_q.row(i).data(), phi_q.cols());
  product<false>(product_args(phi_q, values, out));
  const Vector<T> den = phi_q * z;
  for (Index i = 0; i < out.rows(); ++i) divide_by_denominator(out.row(i).data(), out.cols(), den(i), floors(i));
}

}  // namespace kernel
ABC_NAMESPACE_END
