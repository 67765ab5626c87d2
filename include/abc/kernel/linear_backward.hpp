// SPDX-License-Identifier: MIT
// abc: bounded-memory attention. kernel::LinearBackward, the gradients of the linear-readout memory.
#pragma once

#include <algorithm>

#include "../concepts.hpp"
#include "../detail/control_kind.hpp"
#include "../detail/state_access.hpp"
#include "../gradients.hpp"
#include "../options.hpp"
#include "../schedule_tape.hpp"
#include "../state.hpp"
#include "../state_gradient.hpp"
#include "../types.hpp"
#include "recurrence.hpp"

ABC_NAMESPACE_BEGIN
namespace kernel {
// NOLINTBEGIN(bugprone-easily-swappable-parameters)

/**
 * \brief The backward passes of a memory read linearly (RFA, `readout = Readout::linear`;
 * BoundedAttention::backward and backward_causal): the gradients with respect to q, k, v, the
 * control input, the control's parameters and the state a causal call continued, given ∂L/∂out.
 *
 * The value memory and the normaliser z follow the same recurrence, so they are carried as one
 * matrix S' = [Ṽ z] [n × (dv + 1)] written by v'_t = [v_t, 1]:
 *     S'_t = diag(a_t) S'_{t−1} + w_t v'_tᵀ,    with w_t, a_t from the control's key_schedule.
 * A read with features p = φ(q) forms [num, den] = S'ᵀ p and out = num / den', where
 * den' = max(den, ε) with a floor ε > 0 and den' = den without one. Given do = ∂L/∂out:
 *     dn' = [do / den', dden],  dden = −(do · out) / den'   (0 where the floor is active, den < ε),
 *     ∂L/∂p = S' dn',   ∂L/∂S' += p dn'ᵀ.
 * With the floor off and den exactly 0 the output reads 0 whatever the memory and the query hold
 * (kernel::divide_by_denominator); its gradient is defined as 0 there. Elsewhere the gradients are
 * those of the formula; they scale as 1/den', so without a floor they grow without bound as the
 * denominator (which sin/cos features can take through 0) approaches 0: a floor keeps them bounded.
 *
 * The recurrence runs backwards as the softmax readout's does (kernel::SoftmaxBackward): with
 * G_t = ∂L/∂S'_t (the reads at t and later, and ∂L/∂(the state the call leaves)),
 *     G_{t−1} = R_{t−1} + diag(a_t) G_t,   ∂L/∂v_t = (G_tᵀ w_t) without its last entry,
 *     ∂L/∂w_t = G_t v'_t,   ∂L/∂log a_t = h_t − w_t ⊙ ∂L/∂w_t,   h_t = rowsum(G_t ⊙ S'_t),
 * and h_t = e_t + h_{t+1} − w_{t+1} ⊙ ∂L/∂w_{t+1} with e_t = p_t ⊙ ∂L/∂p_t (what the read at t gives),
 * so ∂L/∂log a_t is a suffix sum that needs no state before the token. The control then takes
 * ∂L/∂φ(q), ∂L/∂w and ∂L/∂log a through its features and gate (`features_backward`).
 *
 * Non-causal: every query reads the final memory, so R is zero inside the sequence and the final
 * G is Σ_t p_t dn'_tᵀ. Causal: computed by chunks as the forward pass is, in two sweeps:
 * - a forward sweep, from the state the call starts with, recomputes each chunk's reads from the
 *   chunk's starting memory and its own tokens (masked C × C products), and forms ∂L/∂p_t, e_t,
 *   the chunk-local parts of ∂L/∂v and ∂L/∂w, and per token D_t ⊙ p_t (D_t the decay since the
 *   chunk's start) and dn'_t, by which the reads reach the memory the chunk started from;
 * - a reverse sweep carries G (n × (dv + 1)) from the last chunk to the first and adds the parts of
 *   ∂L/∂v and ∂L/∂w that later chunks give. Its final G is the gradient with respect to the start
 *   state: Ṽ's in `values`, z's in row 1 of `slot_state` (where the state keeps z).
 *
 * Memory: the schedule and four more rows of n per token, dn' [N × (dv + 1)] and v' (the values
 * with a column of ones), O(N · (n + dv)), and one chunk's C × C and C × n buffers; nothing of size
 * N × n × d. Time O(N · n · (d + dv) + N · C · n).
 */
template <class Control>
class LinearBackward {
  using T = typename Control::scalar_type;
  static constexpr bool has_decay = detail::decay_flag<Control>::value;
  using Access = detail::StateAccess;
  using Row = Eigen::Matrix<T, 1, Eigen::Dynamic>;

