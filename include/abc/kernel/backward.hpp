// SPDX-License-Identifier: MIT
// abc: bounded-memory attention. kernel::SoftmaxBackward, the gradients of the softmax-readout memory.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "../concepts.hpp"
#include "../detail/compose.hpp"
#include "../detail/control_kind.hpp"
#include "../detail/state_access.hpp"
#include "../gradients.hpp"
#include "../options.hpp"
#include "../schedule_tape.hpp"
#include "../state.hpp"
#include "../types.hpp"
#include "recurrence.hpp"
#include "softmax_slots.hpp"

ABC_NAMESPACE_BEGIN
namespace kernel {
// NOLINTBEGIN(bugprone-easily-swappable-parameters)

/**
 * \brief The backward passes of a memory read by a softmax over slots (BoundedAttention::backward
 * and backward_causal): the gradients with respect to q, k, v, the control input, the control's
 * parameters and the state a causal call continued, given ∂L/∂out.
 *
 * With the forward pass's notation (kernel/recurrence.hpp), l_t = scale · K̃_t q_t, p_t = softmax(l_t)
 * over the readable slots, out_t = Ṽ_tᵀ p_t, and dl_t = p_t ⊙ (dp_t − p_t·dp_t) with dp_t = Ṽ_t do_t,
 * the gradients are those of the recurrence run backwards: G_t = ∂L/∂K̃_t = scale dl_t q_tᵀ +
 * diag(a_{t+1}) G_{t+1} (the same for Ṽ with p_t do_tᵀ), dk_t = G_tᵀ w_t, dw_t = G_t k_t + G^V_t v_t.
 * They are computed by chunks, as the forward pass is, in two sweeps:
 *
 * - a forward sweep from the state the call starts with, chunk by chunk, recomputes each chunk's
 *   reads and everything that needs the forward memory: dq, the chunk-local parts of dk, dv and dw
 *   (masked C × C products), and per token the rows D_t ⊙ dl_t and D_t ⊙ p_t (D_t the decay since
 *   the chunk's start), by which the chunk's reads reach the memory it started from;
 * - a reverse sweep carries G (n × d, and n × dv) from the last chunk to the first and adds the
 *   parts of dk, dv and dw that later chunks give.
 *
 * The gradient with respect to log a_t needs no state before the token: with B_t = Σ_{j≤t} log a_j,
 * each token's weight in K̃_t is w_i exp(B_t − B_i), so ∂L/∂B_t = e_t − w_t ⊙ dw_t with
 * e_t = dl_t ⊙ l_t + p_t ⊙ dp_t (what the read at t gives the whole memory it read), and
 * ∂L/∂log a_j = Σ_{t≥j} ∂L/∂B_t. Each token's decay and write products are formed by products
 * only, as in the forward kernel (exact for decays of 0 and any underflow).
 *
 * Memory: the schedule and up to four more rows of n per token of one block of
 * Options::backward_block tokens (a longer call is differentiated block by block, last block first,
 * from the states at the blocks' starts), one saved state of n × (d + dv) per block, and one chunk's
 * C × C and C × n buffers: flat in N up to the saved states; nothing of size N × n × d. Controls
 * whose parameter gradient has no `+=` are differentiated as one block.
 */
template <class Control>
class SoftmaxBackward {
  using T = typename Control::scalar_type;
  static constexpr bool has_decay = detail::decay_flag<Control>::value;
  using Access = detail::StateAccess;
  using Row = Eigen::Matrix<T, 1, Eigen::Dynamic>;

 public:
  SoftmaxBackward(const Control& control, const Options& options) noexcept : control_(control), options_(options) {}

  /// Non-causal: every query of q reads the memory of all N tokens; `dout` is ∂L/∂out [M × dv].
  void non_causal(const MatrixRef<T>& q, const MatrixRef<T>& k, const MatrixRef<T>& v, const MatrixRef<T>& input,
                  bool has_input, const MatrixRef<T>& dout, Gradients<Control>& g) const {
    if constexpr (detail::has_noncausal_form<Control>::value)
      non_causal_with(control_.noncausal_form(input), q, k, v, input, has_input, dout, g);
    else
      non_causal_with(control_, q, k, v, input, has_input, dout, g);
  }

