// SPDX-License-Identifier: MIT
// abc tests: kernel::product, the chunked kernels' matrix products, against its scalar form (same
// bits) and against a float64 product written from the definition, over shapes around the batch
// width, both storage orders of A, and the decays applied to C when accumulating.
#include <abc/kernel/product.hpp>

#include <cmath>
#include <vector>

#include "support/batch_width.hpp"
#include "support/catch.hpp"
#include "support/reference.hpp"

namespace product_test {

namespace {

using abc::Index;
using abc::kernel::ProductArgs;

// One shape's operands: A stored row-major or as a transpose (entry (i, p) at p · m + i), B and C
// with a row stride past their width, so that no kernel may assume packed rows.
template <class T>
struct Operands {
  Index m, cols, depth;
  bool a_transposed;
  std::vector<T> a, b, c, row_scale, col_scale;
  Operands(Index m_, Index cols_, Index depth_, bool transposed, std::uint64_t seed)
      : m(m_), cols(cols_), depth(depth_), a_transposed(transposed) {
    const auto fill = [](std::vector<T>& v, Index size, std::uint64_t s) {
      const auto r = ref::random<T>(1, std::max<Index>(size, 1), s);
      v.assign(r.data(), r.data() + size);
    };
    fill(a, m * depth, seed);
    fill(b, depth * (cols + 3), seed + 1);
    fill(c, m * (cols + 2), seed + 2);
    fill(row_scale, m, seed + 3);
    fill(col_scale, cols, seed + 4);
  }
  ProductArgs<T> args(std::vector<T>& out) const {
    return {m, cols, depth, a.data(), a_transposed ? 1 : depth, a_transposed ? m : 1, b.data(), cols + 3,
            out.data(), cols + 2};
  }
  double a_at(Index i, Index p) const { return double(a[std::size_t(a_transposed ? p * m + i : i * depth + p)]); }
};

// How C is scaled before the sum is added (when accumulating).
enum class Scaled { no, rows, cols };

// C's entries from the definition in float64: α Σ_p A(i, p) B(p, j), or s C(i, j) + Σ_p ... for s
// the row's or the column's scale (or 1).
template <class T>
std::vector<double> expected(const Operands<T>& x, bool accumulate, double alpha, Scaled scaled) {
  std::vector<double> out(x.c.size());
  for (Index i = 0; i < x.m; ++i)
    for (Index j = 0; j < x.cols + 2; ++j) {
      const std::size_t at = std::size_t(i * (x.cols + 2) + j);
      if (j >= x.cols) {  // past the width: untouched
        out[at] = double(x.c[at]);
        continue;
      }
      double s = 0;
      for (Index p = 0; p < x.depth; ++p) s += x.a_at(i, p) * double(x.b[std::size_t(p * (x.cols + 3) + j)]);
      double c0 = double(x.c[at]);
      if (scaled == Scaled::rows) c0 *= double(x.row_scale[std::size_t(i)]);
      if (scaled == Scaled::cols) c0 *= double(x.col_scale[std::size_t(j)]);
      out[at] = accumulate ? c0 + s : alpha * s;
    }
  return out;
}

template <class T>
double tolerance(Index depth) {
  return (std::is_same<T, float>::value ? 2e-6 : 4e-15) * double(depth + 2);
}

template <class T, bool Accumulate>
void check_shape(Index m, Index cols, Index depth, bool transposed, Scaled scaled) {
  INFO("m = " << m << ", cols = " << cols << ", depth = " << depth << (transposed ? ", A transposed" : "")
              << (scaled == Scaled::rows ? ", C scaled by rows" : scaled == Scaled::cols ? ", C scaled by columns" : ""));
  const Operands<T> x(m, cols, depth, transposed, std::uint64_t(m * 1000 + cols * 10 + depth));
  const T alpha = Accumulate ? T(1) : T(0.375);
  std::vector<T> simd = x.c, oracle = x.c;
  ProductArgs<T> a = x.args(simd), b = x.args(oracle);
  if (scaled == Scaled::rows) a.row_scale = b.row_scale = x.row_scale.data();
  if (scaled == Scaled::cols) a.col_scale = b.col_scale = x.col_scale.data();
  abc::kernel::product<Accumulate>(a, alpha);
  abc::kernel::scalar::product<Accumulate>(b, alpha);
  // The same chain of multiply-adds per entry on both paths: the same bits.
  REQUIRE(simd == oracle);
  const std::vector<double> want = expected(x, Accumulate, double(alpha), scaled);
  for (std::size_t e = 0; e < want.size(); ++e) REQUIRE(std::abs(double(simd[e]) - want[e]) <= tolerance<T>(depth));
}

}  // namespace

TEMPLATE_TEST_CASE("product equals its scalar form bit for bit and the float64 product, at every tail",
                   "[kernel][product]", float, double) {
  using T = TestType;
  const Index w = ref::batch_width<T>();
  for (Index m : {1, 3, 4, 5, 9})
    for (Index cols : {Index(1), w - 1, w, w + 1, 2 * w + 3, 3 * w, 4 * w, 4 * w + 5, 7 * w + 1, Index(64)})
      for (Index depth : {0, 1, 7, 16})
        for (bool transposed : {false, true}) {
          if (cols < 1) continue;
          check_shape<T, false>(m, cols, depth, transposed, Scaled::no);
          for (Scaled s : {Scaled::no, Scaled::rows, Scaled::cols}) check_shape<T, true>(m, cols, depth, transposed, s);
        }
}

TEMPLATE_TEST_CASE("a product's row does not depend on the rows multiplied with it", "[kernel][product]", float,
                   double) {
  // What makes a token's control logits the same in a chunk, in a multi-head layer's stacked
  // product and alone (detail::project), whatever tile the row falls in.
  using T = TestType;
  const Index m = 11, cols = 4 * ref::batch_width<T>() + 3, depth = 33;
  const Operands<T> x(m, cols, depth, false, 7);
  std::vector<T> all = x.c;
  abc::kernel::product<false>(x.args(all), T(0.5));
  for (Index i = 0; i < m; ++i) {
    std::vector<T> one(std::size_t(cols + 2), T(0));
    ProductArgs<T> row = x.args(one);
    row.m = 1;
    row.a = x.a.data() + i * depth;
    abc::kernel::product<false>(row, T(0.5));
    for (Index j = 0; j < cols; ++j) REQUIRE(one[std::size_t(j)] == all[std::size_t(i * (cols + 2) + j)]);
  }
}

TEST_CASE("product_args reads Eigen blocks' strides: a transpose as A, a column-major matrix's transpose as B",
          "[kernel][product]") {
  const abc::Matrix<double> a = ref::random<double>(5, 6, 1);
  const abc::ColMatrix<double> b_t = ref::random<double>(7, 6, 2);  // B = b_tᵀ [6 × 7], rows contiguous
  abc::Matrix<double> c(5, 7), c_from_transpose(5, 7);
  abc::kernel::product<false>(abc::kernel::product_args(a, b_t.transpose(), c), 2.0);
  const abc::Matrix<double> want = 2.0 * a * b_t.transpose();
  REQUIRE((c - want).cwiseAbs().maxCoeff() <= 1e-14);
  const abc::Matrix<double> a_t = a.transpose();  // A given as the transpose of its transpose
  abc::kernel::product<false>(abc::kernel::product_args(a_t.transpose(), b_t.transpose(), c_from_transpose), 2.0);
  REQUIRE(c_from_transpose == c);
}

}  // namespace product_test