 public:
  LinearBackward(const Control& control, const Options& options) noexcept : control_(control), options_(options) {}

  /// Non-causal: every query of q reads the memory of all N tokens; `dout` is ∂L/∂out [M × dv].
  void non_causal(const MatrixRef<T>& q, const MatrixRef<T>& k, const MatrixRef<T>& v, const MatrixRef<T>& input,
                  bool has_input, const MatrixRef<T>& dout, Gradients<Control>& g) const {
    const Index n_tok = k.rows(), n = control_.num_slots(), dv = v.cols();
    const State<T> start = Access::empty<T>(n, 0, dv, &detail::control_kind_v<Control>);
    Tape tp(n_tok, n, 0, dv);
    const Matrix<T> vp = with_ones(v);
    size(g, q, k, v);
    Matrix<T> mem = Matrix<T>::Zero(n, dv + 1);  // S' = [Ṽ z], built block by block as the forward pass does
    const Index chunk = std::max<Index>(1, std::min(build_block, n_tok));
    Buffers b(chunk, n, dv + 1);
    for (Index t0 = 0; t0 < n_tok; t0 += chunk) {
      const Index c = std::min(chunk, n_tok - t0);
      auto a = tp.decay.middleRows(t0, c);
      auto w = tp.write.middleRows(t0, c);
      control_.key_schedule(t0, k.middleRows(t0, c), input.middleRows(t0, c), a, w);
      suffix_weights(a, w, c, b);
      if (has_decay) mem.array().colwise() *= b.dcum.transpose().array();
      mem.noalias() += b.eff.topRows(c).transpose() * vp.middleRows(t0, c);
    }
    // Every query reads it (kernel::read_all_linear), and the reads' gradients.
    Matrix<T> p(q.rows(), n);
    control_.query_features(q, p);
    Matrix<T> dn(q.rows(), dv + 1);
    {
      const Matrix<T> numden = p * mem;
      for (Index i = 0; i < q.rows(); ++i) read_gradient(numden.row(i), dout.row(i), dn.row(i));
    }
    const Matrix<T> dp = dn * mem.transpose();
    Matrix<T> grad = p.transpose() * dn;
    Row u = grad.cwiseProduct(mem).rowwise().sum().transpose();
    const Index last = n_tok == 0 ? 0 : ((n_tok - 1) / chunk) * chunk;
    for (Index t0 = last; t0 >= 0 && n_tok > 0; t0 -= chunk)
      reverse_chunk(t0, std::min(chunk, n_tok - t0), false, vp, grad, u, tp, b, g);
    chain(start, q, dp, k, input, has_input, tp, g);
  }

