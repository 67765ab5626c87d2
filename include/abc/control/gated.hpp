// SPDX-License-Identifier: MIT
// abc: bounded-memory attention. control::Gated<Inner>, a scalar forget gate around any control.
#pragma once

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <type_traits>
#include <utility>

#include "../concepts.hpp"
#include "../detail/check.hpp"
#include "../detail/compose.hpp"
#include "../detail/control_kind.hpp"
#include "../detail/gate.hpp"
#include "../detail/control_check.hpp"
#include "../error.hpp"
#include "../gradients.hpp"
#include "../schedule.hpp"
#include "../schedule_tape.hpp"
#include "../types.hpp"

ABC_NAMESPACE_BEGIN
namespace control {

/**
 * \brief A forget gate on another control (the RFA-Gate recurrence applied to ABC):
 *     a_t ← g_t · a_t,   w_t ← (1 − g_t) · w_t,
 * so the memory is K̃_t = g_t diag(a_t) K̃_{t−1} + (1 − g_t) w_t ⊗ k_t: older writes fade by the
 * product of the later gates, (1 − g_i) Π_{j>i} g_j for a plain inner write.
 *
 * The gate is g_t = sigmoid(w_g · x_t + b_g) from the control input x_t (the key by default), or
 * given per absolute position (then max_tokens() = gates.size()). It is sparse when Inner is sparse
 * (decay_all scales every slot, each write's weight is scaled) and dense otherwise. Non-causal
 * forward is the final state of the gated recurrence (of Inner's non-causal form, if it has one).
 * Inner's capacity, read range and causal requirements carry over.
 *
 * \tparam Inner the gated control; its scalar type is this control's.
 */
template <class Inner>
class Gated {
  static constexpr bool kSparse = is_sparse_control_v<Inner>;

 public:
  /// Inner's scalar type, float or double.
  using scalar_type = typename Inner::scalar_type;
  /// The gated control.
  using inner_type = Inner;
  /// True: the gate decays every slot by g_t.
  static constexpr bool has_decay = true;
  /// True: a sparse schedule carries g_t in decay_all, so a Concat with a Gated part is dense.
  static constexpr bool has_decay_all = true;

  /// Gate sigmoid(w_g · x_t + b_g), x_t of width w_g.size(). \throws config_error if w_g is
  /// empty, w_g or b_g is not finite, or Inner reads a control input of another width.
  Gated(Inner inner, Vector<scalar_type> w_g, scalar_type b_g)
      : inner_(std::move(inner)), w_g_(std::move(w_g)), b_g_(b_g) {
    detail::require_at_least(kWho, "w_g.size()", w_g_.size(), 1, "the gate reads at least one input");
    if (auto p = detail::finite_problem("w_g", w_g_)) detail::raise(kWho, p);
    if (!std::isfinite(b_g_)) ABC_THROW(config_error(std::string(kWho) + ": b_g is not finite, expected a finite bias"));
    const Index inner_dx = detail::input_dim_of(inner_);
    if (inner_dx > 0 && inner_dx != w_g_.size())
      ABC_THROW(config_error(std::string(kWho) + ": w_g.size() is " + std::to_string(w_g_.size()) +
                             ", expected " + std::to_string(inner_dx) +
                             " (the inner control's input_dim(): both read the same control input)"));
  }

  /// Caller-given gates: g_t = gates(t) for absolute position t. \throws config_error if gates is
  /// empty or a gate is outside [0, 1].
  Gated(Inner inner, Vector<scalar_type> gates) : inner_(std::move(inner)), gates_(std::move(gates)) {
    detail::require_at_least(kWho, "gates.size()", gates_.size(), 1, "at least one token's gate");
    for (Index t = 0; t < gates_.size(); ++t)
      if (!(gates_(t) >= 0 && gates_(t) <= 1))
        ABC_THROW(config_error(std::string(kWho) + ": gates(" + std::to_string(t) + ") is " +
                               std::to_string(double(gates_(t))) + ", expected a value in [0, 1]"));
  }

  /// The control's name in state blobs, built from Inner's.
  static std::string tag() { return "abc::control::Gated<" + detail::control_name<Inner>() + ">"; }
  /// The inner control keeps its per-slot state as it would ungated.
  const char* slot_state_problem(MatrixRef<scalar_type> slot_state, PositionsRef positions, Index position) const noexcept {
    return detail::slot_state_problem_of(inner_, slot_state, positions, position);
  }

  /// The gated control.
  const Inner& inner() const noexcept { return inner_; }
  /// Inner's slot count.
  Index num_slots() const noexcept { return inner_.num_slots(); }

  /// The gate's input width, or Inner's when the gates are given (0: no control input at all).
  Index input_dim() const noexcept {
    return w_g_.size() > 0 ? w_g_.size() : detail::input_dim_of(inner_);
  }

  /// The smaller of Inner's capacity and the number of given gates (unbounded if neither).
  Index max_tokens() const noexcept {
    const Index m = detail::max_tokens_of(inner_);
    return gates_.size() > 0 ? std::min(m, gates_.size()) : m;
  }

  /// The slots [first, second) query t reads: Inner's (present only when Inner has a read_range()).
  template <class I = Inner, std::enable_if_t<detail::has_read_range<I>::value, int> = 0>
  std::pair<Index, Index> read_range(Index t) const {
    const auto r = inner_.read_range(t);
    return {r.first, r.second};
  }

  /// Why Inner cannot run causally or step, or an empty Problem (present only when Inner has one).
  template <class I = Inner, std::enable_if_t<detail::has_causal_problem<I>::value, int> = 0>
  auto causal_problem() const noexcept {
    return inner_.causal_problem();
  }

