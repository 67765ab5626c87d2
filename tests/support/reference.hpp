// SPDX-License-Identifier: MIT
// abc tests: the independent float64 reference, plain loops written from the equations of
// docs/design.md §1. Nothing here calls the library's kernels.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include <abc/types.hpp>

namespace ref {

using abc::Index;
using Mat = std::vector<std::vector<double>>;  // rows of tokens, deliberately not Eigen

inline Mat zeros(Index r, Index c) { return Mat(static_cast<size_t>(r), std::vector<double>(static_cast<size_t>(c), 0.0)); }

template <class T>
Mat from(const abc::Matrix<T>& m) {
  Mat r = zeros(m.rows(), m.cols());
  for (Index i = 0; i < m.rows(); ++i)
    for (Index j = 0; j < m.cols(); ++j) r[size_t(i)][size_t(j)] = static_cast<double>(m(i, j));
  return r;
}

inline double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

// Σ_j softmax_j(scale · q·keys_j) values_j over the listed memory rows (`readable`); rows not
// readable take no mass. No readable row → zero vector.
inline std::vector<double> read(const std::vector<double>& q, const Mat& keys, const Mat& values,
                                const std::vector<bool>& readable, double scale) {
  const size_t dv = values.empty() ? 0 : values[0].size();
  std::vector<double> out(dv, 0.0);
  double mx = -std::numeric_limits<double>::infinity();
  for (size_t j = 0; j < keys.size(); ++j)
    if (readable[j]) mx = std::max(mx, scale * dot(q, keys[j]));
  if (mx == -std::numeric_limits<double>::infinity()) return out;
  double total = 0;
  for (size_t j = 0; j < keys.size(); ++j) {
    if (!readable[j]) continue;
    const double w = std::exp(scale * dot(q, keys[j]) - mx);
    total += w;
    for (size_t c = 0; c < dv; ++c) out[c] += w * values[j][c];
  }
  for (auto& o : out) o /= total;
  return out;
}

// Softmax attention; causal: query t reads keys 0..t.
inline Mat attention(const Mat& q, const Mat& k, const Mat& v, double scale, bool causal) {
  Mat out;
  for (size_t t = 0; t < q.size(); ++t) {
    const size_t end = causal ? t + 1 : k.size();
    Mat kk(k.begin(), k.begin() + long(end)), vv(v.begin(), v.begin() + long(end));
    out.push_back(read(q[t], kk, vv, std::vector<bool>(end, true), scale));
  }
  if (q.empty()) return out;
  return out;
}

// Causal attention of query t over the last `window` keys (t − window + 1 .. t).
inline Mat window_attention(const Mat& q, const Mat& k, const Mat& v, double scale, Index window) {
  Mat out;
  for (size_t t = 0; t < q.size(); ++t) {
    const size_t begin = t + 1 > size_t(window) ? t + 1 - size_t(window) : 0;
    Mat kk(k.begin() + long(begin), k.begin() + long(t) + 1), vv(v.begin() + long(begin), v.begin() + long(t) + 1);
    out.push_back(read(q[t], kk, vv, std::vector<bool>(kk.size(), true), scale));
  }
  return out;
}

// Memory rows Σ_i weight[i][ℓ] x_i for ℓ = 0..n-1 (K̃ = Φᵀ X, ABC paper Eq. 3).
inline Mat memory(const Mat& weight, const Mat& x, size_t upto) {
  const size_t n = weight.empty() ? 0 : weight[0].size(), d = x.empty() ? 0 : x[0].size();
  Mat m(n, std::vector<double>(d, 0.0));
  for (size_t i = 0; i < upto; ++i)
    for (size_t l = 0; l < n; ++l)
      for (size_t c = 0; c < d; ++c) m[l][c] += weight[i][l] * x[i][c];
  return m;
}

inline abc::Index rows(const Mat& m) { return Index(m.size()); }

// Deterministic data: uniform in [−scale, scale].
template <class T>
abc::Matrix<T> random(Index r, Index c, std::uint64_t seed, double scale = 1.0) {
  std::mt19937_64 g(seed);
  std::uniform_real_distribution<double> u(-scale, scale);
  abc::Matrix<T> m(r, c);
  for (Index i = 0; i < r; ++i)
    for (Index j = 0; j < c; ++j) m(i, j) = static_cast<T>(u(g));
  return m;
}

// Deterministic integers: random(r, c, seed, spread) rounded, times `factor`. Products and sums of a
// few of them are exact in float and double, so a comparison measures the algorithm, not rounding.
template <class T>
abc::Matrix<T> integers(Index r, Index c, std::uint64_t seed, double spread, double factor = 1.0) {
  const abc::Matrix<double> u = random<double>(r, c, seed, spread);
  abc::Matrix<T> m(r, c);
  for (Index i = 0; i < r; ++i)
    for (Index j = 0; j < c; ++j) m(i, j) = static_cast<T>(factor * std::round(u(i, j)));
  return m;
}

}  // namespace ref