  /// Causal, continuing `start` (left unchanged); `d_end` is the gradient with respect to the state
  /// the call leaves (empty: none). Sets g.state to the gradient with respect to `start`.
  ///
  /// A call longer than Options::backward_block is differentiated as the same call made in blocks:
  /// one sweep advances a copy of `start` block by block (no reads) and keeps the state at each
  /// block's start; then each block, last first, is differentiated as a call continuing its start
  /// state, handing the gradient of that state to the block before as its d_end. The per-token
  /// records are kept for one block at a time.
  void causal(const State<T>& start, const MatrixRef<T>& q, const MatrixRef<T>& k, const MatrixRef<T>& v,
              const MatrixRef<T>& input, bool has_input, const MatrixRef<T>& dout, const StateGradient<T>& d_end,
              Gradients<Control>& g) const {
    const Index n_tok = k.rows(), block = options_.backward_block;
    if (n_tok <= block || !blockwise) {
      causal_block(start, q, k, v, input, has_input, dout, d_end, g);
      return;
    }
    std::vector<State<T>> starts;
    starts.reserve(std::size_t((n_tok + block - 1) / block));
    State<T> s = start;
    for (Index t0 = 0; t0 < n_tok; t0 += block) {
      starts.push_back(s);
      if (t0 + block < n_tok) advance(s, k.middleRows(t0, block), v.middleRows(t0, block), input.middleRows(t0, block));
    }
    size(g, q, k, v, input, has_input);
    StateGradient<T> carry = d_end;
    for (Index b = Index(starts.size()) - 1; b >= 0; --b) {
      const Index t0 = b * block, c = std::min(block, n_tok - t0);
      Gradients<Control> gb;
      causal_block(starts[std::size_t(b)], q.middleRows(t0, c), k.middleRows(t0, c), v.middleRows(t0, c),
                   input.middleRows(t0, c), has_input, dout.middleRows(t0, c), carry, gb);
      starts[std::size_t(b)] = State<T>{};  // its memory is no longer needed
      g.q.middleRows(t0, c) = gb.q;
      g.k.middleRows(t0, c) = gb.k;
      g.v.middleRows(t0, c) = gb.v;
      if (has_input) g.x.middleRows(t0, c) = gb.x;
      if (t0 + c == n_tok)
        g.control = std::move(gb.control);
      else
        g.control += gb.control;
      carry = std::move(gb.state);
    }
    g.state = std::move(carry);
  }

 private:
  // Whether a long call may be split into blocks: the blocks' parameter gradients must add.
  static constexpr bool blockwise = detail::summable_gradient<typename Gradients<Control>::control_gradient_type>::value;

  // `s` advanced over the tokens of k, v and control input `input` (its keys and values included),
  // as the forward pass would, without reading it.
  void advance(State<T>& s, const MatrixRef<T>& k, const MatrixRef<T>& v, const MatrixRef<T>& input) const {
    const Index n_tok = k.rows(), n = control_.num_slots(), d = k.cols();
    const Index chunk = std::max<Index>(1, std::min(build_block, n_tok));
    Matrix<T> a(chunk, n), w(chunk, n);
    Matrix<T> mem(n, d + v.cols());
    mem << s.keys(), s.values();
    Buffers b(chunk, n, d + v.cols());
    for (Index t0 = 0; t0 < n_tok; t0 += chunk) {
      const Index c = std::min(chunk, n_tok - t0);
      auto ac = a.topRows(c);
      auto wc = w.topRows(c);
      detail::schedule_rows(control_, s.position() + t0, input.middleRows(t0, c), Access::slot_state(s),
                            Access::positions(s), ac, wc);
      absorb(ac, wc, t0, c, k, v, Access::written(s), mem, b);
    }
    Access::keys(s) = mem.leftCols(d);
    Access::values(s) = mem.rightCols(v.cols());
    Access::position(s) += n_tok;
  }

