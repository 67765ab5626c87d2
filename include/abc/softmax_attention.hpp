// SPDX-License-Identifier: MIT
// abc: bounded-memory attention. abc::SoftmaxAttention, exact attention blocked with an online softmax.
#pragma once

#include <algorithm>
#include <cmath>
#include <limits>

#include "config.hpp"
#include "detail/check.hpp"
#include "kernel/exp_sum.hpp"
#include "options.hpp"
#include "simd_arch.hpp"
#include "types.hpp"

ABC_NAMESPACE_BEGIN

/**
 * \brief Exact softmax attention, `softmax(scale · Q Kᵀ) V`, causal or not: the baseline every
 * bounded control is measured against.
 *
 * Not a strawman: queries and keys are processed in blocks (64 queries × 256 keys) through Eigen's
 * GEMM, with the online softmax of FlashAttention (running max and sum per query row, rescaling the
 * accumulator when the max rises), so the N × N score matrix is never materialised and memory is
 * O(block² + M · dv). Causal blocks above the diagonal are skipped, halving the work. Time stays
 * O(M · N · d): this is the quadratic cost bounded memory removes.
 *
 * \tparam T float or double.
 */
template <class T = float>
class SoftmaxAttention {
 public:
  /// float or double.
  using scalar_type = T;
  /// Queries per block of the kernel.
  static constexpr Index query_block = 64;
  /// Keys per block of the kernel.
  static constexpr Index key_block = 256;

  /// `scale` 0 means 1/sqrt(d). \throws config_error if it is negative or not finite.
  explicit SoftmaxAttention(double scale = 0.0) : scale_(scale) {
    detail::advise_isa_once();
    detail::require_scale("abc::SoftmaxAttention", "scale", scale);
  }

  /// Non-causal / cross: q [M × d], k [N × d], v [N × dv] → [M × dv]. A query with no key reads 0.
  Matrix<T> forward(MatrixRef<T> q, MatrixRef<T> k, MatrixRef<T> v) const {
    Matrix<T> out(q.rows(), v.cols());
    run(q, k, v, false, out);
    return out;
  }
  /// Causal: query t reads keys 0..t; q, k [N × d], v [N × dv] → [N × dv].
  Matrix<T> forward_causal(MatrixRef<T> q, MatrixRef<T> k, MatrixRef<T> v) const {
    Matrix<T> out(q.rows(), v.cols());
    run(q, k, v, true, out);
    return out;
  }
  /// As forward(q, k, v), into a caller-owned `out` [M × dv]. \throws shape_error, config_error
  void forward_into(MatrixRef<T> q, MatrixRef<T> k, MatrixRef<T> v, MatrixOut<T> out) const {
    run(q, k, v, false, out);
  }
  /// As forward_causal(q, k, v), into a caller-owned `out` [N × dv]. \throws shape_error, config_error
  void forward_causal_into(MatrixRef<T> q, MatrixRef<T> k, MatrixRef<T> v, MatrixOut<T> out) const {
    run(q, k, v, true, out);
  }

 private:
  void check(const MatrixRef<T>& q, const MatrixRef<T>& k, const MatrixRef<T>& v, bool causal,
             const MatrixOut<T>& out) const {
    const char* where = causal ? "abc::SoftmaxAttention::forward_causal" : "abc::SoftmaxAttention::forward";
    // The same rule as every operator: a zero-width query or value is a shape error.
    detail::Problem p;
    if (q.cols() < 1)
      p = detail::at_least(Status::shape_mismatch, "q.cols()", q.cols(), 1, "queries and keys need a column");
    else if (v.cols() < 1)
      p = detail::at_least(Status::shape_mismatch, "v.cols()", v.cols(), 1, "values need a column");
    if (!p) p = detail::shape_problem("k", k.rows(), k.cols(), k.rows(), q.cols(), "k.cols() must equal q.cols()");
    if (!p) p = detail::shape_problem("v", v.rows(), v.cols(), k.rows(), v.cols(),
                                      "v.rows() must equal k.rows(): one value per key");
    if (!p && causal)
      p = detail::shape_problem("q", q.rows(), q.cols(), k.rows(), q.cols(),
                                "causal attention reads one query per key");
    if (!p) p = detail::shape_problem("out", out.rows(), out.cols(), q.rows(), v.cols(),
                                      "the output buffer holds one row per query");
    if (!p) p = detail::finite_problem("q", q);
    if (!p) p = detail::finite_problem("k", k);
    if (!p) p = detail::finite_problem("v", v);
    if (p) detail::raise(where, p);
  }

  void run(const MatrixRef<T>& q, const MatrixRef<T>& k, const MatrixRef<T>& v, bool causal,
           MatrixOut<T> out) const {
    check(q, k, v, causal, out);
    constexpr T inf = std::numeric_limits<T>::infinity();
    const T sc = detail::read_scale<T>(scale_, q.cols());
    const Index m_rows = q.rows(), n_keys = k.rows();
    Matrix<T> s(query_block, key_block), acc(query_block, v.cols());
    Eigen::Array<T, Eigen::Dynamic, 1> row_max(query_block), row_sum(query_block), fix(query_block);
    for (Index q0 = 0; q0 < m_rows; q0 += query_block) {
      const Index rq = std::min(query_block, m_rows - q0);
      const Index k_end = causal ? q0 + rq : n_keys;
      auto a = acc.topRows(rq);
      a.setZero();
      row_max.head(rq).setConstant(-inf);
      row_sum.head(rq).setZero();
      for (Index k0 = 0; k0 < k_end; k0 += key_block) {
        const Index ck = std::min(key_block, k_end - k0);
        auto sb = s.topLeftCorner(rq, ck);
        sb.noalias() = sc * q.middleRows(q0, rq) * k.middleRows(k0, ck).transpose();
        if (causal && k0 + ck > q0 + 1)  // the block crosses the diagonal: hide keys after the query
          for (Index i = 0; i < rq; ++i)
            for (Index j = std::max<Index>(q0 + i + 1 - k0, 0); j < ck; ++j) sb(i, j) = -inf;
        for (Index i = 0; i < rq; ++i) {
          const T m_new = std::max(row_max[i], sb.row(i).maxCoeff());
          // m_new is finite: every row has at least one visible key (key q0 + i ≥ k0 when causal).
          fix[i] = row_max[i] == -inf ? T(0) : std::exp(row_max[i] - m_new);
          row_sum[i] = row_sum[i] * fix[i] + kernel::exp_sum(&sb(i, 0), ck, m_new);  // rows are contiguous
          row_max[i] = m_new;
        }
        a.array().colwise() *= fix.head(rq);
        a.noalias() += sb * v.middleRows(k0, ck);
      }
      // Each row's sum is ≥ 1 (its max term is exp(0)) unless it saw no key at all: then it reads 0.
      for (Index i = 0; i < rq; ++i)
        out.row(q0 + i) = row_sum[i] > 0 ? (a.row(i) / row_sum[i]).eval() : Vector<T>::Zero(v.cols()).transpose().eval();
    }
  }

  double scale_;
};

ABC_NAMESPACE_END
