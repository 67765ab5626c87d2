// SPDX-License-Identifier: MIT
// abc: bounded-memory attention. control::RandomFeature, random feature attention (RFA).
#pragma once

#include <cmath>
#include <limits>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "../detail/check.hpp"
#include "../detail/control_check.hpp"
#include "../detail/control_kind.hpp"
#include "../detail/gate.hpp"
#include "../feature/random_fourier.hpp"
#include "../readout.hpp"
#include "../schedule_tape.hpp"
#include "../types.hpp"

ABC_NAMESPACE_BEGIN
namespace control {

/**
 * \brief RFA (dissertation ch. 4): the recurrence with writes w_t = φ(k_t) and the linear readout
 * out(q) = φ(q)ᵀ S / (φ(q)·z), S = Σ_t φ(k_t) ⊗ v_t, z = Σ_t φ(k_t) (Eq. 4.5–4.7).
 *
 * Queries and keys go through the same map φ (key_schedule and query_features both call it), so
 * they are always normalised alike. By default the maps read x/‖x‖ (feature::InputNorm::unit, RFA's
 * practice, §4.3.3): with sin/cos features the readout then tends to softmax(s² q̂·k̂) as D grows.
 * A map built with InputNorm::raw reads q and k as given and estimates a Gaussian kernel instead.
 *
 * The memory has n = φ's size slots (2D for sin/cos). Optionally gated for recency (Eq. 4.8):
 * S_t = g_t S_{t−1} + (1 − g_t) φ(k_t) ⊗ v_t and the same for z, with g_t = sigmoid(w_g·x_t + b_g)
 * from the control input (the layer input; the keys unless the caller passes x), or gates given per
 * position. The denominator φ(q)·z can be ≤ 0 with sin/cos features at finite D: `floor` ε > 0
 * replaces it by max(den, ε) (not exact any more); with the default 0 the formula is exact and an
 * exactly zero denominator reads as 0. When the denominator (with φ(q) scaled to a largest entry of
 * 1) is subnormal, S and z are sums of subnormal terms, each rounded to the smallest subnormal: the
 * output is finite, but forms that sum in another order agree only to that absolute error.
 *
 * BoundedAttention::backward and backward_causal differentiate it (kernel::LinearBackward, then
 * features_backward here): with respect to q, k, v, x, the projection W of φ, the learned gate and
 * the start state (docs/gradients.md).
 *
 * \tparam Scalar float or double.
 * \tparam FeatureMap feature::RandomFourier (default) or feature::ArcCosine.
 */
template <class Scalar = float, class FeatureMap = feature::RandomFourier<Scalar>>
class RandomFeature {
 public:
  /// float or double.
  using scalar_type = Scalar;
  /// The feature map φ's type.
  using feature_map = FeatureMap;
  /// Readout::linear: queries read φ(q)ᵀ S / (φ(q)·z), with no softmax and no K̃.
  static constexpr Readout readout = Readout::linear;
  /// The control's name in state blobs.
  static std::string tag() { return "abc::control::RandomFeature<" + detail::control_name<FeatureMap>() + ">"; }

  /// Ungated RFA. \throws config_error for a negative or non-finite floor.
  explicit RandomFeature(FeatureMap phi, Scalar floor = Scalar(0)) : phi_(std::move(phi)), floor_(floor) {
    detail::require_real(std::isfinite(floor_) && floor_ >= Scalar(0), "abc::control::RandomFeature", "floor",
                         double(floor_), "a finite value ≥ 0 (0 turns the denominator floor off)");
  }

  /// Gated RFA with a learned gate g_t = sigmoid(w_g·x_t + b_g), w_g [d_x].
  // NOLINTNEXTLINE(bugprone-easily-swappable-parameters): gate_bias beside gate_weights; floor optional
  RandomFeature(FeatureMap phi, Vector<Scalar> gate_weights, Scalar gate_bias, Scalar floor = Scalar(0))
      : RandomFeature(std::move(phi), floor) {
    if (auto p = detail::finite_problem("gate_weights", gate_weights)) detail::raise("abc::control::RandomFeature", p);
    detail::require_at_least("abc::control::RandomFeature", "gate_weights.size()", gate_weights.size(), 1,
                             "the gate reads at least one input column");
    detail::require_real(std::isfinite(gate_bias), "abc::control::RandomFeature", "gate_bias", double(gate_bias),
                         "a finite value");
    gate_w_ = std::move(gate_weights);
    gate_b_ = gate_bias;
  }