  // causal() for one block: the whole call's per-token records at once.
  void causal_block(const State<T>& start, const MatrixRef<T>& q, const MatrixRef<T>& k, const MatrixRef<T>& v,
                    const MatrixRef<T>& input, bool has_input, const MatrixRef<T>& dout, const StateGradient<T>& d_end,
                    Gradients<Control>& g) const {
    const Index n_tok = k.rows(), n = control_.num_slots(), d = k.cols(), dv = v.cols();
    Tape tp(n_tok, n, true);
    State<T> s = start;  // its slot state, positions and written slots advance with the forward sweep
    Matrix<T> mem(n, d + dv);  // [K̃ Ṽ], advanced by the forward sweep to the memory the call leaves
    mem << start.keys(), start.values();
    size(g, q, k, v, input, has_input);
    const Index chunk = std::max<Index>(1, std::min(options_.chunk, n_tok));
    Buffers b(chunk, n, d + dv);
    const T sc = scale(q.cols());
    // The schedule of the whole block first (one product for a projecting control, not one per
    // chunk): the forward sweep needs no state of the control's beyond it.
    detail::schedule_rows(control_, start.position(), input, Access::slot_state(s), Access::positions(s), tp.decay,
                          tp.write);
    for (Index t0 = 0; t0 < n_tok; t0 += chunk)
      forward_chunk(s, mem, start.position() + t0, std::min(chunk, n_tok - t0), t0, sc, q, k, v, dout, tp, b, g);

    Matrix<T> grad(n, d + dv);  // [∂L/∂K̃ ∂L/∂Ṽ], carried from the memory the call leaves back to `start`
    if (d_end.empty())
      grad.setZero();
    else
      grad << d_end.keys, d_end.values;
    Row u = grad.cwiseProduct(mem).rowwise().sum().transpose();
    const Index last = n_tok == 0 ? 0 : ((n_tok - 1) / chunk) * chunk;
    for (Index t0 = last; t0 >= 0 && n_tok > 0; t0 -= chunk)
      reverse_chunk(t0, 0, std::min(chunk, n_tok - t0), sc, true, q, k, v, dout, grad, u, tp, b, g);

    Matrix<T> d_slot = d_end.empty() ? Matrix<T>::Zero(2, n) : d_end.slot_state;
    chain(control_, start.position(), start, 0, input, has_input, tp, n_tok, d_slot, true, g);
    g.state.keys = grad.leftCols(d);
    g.state.values = grad.rightCols(dv);
    g.state.slot_state = std::move(d_slot);
  }

  // What the forward sweep leaves for the reverse sweep and the control, per token [N × n].
  struct Tape {
    Matrix<T> decay, write;  // the schedule
    Matrix<T> dl, pd;        // D_t ⊙ dl_t and D_t ⊙ p_t (causal only)
    Matrix<T> e;             // e_t, then ∂L/∂log a_t
    Matrix<T> dw;            // ∂L/∂w_t
    Tape(Index rows, Index n, bool reads)
        : decay(rows, n), write(rows, n), dl(reads ? rows : 0, n), pd(reads ? rows : 0, n),
          e(reads ? Matrix<T>(rows, n) : Matrix<T>::Zero(rows, n)), dw(Matrix<T>::Zero(rows, n)) {}
  };

