// SPDX-License-Identifier: MIT
// abc: bounded-memory attention. abc::GlobalMemoryAttention, M global memory tokens next to L main
// tokens under a sparse local pattern (GMAT).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "detail/check.hpp"
#include "kernel/softmax_slots.hpp"
#include "kernel/recurrence.hpp"
#include "error.hpp"
#include "local_pattern.hpp"
#include "options.hpp"
#include "types.hpp"

ABC_NAMESPACE_BEGIN

/**
 * \brief GMAT (Gupta and Berant): M memory tokens and L main tokens, one layer of one head.
 *
 *   main row i   = softmax over [main tokens in pattern.range(i) ; all memory tokens] (one softmax)
 *   memory row t = softmax over all L + M tokens
 *
 * i.e. dense attention over the concatenation [X ; X_M] with the additive mask [[B, 0], [0, 0]].
 * With M = 0 and LocalPattern::full() it is vanilla attention. Bidirectional only: the memory sees
 * the whole sequence, so there is no causal form (a design decision: the paper leaves it open).
 *
 * Built on the core's read: a block of main queries reads a gathered memory [its main keys ; the
 * M memory keys] — one-hot slots of an ABC memory, the local part then the global-token part, as
 * in control::Concat — through kernel::read_all, each query limited to its pattern by a slot range
 * (two ranges for a window row in mid-sequence: its band, then the memory). A chunk is read with
 * one C × (C + M) product; memory rows read all L + M slots. Work is Σ_i |B_i| + 2LM + M² scores
 * (score_count), instead of (L + M)².
 *
 * \tparam Scalar float or double.
 */
template <class Scalar = float>
class GlobalMemoryAttention {
 public:
  /// float or double.
  using scalar_type = Scalar;

  /// Main rows and memory rows of one call.
  struct Output {
    Matrix<Scalar> main;    ///< [L × dv]
    Matrix<Scalar> memory;  ///< [M × dv]
  };

  /// `scale` 0 means 1/sqrt(d). \throws config_error if it is negative or not finite.
  explicit GlobalMemoryAttention(LocalPattern pattern, double scale = 0.0) : pattern_(pattern), scale_(scale) {
    detail::require_scale("abc::GlobalMemoryAttention", "scale", scale);
  }

  /// The main → main pattern B, as given to the constructor.
  const LocalPattern& pattern() const noexcept { return pattern_; }

  /**
   * \brief Main rows and memory rows.
   * \param q_x main queries, [L × d]
   * \param k_x main keys, [L × d]
   * \param v_x main values, [L × dv]
   * \param q_m memory queries, [M × d]
   * \param k_m memory keys, [M × d]
   * \param v_m memory values, [M × dv]
   * \return main [L × dv] and memory [M × dv] rows. L or M may be 0.
   * \throws shape_error, config_error
   */
  Output forward(MatrixRef<Scalar> q_x, MatrixRef<Scalar> k_x, MatrixRef<Scalar> v_x, MatrixRef<Scalar> q_m,
                 MatrixRef<Scalar> k_m, MatrixRef<Scalar> v_m) const {
    Output o{Matrix<Scalar>(q_x.rows(), v_x.cols()), Matrix<Scalar>(q_m.rows(), v_x.cols())};
    forward_into(q_x, k_x, v_x, q_m, k_m, v_m, o.main, o.memory);
    return o;
  }
  /// Main rows only (the last layer: the memory update's M(L + M) scores are skipped).
  Matrix<Scalar> forward_main(MatrixRef<Scalar> q_x, MatrixRef<Scalar> k_x, MatrixRef<Scalar> v_x,
                              MatrixRef<Scalar> k_m, MatrixRef<Scalar> v_m) const {
    Matrix<Scalar> out(q_x.rows(), v_x.cols());
    check(q_x, k_x, v_x, nullptr, k_m, v_m, out.rows(), out.cols(), nullptr);
    run_main(q_x, k_x, v_x, k_m, v_m, out);
    return out;
  }
  /// Allocation of the outputs left to the caller: out_x [L × dv], out_m [M × dv].
  void forward_into(MatrixRef<Scalar> q_x, MatrixRef<Scalar> k_x, MatrixRef<Scalar> v_x, MatrixRef<Scalar> q_m,
                    MatrixRef<Scalar> k_m, MatrixRef<Scalar> v_m, MatrixOut<Scalar> out_x,
                    MatrixOut<Scalar> out_m) const {
    check(q_x, k_x, v_x, &q_m, k_m, v_m, out_x.rows(), out_x.cols(), &out_m);
    run_main(q_x, k_x, v_x, k_m, v_m, out_x);
    run_memory(q_m, k_x, v_x, k_m, v_m, out_m);
  }