  /// Gated RFA with given gates, g_t = gates[t] ∈ [0, 1] for absolute positions t < gates.size().
  RandomFeature(FeatureMap phi, std::vector<Scalar> gates, Scalar floor = Scalar(0))
      : RandomFeature(std::move(phi), floor) {
    for (std::size_t i = 0; i < gates.size(); ++i)
      detail::require_real(gates[i] >= Scalar(0) && gates[i] <= Scalar(1), "abc::control::RandomFeature",
                           ("gates[" + std::to_string(i) + "]").c_str(), double(gates[i]), "a gate in [0, 1]");
    gates_ = std::move(gates);
    given_gates_ = true;
  }

  /// n, the size of φ (2D for sin/cos).
  Index num_slots() const noexcept { return phi_.size(); }
  /// The key and query width φ reads (its input_dim()).
  Index key_dim() const noexcept { return phi_.input_dim(); }
  /// The gate's input width (0 without a learned gate: no control input is read).
  Index input_dim() const noexcept { return gate_w_.size(); }
  /// The number of gates when they are given per position; unbounded otherwise.
  Index max_tokens() const noexcept {
    return given_gates_ ? Index(gates_.size()) : std::numeric_limits<Index>::max();
  }
  /// The floor ε of the readout's denominator, max(φ(q)·z, ε); 0: off.
  Scalar denominator_floor() const noexcept { return floor_; }
  /// The feature map φ.
  const FeatureMap& features() const noexcept { return phi_; }
  /// Whether a gate is applied, learned or given per position.
  bool gated() const noexcept { return given_gates_ || gate_w_.size() > 0; }

  /// Gated: w_t = (1 − g_t) φ(k_t), a_t = g_t; ungated: w_t = φ(k_t), a_t = 1.
  // NOLINTNEXTLINE(bugprone-easily-swappable-parameters): the control contract's schedule signature
  void key_schedule(Index t0, MatrixRef<Scalar> k, MatrixRef<Scalar> x, MatrixOut<Scalar> decay,
                    MatrixOut<Scalar> write) const {
    phi_.map(k, write);
    if (!gated()) {
      decay.setOnes();
      return;
    }
    for (Index t = 0; t < k.rows(); ++t) {
      const auto [g, keep] = gate(t0, x, t);
      decay.row(t).setConstant(g);
      write.row(t) *= keep;
    }
  }

  /// φ(q) of each row of q [rows × d] into phi [rows × n].
  void query_features(MatrixRef<Scalar> q, MatrixOut<Scalar> phi) const { phi_.map(q, phi); }

  /**
   * \brief The gradient with respect to the control's parameters (docs/gradients.md).
   *
   * `w` is ∂L/∂W for the feature map's projection W [D × d]. RFA learns σ through W: for
   * feature::Projection's W = W̃ diag(σ) (column j scaled by σ_j), ∂L/∂σ_j = Σ_r W̃_rj ∂L/∂W_rj
   * (= Σ_r W_rj ∂L/∂W_rj / σ_j for σ_j ≠ 0; isotropic σ: Σ(W ⊙ ∂L/∂W)/σ); for the other
   * parameterisation W = W̃/σ, ∂L/∂σ = −Σ(W ⊙ ∂L/∂W)/σ.
   */
  struct Gradient {
    /// ∂L/∂W, [D × d].
    Matrix<Scalar> w;
    /// ∂L/∂w_g, [d_x], with a learned gate; empty otherwise (given gates are not differentiated).
    Vector<Scalar> w_g;
    /// ∂L/∂b_g, with a learned gate; 0 otherwise.
    Scalar b_g = Scalar(0);
  };