  /// Causal, continuing `start` (left unchanged); `d_end` is the gradient with respect to the state
  /// the call leaves (empty: none; its slot_state row 1 is ∂L/∂z, row 0 is not read). Sets g.state
  /// to the gradient with respect to `start`.
  void causal(const State<T>& start, const MatrixRef<T>& q, const MatrixRef<T>& k, const MatrixRef<T>& v,
              const MatrixRef<T>& input, bool has_input, const MatrixRef<T>& dout, const StateGradient<T>& d_end,
              Gradients<Control>& g) const {
    const Index n_tok = k.rows(), n = control_.num_slots(), dv = v.cols();
    Tape tp(n_tok, n, n_tok, dv);
    const Matrix<T> vp = with_ones(v);
    size(g, q, k, v);
    Matrix<T> mem(n, dv + 1);  // S', advanced by the forward sweep to the memory the call leaves
    mem << start.values(), Access::slot_state(start).row(1).transpose();
    const Index chunk = std::max<Index>(1, std::min(options_.chunk, n_tok));
    Buffers b(chunk, n, dv + 1);
    Matrix<T> dp(n_tok, n);  // ∂L/∂φ(q_t)
    for (Index t0 = 0; t0 < n_tok; t0 += chunk)
      forward_chunk(mem, start.position() + t0, std::min(chunk, n_tok - t0), t0, q, k, vp, input, dout, dp, tp, b, g);

    Matrix<T> grad(n, dv + 1);  // G = ∂L/∂S', carried from the memory the call leaves back to `start`
    if (d_end.empty())
      grad.setZero();
    else
      grad << d_end.values, d_end.slot_state.row(1).transpose();
    Row u = grad.cwiseProduct(mem).rowwise().sum().transpose();
    const Index last = n_tok == 0 ? 0 : ((n_tok - 1) / chunk) * chunk;
    for (Index t0 = last; t0 >= 0 && n_tok > 0; t0 -= chunk)
      reverse_chunk(t0, std::min(chunk, n_tok - t0), true, vp, grad, u, tp, b, g);
    chain(start, q, dp, k, input, has_input, tp, g);
    g.state.keys.setZero(n, start.key_dim());
    g.state.values = grad.leftCols(dv);
    g.state.slot_state = Matrix<T>::Zero(2, n);
    g.state.slot_state.row(1) = grad.col(dv).transpose();
  }

 private:
  // What the sweeps leave for each other and for the control, per token.
  struct Tape {
    Matrix<T> decay, write;  // the schedule [N × n]
    Matrix<T> pd;            // D_t ⊙ p_t (causal only) [N × n]
    Matrix<T> dn;            // dn'_t (causal only) [N × (dv + 1)]
    Matrix<T> e;             // e_t, then ∂L/∂log a_t [N × n]
    Matrix<T> dw;            // ∂L/∂w_t [N × n]
    Tape(Index rows, Index n, Index reads, Index dv)
        : decay(rows, n), write(rows, n), pd(reads, n), dn(reads, dv + 1), e(Matrix<T>::Zero(rows, n)),
          dw(Matrix<T>::Zero(rows, n)) {}
  };

  // One chunk's buffers, sized once per call.
  struct Buffers {
    Matrix<T> mix, dov;                // [C × C]
    Matrix<T> p, eff, cum, prev, tmp;  // [C × n]
    Matrix<T> share;                   // [C × (dv + 1)]
    Row dcum;
    Buffers(Index c, Index n, Index width)
        : mix(c, c), dov(c, c), p(c, n), eff(c, n), cum(c, n), prev(c, n), tmp(c, n), share(c, width), dcum(n) {}
  };

  // The readout's denominator floor (0: off), when the control has one.
  T floor() const noexcept {
    if constexpr (detail::has_denominator_floor<Control>::value)
      return control_.denominator_floor();
    else
      return T(0);
  }

  // v' = [v, 1]: the values with the normaliser's column.
  static Matrix<T> with_ones(const MatrixRef<T>& v) {
    Matrix<T> vp(v.rows(), v.cols() + 1);
    // No comma initializer: with no rows its blocks would offset a null pointer.
    if (v.rows() > 0) vp << v, Vector<T>::Ones(v.rows());
    return vp;
  }

  // ∂L/∂q and ∂L/∂k are summed into (by the control); ∂L/∂v is summed into here.
  static void size(Gradients<Control>& g, const MatrixRef<T>& q, const MatrixRef<T>& k, const MatrixRef<T>& v) {
    g.q.setZero(q.rows(), q.cols());
    g.k.setZero(k.rows(), k.cols());
    g.v.setZero(v.rows(), v.cols());
  }