  /// Scores one head and layer computes: Σ_i |B_i| + L·M (+ M·(L + M) with the memory rows);
  /// L·C + 2LM + M² for chunked(C) with C | L.
  // NOLINTNEXTLINE(bugprone-easily-swappable-parameters): private: L tokens, M memory rows, as in the paper
  static std::uint64_t score_count(const LocalPattern& pattern, Index L, Index M, bool memory_rows = true) {
    const std::uint64_t l = std::uint64_t(L), m = std::uint64_t(M);
    return pattern.main_scores(L) + l * m + (memory_rows ? m * (l + m) : 0);
  }

 private:
  static constexpr Index kBlock = 64;  // main queries per read (bounds the logits to 64 × span)

  // Every check, before anything is computed.
  void check(const MatrixRef<Scalar>& q_x, const MatrixRef<Scalar>& k_x, const MatrixRef<Scalar>& v_x,
             const MatrixRef<Scalar>* q_m, const MatrixRef<Scalar>& k_m, const MatrixRef<Scalar>& v_m,
             Index out_rows, Index out_cols, const MatrixOut<Scalar>* out_m) const {
    if (auto p = problem(q_x, k_x, v_x, q_m, k_m, v_m, out_rows, out_cols, out_m))
      detail::raise("abc::GlobalMemoryAttention", p);
  }

  static detail::Problem problem(const MatrixRef<Scalar>& q_x, const MatrixRef<Scalar>& k_x,
                                 const MatrixRef<Scalar>& v_x, const MatrixRef<Scalar>* q_m,
                                 const MatrixRef<Scalar>& k_m, const MatrixRef<Scalar>& v_m, Index out_rows,
                                 Index out_cols, const MatrixOut<Scalar>* out_m) noexcept {
    using detail::shape_problem;
    const Index L = k_x.rows(), M = k_m.rows(), d = k_x.cols(), dv = v_x.cols();
    if (d < 1) return detail::at_least(Status::shape_mismatch, "k_x.cols()", d, 1, "keys need a column");
    if (dv < 1) return detail::at_least(Status::shape_mismatch, "v_x.cols()", dv, 1, "values need a column");
    if (auto p = shape_problem("q_x", q_x.rows(), q_x.cols(), L, d, "one query per main token (k_x.rows()), of the key width"))
      return p;
    if (auto p = shape_problem("v_x", v_x.rows(), v_x.cols(), L, dv, "one value per main token (k_x.rows())"))
      return p;
    if (auto p = shape_problem("k_m", k_m.rows(), k_m.cols(), M, d, "memory keys have the main keys' width"))
      return p;
    if (auto p = shape_problem("v_m", v_m.rows(), v_m.cols(), M, dv,
                               "one value per memory token (k_m.rows()), of v_x's width"))
      return p;
    if (q_m)
      if (auto p = shape_problem("q_m", q_m->rows(), q_m->cols(), M, d,
                                 "one query per memory token (k_m.rows()), of the key width"))
        return p;
    if (auto p = shape_problem("out_x", out_rows, out_cols, L, dv, "the output holds one row per main token"))
      return p;
    if (out_m)
      if (auto p = shape_problem("out_m", out_m->rows(), out_m->cols(), M, dv,
                                 "the output holds one row per memory token"))
        return p;
    if (auto p = detail::finite_problem("q_x", q_x)) return p;
    if (auto p = detail::finite_problem("k_x", k_x)) return p;
    if (auto p = detail::finite_problem("v_x", v_x)) return p;
    if (auto p = detail::finite_problem("k_m", k_m)) return p;
    if (auto p = detail::finite_problem("v_m", v_m)) return p;
    if (q_m)
      if (auto p = detail::finite_problem("q_m", *q_m)) return p;
    return {};
  }