  // One chunk's buffers, sized once per call.
  struct Buffers {
    Matrix<T> gram, dov, mixk, mixv;       // [C × C]
    Matrix<T> prev, dprev, eff, cum, tmp;  // [C × n]
    Matrix<T> kv, share;                   // [C × (d + dv)]: keys and values side by side, their gradients
    Row dcum, l, p, dp, dl;
    Buffers(Index c, Index n, Index width)
        : gram(c, c), dov(c, c), mixk(c, c), mixv(c, c), prev(c, n), dprev(c, n), eff(c, n), cum(c, n),
          tmp(c, n), kv(c, width), share(c, width), dcum(n), l(n), p(n), dp(n), dl(n) {}
    // Keys and values of c tokens side by side: one product each where both meet the same operand.
    void load(const MatrixRef<T>& k, const MatrixRef<T>& v, Index t0, Index c) {
      kv.topLeftCorner(c, k.cols()) = k.middleRows(t0, c);
      kv.block(0, k.cols(), c, v.cols()) = v.middleRows(t0, c);
    }
  };

  bool masked() const noexcept { return options_.empty_slots == EmptySlots::masked; }
  T scale(Index d) const noexcept { return detail::read_scale<T>(options_.scale, d); }

  SlotRange range(Index t) const noexcept {
    if constexpr (detail::has_read_range<Control>::value) {
      const auto r = control_.read_range(t);
      return {r.first, r.second};
    } else {
      (void)t;
      return {0, control_.num_slots()};
    }
  }

  // ∂L/∂q and ∂L/∂x are assigned whole; ∂L/∂k and ∂L/∂v are summed into.
  static void size(Gradients<Control>& g, const MatrixRef<T>& q, const MatrixRef<T>& k, const MatrixRef<T>& v,
                   const MatrixRef<T>& input, bool has_input) {
    g.q.resize(q.rows(), q.cols());
    g.k.setZero(k.rows(), k.cols());
    g.v.setZero(v.rows(), v.cols());
    if (has_input) g.x.resize(input.rows(), input.cols());
  }

  // Tokens t0 .. t0 + c − 1 of the call (absolute position `pos` for the first): the chunk's reads
  // recomputed from the memory in `s`, their gradients, then `s` advanced over the chunk.
  void forward_chunk(State<T>& s, Matrix<T>& mem, Index pos, Index c, Index t0, T sc, const MatrixRef<T>& q,
                     const MatrixRef<T>& k, const MatrixRef<T>& v, const MatrixRef<T>& dout, Tape& tp, Buffers& b,
                     Gradients<Control>& g) const {
    const Index n = control_.num_slots();
    const auto a = tp.decay.middleRows(t0, c);
    const auto w = tp.write.middleRows(t0, c);
    const auto qc = q.middleRows(t0, c);
    const auto kc = k.middleRows(t0, c);
    const auto vc = v.middleRows(t0, c);
    const auto doc = dout.middleRows(t0, c);
    const Index d = k.cols();
    const auto keys = mem.leftCols(d);
    const auto values = mem.rightCols(v.cols());
    auto gram = b.gram.topLeftCorner(c, c);
    auto dov = b.dov.topLeftCorner(c, c);
    auto mixk = b.mixk.topLeftCorner(c, c);
    auto mixv = b.mixv.topLeftCorner(c, c);
    gram.noalias() = sc * qc * kc.transpose();
    dov.noalias() = doc * vc.transpose();
    b.prev.topRows(c).noalias() = sc * qc * keys.transpose();
    b.dprev.topRows(c).noalias() = doc * values.transpose();
    mixk.setZero();
    mixv.setZero();
    b.dcum.setOnes();
    std::vector<std::uint8_t>& written = Access::written(s);
    for (Index t = 0; t < c; ++t) {
      if (has_decay) {
        b.eff.topRows(t).array().rowwise() *= a.row(t).array();
        b.cum.topRows(t).array().rowwise() *= a.row(t).array();
        b.dcum.array() *= a.row(t).array();
      }
      b.eff.row(t) = w.row(t);
      b.cum.row(t).setOnes();
      mark_written<T>(has_decay, a.row(t), w.row(t), written);
      const auto eff = b.eff.topRows(t + 1);
      b.l.noalias() = gram.row(t).head(t + 1) * eff;
      b.l.array() += b.dcum.array() * b.prev.row(t).array();
      b.p = b.l;
      if (!softmax_slots(b.p.data(), n, written.data(), masked(), range(pos + t))) {
        // Nothing readable: the output is 0 whatever the memory holds, and nothing flows back.
        tp.dl.row(t0 + t).setZero();
        tp.pd.row(t0 + t).setZero();
        tp.e.row(t0 + t).setZero();
        continue;
      }
      b.dp.noalias() = dov.row(t).head(t + 1) * eff;
      b.dp.array() += b.dcum.array() * b.dprev.row(t).array();
      b.dl.array() = b.p.array() * (b.dp.array() - b.p.dot(b.dp));
      tp.e.row(t0 + t).array() = b.dl.array() * b.l.array() + b.p.array() * b.dp.array();
      tp.dl.row(t0 + t).array() = b.dcum.array() * b.dl.array();
      tp.pd.row(t0 + t).array() = b.dcum.array() * b.p.array();
      mixk.row(t).head(t + 1).noalias() = b.dl * eff.transpose();
      mixv.row(t).head(t + 1).noalias() = b.p * eff.transpose();
      // Token i ≤ t's write reaches l_t and out_t through its weight E_t[i] = w_i ⊙ cum_t[i].
      for (Index i = 0; i <= t; ++i)
        tp.dw.row(t0 + i).array() += b.cum.row(i).array() * (gram(t, i) * b.dl.array() + dov(t, i) * b.p.array());
    }
    auto dq = g.q.middleRows(t0, c);
    dq.noalias() = sc * tp.dl.middleRows(t0, c) * keys;
    dq.noalias() += sc * mixk * kc;
    g.k.middleRows(t0, c).noalias() += sc * mixk.transpose() * qc;
    g.v.middleRows(t0, c).noalias() += mixv.transpose() * doc;
    if (has_decay) mem.array().colwise() *= b.dcum.transpose().array();
    b.load(k, v, t0, c);
    mem.noalias() += b.eff.topRows(c).transpose() * b.kv.topRows(c);
  }

