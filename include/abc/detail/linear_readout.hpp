// SPDX-License-Identifier: MIT
// abc: bounded-memory attention. Kernels of the linear readout φ(q)ᵀ Ṽ / (φ(q)·z) (random features).
#pragma once

#include <algorithm>

#include "../kernel/rows.hpp"
#include "../types.hpp"
#include "recurrence.hpp"

namespace abc {
namespace detail {

// The denominator rule. With a floor ε > 0 the denominator is max(den, ε) (the production choice
// for sin/cos features, whose estimate φ(q)·z can be ≤ 0; any floor breaks exactness). Without a
// floor the formula is used as it is, except that an exactly zero denominator, which would divide
// by zero, reads as the zero vector. Returns the factor to multiply the numerator by.
template <class T>
T inverse_denominator(T den, T floor) noexcept {
  if (floor > T(0)) den = std::max(den, floor);
  return den == T(0) ? T(0) : T(1) / den;
}

// One token: Ṽ ← diag(a) Ṽ + w ⊗ v, z ← a ⊙ z + w, out = φ(q)ᵀ Ṽ / (φ(q)·z). One pass over Ṽ.
template <class T>
void step_linear(Matrix<T>& values, T* z, const T* phi_q, const T* a, const T* w, const T* v, T floor,
                 T* out, Index dv) {
  const Index n = values.rows();
  kernel::rows_axpy<true>(values.data(), dv, n, dv, a, w, v, phi_q, out);
  T den = T(0);
  for (Index l = 0; l < n; ++l) {
    z[l] = a[l] * z[l] + w[l];
    den += phi_q[l] * z[l];
  }
  const T inv = inverse_denominator(den, floor);
  for (Index j = 0; j < dv; ++j) out[j] *= inv;
}

// Causal outputs of one chunk under the linear readout, then (Ṽ, z) advanced to the chunk's end.
// As causal_chunk, with the query features p_t = φ(q_t) in place of the softmax:
//   num_t = (p_t ⊙ D_t)ᵀ Ṽ_prev + Σ_{i≤t} (E_t[i]·p_t) v_i,
//   den_t = (p_t ⊙ D_t)·z_prev  + Σ_{i≤t} (E_t[i]·p_t).
template <class T>
void causal_chunk_linear(Matrix<T>& values, Eigen::Ref<Vector<T>> z, ChunkWorkspace<T>& ws, Index c,
                         bool has_decay, const Eigen::Ref<const Matrix<T>>& phi_q,
                         const Eigen::Ref<const Matrix<T>>& v, T floor, Eigen::Ref<Matrix<T>> out) {
  auto eff = ws.eff.topRows(c);
  auto mix = ws.mix.topLeftCorner(c, c);
  auto pd = ws.pd.topRows(c);
  mix.setZero();
  ws.dcum.setOnes();
  for (Index t = 0; t < c; ++t) {
    auto a = ws.decay.row(t);
    if (has_decay) {
      eff.topRows(t).array().rowwise() *= a.array();
      ws.dcum.array() *= a.array();
    }
    eff.row(t) = ws.write.row(t);
    pd.row(t) = phi_q.row(t).cwiseProduct(ws.dcum);
    mix.row(t).head(t + 1).noalias() = phi_q.row(t) * eff.topRows(t + 1).transpose();
    ws.den(t) = pd.row(t).dot(z.transpose()) + mix.row(t).head(t + 1).sum();
  }
  out.noalias() = pd * values;
  out.noalias() += mix * v;
  for (Index t = 0; t < c; ++t) out.row(t) *= inverse_denominator(ws.den(t), floor);
  if (has_decay) {
    values.array().colwise() *= ws.dcum.transpose().array();
    z.array() *= ws.dcum.transpose().array();
  }
  values.noalias() += eff.transpose() * v;
  z += eff.colwise().sum().transpose();
}

// (Ṽ, z) advanced over one chunk without reads (the non-causal memory).
template <class T>
void advance_chunk_linear(Matrix<T>& values, Eigen::Ref<Vector<T>> z, ChunkWorkspace<T>& ws, Index c,
                          bool has_decay, const Eigen::Ref<const Matrix<T>>& v) {
  auto eff = ws.eff.topRows(c);
  if (!has_decay) {
    values.noalias() += ws.write.topRows(c).transpose() * v;
    z += ws.write.topRows(c).colwise().sum().transpose();
    return;
  }
  ws.dcum.setOnes();
  for (Index t = c - 1; t >= 0; --t) {
    eff.row(t) = ws.write.row(t).cwiseProduct(ws.dcum);
    ws.dcum.array() *= ws.decay.row(t).array();
  }
  values.array().colwise() *= ws.dcum.transpose().array();
  z.array() *= ws.dcum.transpose().array();
  values.noalias() += eff.transpose() * v;
  z += eff.colwise().sum().transpose();
}

// Every query reads the finished memory: num = Φ(Q) Ṽ, den = Φ(Q) z.
template <class T>
void read_all_linear(const Matrix<T>& values, const Eigen::Ref<const Vector<T>>& z,
                     const Eigen::Ref<const Matrix<T>>& phi_q, T floor, Eigen::Ref<Matrix<T>> out) {
  out.noalias() = phi_q * values;
  const Vector<T> den = phi_q * z;
  for (Index i = 0; i < out.rows(); ++i) out.row(i) *= inverse_denominator(den(i), floor);
}

}  // namespace detail
}  // namespace abc