  // dn' of one read from its [num, den] and ∂L/∂out (the denominator rule of divide_by_denominator).
  template <class ND, class DO, class DN>
  void read_gradient(const ND& numden, const DO& dout, DN&& dn) const {
    const Index dv = dout.size();
    const T den = numden(dv), fl = floor();
    const bool floored = fl > T(0) && den < fl;
    const T den_used = floored ? fl : den;
    if (den_used == T(0)) {  // the output reads 0: gradient 0 by definition
      dn.setZero();
      return;
    }
    T along = T(0);  // do · out
    for (Index j = 0; j < dv; ++j) {
      dn(j) = dout(j) / den_used;
      along += dout(j) * (numden(j) / den_used);
    }
    dn(dv) = floored ? T(0) : -along / den_used;
  }

  // For the c tokens of decays a and writes w: what is left of token i's write at the end,
  // cum_i = Π_{j>i} a_j, and its weight there, eff_i = w_i ⊙ cum_i; dcum = Π_j a_j. Products only,
  // as kernel::suffix_weights.
  template <class A, class W>
  static void suffix_weights(const A& a, const W& w, Index c, Buffers& b) {
    b.dcum.setOnes();
    for (Index t = c - 1; t >= 0; --t) {
      b.cum.row(t) = b.dcum;
      if (has_decay) b.dcum.array() *= a.row(t).array();
    }
    b.eff.topRows(c).array() = w.array() * b.cum.topRows(c).array();
  }

  // Tokens t0 .. t0 + c − 1 of the call (absolute position `pos` for the first): the chunk's reads
  // recomputed from the memory `mem` and the chunk's tokens, their gradients, then `mem` advanced.
  // Within the chunk, token i's write reaches the read at t ≥ i with weight eff_t[i] = w_i ⊙ cum_t[i],
  // cum_t[i] = Π_{i<j≤t} a_j, and the memory before the chunk with D_t = Π_{j≤t} a_j:
  //     [num_t, den_t] = (D_t ⊙ p_t)ᵀ S' + Σ_{i≤t} (p_t · eff_t[i]) v'_i,
  //     ∂L/∂p_t = D_t ⊙ (S' dn'_t) + Σ_{i≤t} (v'_i · dn'_t) eff_t[i],
  //     ∂L/∂w_i += Σ_{t≥i} (v'_i · dn'_t) cum_t[i] ⊙ p_t,   ∂L/∂v'_i += Σ_{t≥i} (p_t · eff_t[i]) dn'_t.
  void forward_chunk(Matrix<T>& mem, Index pos, Index c, Index t0, const MatrixRef<T>& q, const MatrixRef<T>& k,
                     const Matrix<T>& vp, const MatrixRef<T>& input, const MatrixRef<T>& dout, Matrix<T>& dp,
                     Tape& tp, Buffers& b, Gradients<Control>& g) const {
    const Index dv = vp.cols() - 1;
    auto a = tp.decay.middleRows(t0, c);
    auto w = tp.write.middleRows(t0, c);
    control_.key_schedule(pos, k.middleRows(t0, c), input.middleRows(t0, c), a, w);
    auto p = b.p.topRows(c);
    control_.query_features(q.middleRows(t0, c), p);
    const auto vc = vp.middleRows(t0, c);
    auto mix = b.mix.topLeftCorner(c, c);
    auto dov = b.dov.topLeftCorner(c, c);
    auto pd = tp.pd.middleRows(t0, c);
    auto dn = tp.dn.middleRows(t0, c);
    // The reads: mix[t, i] = p_t · eff_t[i], pd_t = D_t ⊙ p_t.
    mix.setZero();
    b.dcum.setOnes();
    for (Index t = 0; t < c; ++t) {
      if (has_decay) {
        b.eff.topRows(t).array().rowwise() *= a.row(t).array();
        b.dcum.array() *= a.row(t).array();
      }
      b.eff.row(t) = w.row(t);
      pd.row(t) = p.row(t).cwiseProduct(b.dcum);
      mix.row(t).head(t + 1).noalias() = p.row(t) * b.eff.topRows(t + 1).transpose();
    }
    {
      Matrix<T> numden = pd * mem;
      numden.noalias() += mix * vc;
      for (Index t = 0; t < c; ++t) read_gradient(numden.row(t), dout.row(t0 + t), dn.row(t));
    }
    // Their gradients.
    dov.noalias() = dn * vc.transpose();
    b.prev.topRows(c).noalias() = dn * mem.transpose();
    b.dcum.setOnes();
    for (Index t = 0; t < c; ++t) {
      if (has_decay) {
        b.eff.topRows(t).array().rowwise() *= a.row(t).array();
        b.cum.topRows(t).array().rowwise() *= a.row(t).array();
        b.dcum.array() *= a.row(t).array();
      }
      b.eff.row(t) = w.row(t);
      b.cum.row(t).setOnes();
      auto dpt = dp.row(t0 + t);
      dpt.array() = b.dcum.array() * b.prev.row(t).array();
      for (Index i = 0; i <= t; ++i) {
        dpt.noalias() += dov(t, i) * b.eff.row(i);
        tp.dw.row(t0 + i).array() += dov(t, i) * b.cum.row(i).array() * p.row(t).array();
      }
      tp.e.row(t0 + t).array() = p.row(t).array() * dpt.array();
    }
    g.v.middleRows(t0, c).noalias() += (mix.transpose() * dn).leftCols(dv);
    // The memory after the chunk: b.eff now holds each token's weight at the chunk's end.
    if (has_decay) mem.array().colwise() *= b.dcum.transpose().array();
    mem.noalias() += b.eff.topRows(c).transpose() * vc;
  }

