// SPDX-License-Identifier: MIT
// abc: bounded-memory attention. control::RandomFeature, random feature attention (RFA).
#pragma once

#include <cmath>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "../detail/check.hpp"
#include "../detail/control_check.hpp"
#include "../detail/control_kind.hpp"
#include "../detail/gate.hpp"
#include "../feature/random_fourier.hpp"
#include "../readout.hpp"
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
      // (g, 1 − g) as control::Gated computes them.
      const auto [g, keep] = given_gates_ ? std::pair<Scalar, Scalar>(gates_[std::size_t(t0 + t)],
                                                                      Scalar(1) - gates_[std::size_t(t0 + t)])
                                          : detail::sigmoid_gate(Scalar(gate_w_.dot(x.row(t).transpose()) + gate_b_));
      decay.row(t).setConstant(g);
      write.row(t) *= keep;
    }
  }

  /// φ(q) of each row of q [rows × d] into phi [rows × n].
  void query_features(MatrixRef<Scalar> q, MatrixOut<Scalar> phi) const { phi_.map(q, phi); }

 private:
  FeatureMap phi_;
  Scalar floor_;
  Vector<Scalar> gate_w_;
  Scalar gate_b_ = Scalar(0);
  std::vector<Scalar> gates_;
  bool given_gates_ = false;
};

}  // namespace control
ABC_NAMESPACE_END