  /// Inner replaced by its non-causal form for x [N × d_x], under the same gate (present only when
  /// Inner has one).
  template <class I = Inner, std::enable_if_t<detail::has_noncausal_form<I>::value, int> = 0>
  Gated noncausal_form(MatrixRef<scalar_type> x) const {
    Gated g = *this;
    g.inner_ = inner_.noncausal_form(x);
    return g;
  }

  /// The gradient with respect to the control's parameters.
  struct Gradient {
    /// ∂L/∂w_g, [d_x]; empty when the gates were given.
    Vector<scalar_type> w_g;
    /// ∂L/∂b_g; 0 when the gates were given.
    scalar_type b_g = scalar_type(0);
    /// The inner control's parameter gradient.
    typename detail::control_gradient<Inner>::type inner{};
    /// Adds another part of the same call's gradient (a backward pass sums its blocks'); present
    /// when the inner control's gradient adds too.
    template <class G = typename detail::control_gradient<Inner>::type,
              std::enable_if_t<detail::summable_gradient<G>::value, int> = 0>
    Gradient& operator+=(const Gradient& other) {
      w_g += other.w_g;
      b_g += other.b_g;
      inner += other.inner;
      return *this;
    }
  };

  /**
   * \brief The chain rule through the schedule (see abc/concepts.hpp), present when Inner's can be
   * taken. With log a_t = log g_t + log a'_t and w_t = (1 − g_t) w'_t (a', w' Inner's schedule,
   * replayed from the state before the call), Inner receives ∂L/∂log a' = ∂L/∂log a and
   * ∂L/∂w' = (1 − g_t) ∂L/∂w, and the gate's logit u_t = w_g·x_t + b_g
   *     ∂L/∂u_t = (1 − g_t) Σ_ℓ ∂L/∂log a_tℓ − g_t (1 − g_t) Σ_ℓ w'_tℓ ∂L/∂w_tℓ,
   * without dividing by g_t or 1 − g_t.
   */
  template <class I = Inner, std::enable_if_t<detail::differentiable_control<I>::value, int> = 0>
  void schedule_backward(const ScheduleTape<scalar_type>& tape, MatrixOut<scalar_type> d_slot_state,
                         MatrixOut<scalar_type> dx, Gradient& grad) const {
    const Index rows = tape.x.rows(), n = num_slots();
    Matrix<T> a(rows, n), w(rows, n), slot = tape.slot_state;
    PositionsRow positions = tape.positions;
    detail::schedule_rows(inner_, tape.t0, tape.x, slot, positions, a, w);
    Matrix<T> d_w(rows, n);
    Vector<T> du(rows);
    for (Index t = 0; t < rows; ++t) {
      const auto [g, keep] = gate(tape.t0 + t, tape.x.row(t).transpose());
      d_w.row(t) = keep * tape.d_write.row(t);
      du(t) = keep * tape.d_log_decay.row(t).sum() - g * keep * w.row(t).dot(tape.d_write.row(t));
    }
    if (w_g_.size() > 0) {
      dx.noalias() += du * w_g_.transpose();
      grad.w_g.noalias() = tape.x.transpose() * du;
      grad.b_g = du.sum();
    }
    if constexpr (detail::has_schedule_backward<Inner>::value) {
      const ScheduleTape<T> inner{tape.t0, tape.x, tape.slot_state, tape.positions, a, w, tape.d_log_decay, d_w};
      inner_.schedule_backward(inner, d_slot_state, dx, grad.inner);
    } else {
      d_slot_state.setZero();
    }
  }

  /// Slots one token can write when sparse: Inner's max_writes (1, unused, when dense).
  static constexpr int max_writes = kSparse ? detail::max_writes_of<Inner>::value : 1;
  /// Sparse form: Inner's writes, every slot decayed by g_t and each weight scaled by 1 − g_t.
  template <bool S = kSparse, std::enable_if_t<S, int> = 0>
  void schedule(Index t, VectorRef<scalar_type> x, MatrixOut<scalar_type> slot_state, PositionsOut positions,
                SparseWrite<scalar_type, max_writes>& w) const {
    detail::sparse_schedule(inner_, t, x, slot_state, positions, w);
    const auto [g, keep] = gate(t, x);
    w.decay_all *= g;
    for (int j = 0; j < w.count; ++j) w.writes[static_cast<std::size_t>(j)].weight *= keep;
  }

  /// Dense form: Inner's decay rows times g_t, write rows times 1 − g_t.
  template <bool S = kSparse, std::enable_if_t<!S, int> = 0>
  void schedule(Index t0, MatrixRef<scalar_type> x, MatrixOut<scalar_type> slot_state, PositionsOut positions,
                MatrixOut<scalar_type> decay, MatrixOut<scalar_type> write) const {
    detail::dense_schedule(inner_, t0, x, slot_state, positions, decay, write);
    for (Index t = 0; t < x.rows(); ++t) {
      const auto [g, keep] = gate(t0 + t, x.row(t).transpose());
      decay.row(t) *= g;
      write.row(t) *= keep;
    }
  }

 private:
  using T = scalar_type;
  static constexpr const char* kWho = "abc::control::Gated";

  // (g_t, 1 − g_t): given, or from the logit by detail::sigmoid_gate.
  template <class Row>
  std::pair<T, T> gate(Index t, const Row& x) const noexcept {
    if (gates_.size() > 0) return {gates_(t), T(1) - gates_(t)};
    return detail::sigmoid_gate(T(w_g_.dot(x) + b_g_));
  }

  Inner inner_;
  Vector<T> w_g_;
  T b_g_ = T(0);
  Vector<T> gates_;
};

}  // namespace control
ABC_NAMESPACE_END