  // Tokens t0 .. t0 + c − 1 in reverse, with `grad` = G for the memory after the chunk: the parts
  // of ∂L/∂v and ∂L/∂w it gives, then `grad` moved to the memory before the chunk (with the chunk's
  // reads of that memory, when `reads`), and ∂L/∂log a for the chunk's tokens (the running suffix
  // sum u).
  void reverse_chunk(Index t0, Index c, bool reads, const Matrix<T>& vp, Matrix<T>& grad, Row& u, Tape& tp,
                     Buffers& b, Gradients<Control>& g) const {
    const Index dv = vp.cols() - 1;
    const auto a = tp.decay.middleRows(t0, c);
    const auto w = tp.write.middleRows(t0, c);
    suffix_weights(a, w, c, b);
    auto share = b.share.topRows(c);
    share.noalias() = b.eff.topRows(c) * grad;
    g.v.middleRows(t0, c) += share.leftCols(dv);
    auto tmp = b.tmp.topRows(c);
    tmp.noalias() = vp.middleRows(t0, c) * grad.transpose();
    tp.dw.middleRows(t0, c).array() += b.cum.topRows(c).array() * tmp.array();
    if (has_decay) grad.array().colwise() *= b.dcum.transpose().array();
    if (reads) grad.noalias() += tp.pd.middleRows(t0, c).transpose() * tp.dn.middleRows(t0, c);
    for (Index t = c - 1; t >= 0; --t) {
      u.array() += tp.e.row(t0 + t).array() - w.row(t).array() * tp.dw.row(t0 + t).array();
      tp.e.row(t0 + t) = u;
    }
  }

  // The chain rule through the control's features and gate: ∂L/∂q, ∂L/∂k, ∂L/∂x (into g.x, or into
  // g.k when the control read the keys) and the parameters.
  void chain(const State<T>& start, const MatrixRef<T>& q, const Matrix<T>& dp, const MatrixRef<T>& k,
             const MatrixRef<T>& input, bool has_input, const Tape& tp, Gradients<Control>& g) const {
    Matrix<T> dx = Matrix<T>::Zero(input.rows(), input.cols());
    const ScheduleTape<T> tape{start.position(), input,    Access::slot_state(start), Access::positions(start),
                               tp.decay,         tp.write, tp.e,                      tp.dw};
    control_.features_backward(tape, q, dp, k, g.q, g.k, dx, g.control);
    if (has_input)
      g.x = std::move(dx);
    else
      g.k += dx;
  }

  const Control& control_;
  const Options& options_;
};

// NOLINTEND(bugprone-easily-swappable-parameters)
}  // namespace kernel
ABC_NAMESPACE_END