  Scalar scale(Index d) const noexcept { return detail::read_scale<Scalar>(scale_, d); }

  // NOLINTNEXTLINE(bugprone-easily-swappable-parameters): q, k, v in the attention order of every public form
  void run_main(const MatrixRef<Scalar>& q, const MatrixRef<Scalar>& k_x, const MatrixRef<Scalar>& v_x,
                const MatrixRef<Scalar>& k_m, const MatrixRef<Scalar>& v_m, MatrixOut<Scalar> out) const {
    const Index L = q.rows(), M = k_m.rows();
    const Scalar sc = scale(k_x.cols());
    const std::vector<std::uint8_t> none;  // reads are not masked by occupancy: every slot is a token
    Matrix<Scalar> keys, values;
    Index s0 = -1, s1 = -1;  // main tokens [s0, s1) currently gathered
    const Index block = pattern_.kind() == LocalPattern::Kind::chunked ? pattern_.chunk_size() : kBlock;
    for (Index i0 = 0; i0 < L; i0 += block) {
      const Index rows = std::min(block, L - i0);
      const Index lo = pattern_.range(i0, L).first, hi = pattern_.range(i0 + rows - 1, L).second;
      if (lo != s0 || hi != s1) {  // the memory [main keys lo..hi ; memory keys]; full: gathered once
        s0 = lo;
        s1 = hi;
        keys.resize(hi - lo + M, k_x.cols());
        values.resize(hi - lo + M, v_x.cols());
        keys.topRows(hi - lo) = k_x.middleRows(lo, hi - lo);
        keys.bottomRows(M) = k_m;
        values.topRows(hi - lo) = v_x.middleRows(lo, hi - lo);
        values.bottomRows(M) = v_m;
      }
      const Index span = s1 - s0;
      auto range_of = [&](Index r) {
        const auto b = pattern_.range(i0 + r, L);
        // Band then memory: one range when the band ends where the memory starts, else two.
        if (b.second == s1) return kernel::SlotRange{b.first - s0, span + M};
        return kernel::SlotRange{b.first - s0, b.second - s0, span, span + M};
      };
      kernel::read_all<Scalar>(keys, values, none, false, range_of, sc, q.middleRows(i0, rows),
                               out.middleRows(i0, rows));
    }
  }

  // NOLINTNEXTLINE(bugprone-easily-swappable-parameters): q, k, v in the attention order of every public form
  void run_memory(const MatrixRef<Scalar>& q_m, const MatrixRef<Scalar>& k_x, const MatrixRef<Scalar>& v_x,
                  const MatrixRef<Scalar>& k_m, const MatrixRef<Scalar>& v_m, MatrixOut<Scalar> out) const {
    const Index L = k_x.rows(), M = k_m.rows();
    if (M == 0) return;
    Matrix<Scalar> keys(L + M, k_x.cols()), values(L + M, v_x.cols());
    keys.topRows(L) = k_x;
    keys.bottomRows(M) = k_m;
    values.topRows(L) = v_x;
    values.bottomRows(M) = v_m;
    const std::vector<std::uint8_t> none;
    auto all = [&](Index) { return kernel::SlotRange{0, L + M}; };
    kernel::read_all<Scalar>(keys, values, none, false, all, scale(k_x.cols()), q_m, out);
  }

  LocalPattern pattern_;
  double scale_;
};

ABC_NAMESPACE_END