  /**
   * \brief The chain rule through the features and the gate (kernel::LinearBackward): from
   * ∂L/∂φ(q_t) (d_phi_q [M × n]), ∂L/∂w_t and ∂L/∂log a_t (the tape) to q, k (added into dq, dk),
   * the control input (added into dx) and the parameters (assigned to grad).
   *
   * Gated, w_t = (1 − g_t) φ(k_t) and log a_t = log g_t on every slot, so ∂L/∂φ(k_t) = (1 − g_t) ∂L/∂w_t
   * and the logit u_t = w_g·x_t + b_g receives
   *     ∂L/∂u_t = (1 − g_t) Σ_ℓ ∂L/∂log a_tℓ − g_t (1 − g_t) φ(k_t)·∂L/∂w_t
   * (as control::Gated), without dividing by g_t or 1 − g_t. The feature map carries the rest
   * (`map_backward`: through x̂ = x/‖x‖ under InputNorm::unit, with gradient 0 at x = 0).
   */
  // NOLINTNEXTLINE(bugprone-easily-swappable-parameters): rows and their gradients side by side
  void features_backward(const ScheduleTape<Scalar>& tape, MatrixRef<Scalar> q, MatrixRef<Scalar> d_phi_q,
                         MatrixRef<Scalar> k, MatrixOut<Scalar> dq, MatrixOut<Scalar> dk, MatrixOut<Scalar> dx,
                         Gradient& grad) const {
    static_assert(has_map_backward<FeatureMap>::value,
                  "abc::control::RandomFeature: gradients need FeatureMap::map_backward(MatrixRef<T> x, "
                  "MatrixRef<T> d_phi, MatrixOut<T> dx, Matrix<T>& d_w) (feature::RandomFourier and "
                  "feature::ArcCosine have it)");
    const Index rows = k.rows();
    grad.w.setZero(phi_.projection().rows(), phi_.projection().cols());
    grad.w_g.resize(0);
    grad.b_g = Scalar(0);
    Matrix<Scalar> d_phi_k = tape.d_write;
    if (gated()) {
      Matrix<Scalar> phi_k(rows, num_slots());
      phi_.map(k, phi_k);
      Vector<Scalar> du(rows);
      for (Index t = 0; t < rows; ++t) {
        const auto [g, keep] = gate(tape.t0, tape.x, t);
        du(t) = keep * tape.d_log_decay.row(t).sum() - g * keep * phi_k.row(t).dot(tape.d_write.row(t));
        d_phi_k.row(t) *= keep;
      }
      if (!given_gates_) {
        dx.noalias() += du * gate_w_.transpose();
        grad.w_g.noalias() = tape.x.transpose() * du;
        grad.b_g = du.sum();
      }
    }
    phi_.map_backward(k, d_phi_k, dk, grad.w);
    phi_.map_backward(q, d_phi_q, dq, grad.w);
  }

 private:
  template <class M, class = void>
  struct has_map_backward : std::false_type {};
  template <class M>
  struct has_map_backward<M, std::void_t<decltype(std::declval<const M&>().map_backward(
                                 std::declval<MatrixRef<Scalar>>(), std::declval<MatrixRef<Scalar>>(),
                                 std::declval<MatrixOut<Scalar>>(), std::declval<Matrix<Scalar>&>()))>>
      : std::true_type {};

  // (g, 1 − g) of row t of a block starting at t0, as control::Gated computes them.
  std::pair<Scalar, Scalar> gate(Index t0, const MatrixRef<Scalar>& x, Index t) const noexcept {
    if (given_gates_) return {gates_[std::size_t(t0 + t)], Scalar(1) - gates_[std::size_t(t0 + t)]};
    return detail::sigmoid_gate(Scalar(gate_w_.dot(x.row(t).transpose()) + gate_b_));
  }

  FeatureMap phi_;
  Scalar floor_;
  Vector<Scalar> gate_w_;
  Scalar gate_b_ = Scalar(0);
  std::vector<Scalar> gates_;
  bool given_gates_ = false;
};

}  // namespace control
ABC_NAMESPACE_END