  // Tokens t0 .. t0 + c − 1 of decays a and writes w written into the memory `mem` = [K̃ Ṽ] (and
  // their slots marked), as the forward pass builds it.
  template <class A, class W>
  static void absorb(const A& a, const W& w, Index t0, Index c, const MatrixRef<T>& k, const MatrixRef<T>& v,
                     std::vector<std::uint8_t>& written, Matrix<T>& mem, Buffers& b) {
    for (Index t = 0; t < c; ++t) mark_written<T>(has_decay, a.row(t), w.row(t), written);
    suffix_weights(a, w, c, b);
    if (has_decay) mem.array().colwise() *= b.dcum.transpose().array();
    b.load(k, v, t0, c);
    mem.noalias() += b.eff.topRows(c).transpose() * b.kv.topRows(c);
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

  // Tokens t0 .. t0 + c − 1 in reverse, with `grad` = [∂L/∂K̃ ∂L/∂Ṽ] for the memory after the chunk:
  // the parts of dk, dv and dw it gives, then `grad` moved to the memory before the chunk, and
  // ∂L/∂log a for the chunk's tokens (the running suffix sum u).
  // The tape's rows start at token `base` of the call.
  void reverse_chunk(Index t0, Index base, Index c, T sc, bool reads, const MatrixRef<T>& q, const MatrixRef<T>& k,
                     const MatrixRef<T>& v, const MatrixRef<T>& dout, Matrix<T>& grad, Row& u, Tape& tp, Buffers& b,
                     Gradients<Control>& g) const {
    const Index d = k.cols(), dv = v.cols(), r0 = t0 - base;
    const auto a = tp.decay.middleRows(r0, c);
    const auto w = tp.write.middleRows(r0, c);
    suffix_weights(a, w, c, b);
    const auto cum = b.cum.topRows(c);
    const auto eff = b.eff.topRows(c);
    auto share = b.share.topRows(c);  // what the later reads give the chunk's keys and values
    share.noalias() = eff * grad;
    g.k.middleRows(t0, c) += share.leftCols(d);
    g.v.middleRows(t0, c) += share.rightCols(dv);
    b.load(k, v, t0, c);
    auto tmp = b.tmp.topRows(c);
    tmp.noalias() = b.kv.topRows(c) * grad.transpose();
    tp.dw.middleRows(r0, c).array() += cum.array() * tmp.array();
    if (has_decay) grad.array().colwise() *= b.dcum.transpose().array();
    if (reads) {
      grad.leftCols(d).noalias() += sc * tp.dl.middleRows(r0, c).transpose() * q.middleRows(t0, c);
      grad.rightCols(dv).noalias() += tp.pd.middleRows(r0, c).transpose() * dout.middleRows(t0, c);
    }
    for (Index t = c - 1; t >= 0; --t) {
      u.array() += tp.e.row(r0 + t).array() - w.row(t).array() * tp.dw.row(r0 + t).array();
      tp.e.row(r0 + t) = u;
    }
  }

  // Non-causal, with the control `ctl` (the control's non-causal form where it has one). The
  // memory is built block by block of Options::backward_block tokens (one block when the call is
  // no longer, or when the parameter gradients do not add), keeping only the control's per-slot
  // state at each block's start; the read's gradient is formed query block by query block; then
  // each block, last first, has its schedule recomputed from its start and is swept in reverse.
  template <class C>
  void non_causal_with(const C& ctl, const MatrixRef<T>& q, const MatrixRef<T>& k, const MatrixRef<T>& v,
                       const MatrixRef<T>& input, bool has_input, const MatrixRef<T>& dout, Gradients<Control>& g) const {
    const Index n_tok = k.rows(), n = ctl.num_slots(), d = k.cols(), dv = v.cols();
    const Index block = blockwise ? std::max<Index>(1, std::min(options_.backward_block, n_tok)) : std::max<Index>(1, n_tok);
    const Index chunk = std::min(build_block, block);
    Tape tp(block, n, false);
    State<T> s = Access::empty<T>(n, d, dv, &detail::control_kind_v<Control>);
    std::vector<State<T>> starts;  // each block's start: only the per-slot state is read back
    Matrix<T> mem = Matrix<T>::Zero(n, d + dv);  // [K̃ Ṽ]
    size(g, q, k, v, input, has_input);
    Buffers b(chunk, n, d + dv);
    // The memory, chunk by chunk as the forward pass builds it.
    for (Index base = 0; base < n_tok; base += block) {
      starts.push_back(s);
      const Index end = std::min(base + block, n_tok);
      for (Index t0 = base; t0 < end; t0 += chunk) {
        const Index c = std::min(chunk, end - t0);
        auto a = tp.decay.middleRows(t0 - base, c);
        auto w = tp.write.middleRows(t0 - base, c);
        detail::schedule_rows(ctl, t0, input.middleRows(t0, c), Access::slot_state(s), Access::positions(s), a, w);
        absorb(a, w, t0, c, k, v, Access::written(s), mem, b);
      }
    }
    // Its read by every query (kernel::read_all), and the read's gradients, by blocks of queries.
    const T sc = scale(q.cols());
    Matrix<T> grad = Matrix<T>::Zero(n, d + dv);
    const Index q_block = std::max<Index>(1, std::min(block, q.rows()));
    Matrix<T> p(q_block, n), dl(q_block, n);
    for (Index i0 = 0; i0 < q.rows(); i0 += q_block) {
      const Index m = std::min(q_block, q.rows() - i0);
      auto pm = p.topRows(m);
      auto dlm = dl.topRows(m);
      pm.noalias() = sc * q.middleRows(i0, m) * mem.leftCols(d).transpose();
      for (Index i = 0; i < m; ++i) mask_slots(pm.row(i).data(), n, Access::written(s).data(), masked(), range(i0 + i));
      softmax_rows(pm.data(), pm.outerStride(), m, n, static_cast<bool*>(nullptr));  // a row reading nothing: 0
      dlm.noalias() = dout.middleRows(i0, m) * mem.rightCols(dv).transpose();  // dp, then dl in place
      for (Index i = 0; i < m; ++i)
        dlm.row(i).array() = pm.row(i).array() * (dlm.row(i).array() - pm.row(i).dot(dlm.row(i)));
      g.q.middleRows(i0, m).noalias() = sc * dlm * mem.leftCols(d);
      grad.leftCols(d).noalias() += sc * dlm.transpose() * q.middleRows(i0, m);
      grad.rightCols(dv).noalias() += pm.transpose() * dout.middleRows(i0, m);
    }
    Row u = grad.cwiseProduct(mem).rowwise().sum().transpose();
    Matrix<T> d_slot = Matrix<T>::Zero(2, n);
    for (Index blk = Index(starts.size()) - 1; blk >= 0; --blk) {
      const Index base = blk * block, rows = std::min(block, n_tok - base);
      const State<T>& at = starts[std::size_t(blk)];
      if (blk + 1 < Index(starts.size())) {  // the last block's schedule is still on the tape
        State<T> replay = at;
        detail::schedule_rows(ctl, base, input.middleRows(base, rows), Access::slot_state(replay),
                              Access::positions(replay), tp.decay.topRows(rows), tp.write.topRows(rows));
        tp.e.setZero();
        tp.dw.setZero();
      }
      const Index last = base + ((rows - 1) / chunk) * chunk;
      for (Index t0 = last; t0 >= base; t0 -= chunk)
        reverse_chunk(t0, base, std::min(chunk, base + rows - t0), sc, false, q, k, v, dout, grad, u, tp, b, g);
      chain(ctl, base, at, base, input.middleRows(base, rows), has_input, tp, rows, d_slot,
            blk + 1 == Index(starts.size()), g);
    }
    if (n_tok == 0) chain(ctl, 0, s, 0, input, has_input, tp, 0, d_slot, true, g);
  }

  // The chain rule through the control's schedule for the `rows` tokens of the tape, the call's
  // tokens row0 .. (absolute positions from pos), whose per-slot state before them is `at`'s: ∂L/∂x
  // (into g.x, or into g.k when the control read the keys), the parameters (assigned to g.control
  // for the call's last block, added for the others), and the per-slot state (d_slot, in and out).
  template <class C>
  static void chain(const C& ctl, Index pos, const State<T>& at, Index row0, const MatrixRef<T>& input,
                    bool has_input, const Tape& tp, Index rows, Matrix<T>& d_slot, bool last_block,
                    Gradients<Control>& g) {
    Matrix<T> dx = Matrix<T>::Zero(rows, input.cols());
    if constexpr (detail::has_schedule_backward<C>::value) {
      const ScheduleTape<T> tape{pos,
                                 input,
                                 Access::slot_state(at),
                                 Access::positions(at),
                                 tp.decay.topRows(rows),
                                 tp.write.topRows(rows),
                                 tp.e.topRows(rows),
                                 tp.dw.topRows(rows)};
      if (last_block) {
        ctl.schedule_backward(tape, d_slot, dx, g.control);
      } else if constexpr (blockwise) {
        typename Gradients<Control>::control_gradient_type part{};
        ctl.schedule_backward(tape, d_slot, dx, part);
        g.control += part;
      }
    } else {
      (void)ctl;
      (void)pos;
      (void)at;
      (void)tp;
      (void)last_block;
      d_slot.setZero();
    }
    if (has_input)
      g.x.middleRows(row0, rows) = dx;
    else
      g.k.middleRows(row0, rows) += dx;
  }

  const Control& control_;
  const Options& options_;
};

// NOLINTEND(bugprone-easily-swappable-parameters)
}  // namespace kernel
ABC_NAMESPACE_END
