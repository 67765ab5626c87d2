// SPDX-License-Identifier: MIT
// abc bench: how far a decode drifts when its state is held in bfloat16 (abc::StateStorage), against
// the same decode in float and a float64 reference, over a long stream.
//
//   state_drift [tokens = 100000]
//
// Four controls at n = 64 slots (RFA: D = 32, 64 features), d = dv = 64: ABC-MLP (the prefix
// normaliser: slot ℓ holds a running average of the keys), GSA (SlotGates, a forget gate per slot,
// τ = 8), a sliding window, and ungated RFA (a running sum). Tokens are i.i.d. N(0, 1) in every
// entry. Three decodes take the same tokens step by step: double (the reference), float, and float
// with bfloat16 storage. For each decade of tokens (1–10, 11–100, ...) the program prints the median
// and the largest relative error of the outputs, ‖o − o_ref‖ / ‖o_ref‖, and at the decade's end the
// relative error of the memory, ‖[K̃ Ṽ] − ref‖_F / ‖ref‖_F, for float and for bfloat16.
#include <abc/abc.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

namespace {

using abc::Index;
constexpr Index kSlots = 64, kD = 64;

template <class T>
abc::Matrix<T> cast(const abc::Matrix<double>& m) {
  return m.cast<T>();
}

// The memory of a state as one [n × (d + dv)] matrix in double.
template <class S>
abc::Matrix<double> memory(const S& s) {
  abc::Matrix<double> m(s.num_slots(), s.key_dim() + s.value_dim());
  m << s.keys().template cast<double>(), s.values().template cast<double>();
  return m;
}

double median(std::vector<double> x) {
  if (x.empty()) return 0;
  std::nth_element(x.begin(), x.begin() + std::ptrdiff_t(x.size() / 2), x.end());
  return x[x.size() / 2];
}

// One control, built from `make` for double and for float, decoded `tokens` steps three ways.
template <class Make>
void run(const char* name, const Make& make, Index tokens) {
  const abc::BoundedAttention ref{make(double{})};
  const abc::BoundedAttention f32{make(float{})};
  auto s_ref = ref.make_state(kD, kD);
  auto s_f32 = f32.make_state(kD, kD);
  auto s_b16 = f32.make_state(kD, kD, abc::StateStorage::bfloat16);
  std::printf("\n%s: state %zu bytes in float, %zu in bfloat16\n", name, s_f32.bytes(), s_b16.bytes());
  std::printf("| tokens | float: output median | max | memory | bfloat16: output median | max | memory |\n");
  std::printf("|---|---:|---:|---:|---:|---:|---:|\n");
  std::mt19937_64 gen(2026);
  std::normal_distribution<double> normal;
  abc::Vector<double> q(kD), k(kD), v(kD);
  std::vector<double> e32, e16;
  Index decade_start = 1, decade_end = 10;
  for (Index t = 1; t <= tokens; ++t) {
    for (Index i = 0; i < kD; ++i) q(i) = normal(gen), k(i) = normal(gen), v(i) = normal(gen);
    const abc::Vector<float> qf = q.cast<float>(), kf = k.cast<float>(), vf = v.cast<float>();
    const abc::Vector<double> o_ref = ref.step(s_ref, q, k, v);
    const abc::Vector<double> o32 = f32.step(s_f32, qf, kf, vf).template cast<double>();
    const abc::Vector<double> o16 = f32.step(s_b16, qf, kf, vf).template cast<double>();
    const double norm = std::max(o_ref.norm(), 1e-30);
    e32.push_back((o32 - o_ref).norm() / norm);
    e16.push_back((o16 - o_ref).norm() / norm);
    if (t == decade_end || t == tokens) {
      const abc::Matrix<double> m_ref = memory(s_ref);
      const double m_norm = std::max(m_ref.norm(), 1e-30);
      std::printf("| %ld–%ld | %.2e | %.2e | %.2e | %.2e | %.2e | %.2e |\n", long(decade_start), long(t), median(e32),
                  *std::max_element(e32.begin(), e32.end()), (memory(s_f32) - m_ref).norm() / m_norm, median(e16),
                  *std::max_element(e16.begin(), e16.end()), (memory(s_b16) - m_ref).norm() / m_norm);
      e32.clear();
      e16.clear();
      decade_start = t + 1;
      decade_end *= 10;
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  const Index tokens = argc > 1 ? std::atol(argv[1]) : 100000;
  if (tokens < 1) {
    std::fprintf(stderr, "usage: state_drift [tokens >= 1]\n");
    return 2;
  }
  std::mt19937_64 gen(7);
  std::normal_distribution<double> normal;
  abc::Matrix<double> w(kSlots, kD), proj(kSlots / 2, kD);
  for (Index i = 0; i < w.size(); ++i) w.data()[i] = normal(gen) / std::sqrt(double(kD));
  for (Index i = 0; i < proj.size(); ++i) proj.data()[i] = 1.6 * normal(gen);
  std::printf("state_drift: %ld tokens, n = %ld, d = dv = %ld; relative errors against float64\n", long(tokens),
              long(kSlots), long(kD));
  run("ABC-MLP (prefix normaliser)", [&](auto x) { return abc::control::Mlp<decltype(x)>(cast<decltype(x)>(w)); },
      tokens);
  run("GSA (SlotGates, tau = 8)", [&](auto x) { return abc::control::SlotGates<decltype(x)>(cast<decltype(x)>(w)); },
      tokens);
  run("sliding window", [&](auto x) { return abc::control::SlidingWindow<decltype(x)>{kSlots}; }, tokens);
  run("RFA (D = 32, ungated)",
      [&](auto x) {
        using T = decltype(x);
        return abc::control::RandomFeature<T>(abc::feature::RandomFourier<T>(cast<T>(proj)));
      },
      tokens);
  return 0;
}
