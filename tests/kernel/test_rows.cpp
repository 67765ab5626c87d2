// SPDX-License-Identifier: MIT
// abc tests: the SIMD row kernels against the scalar ones (kernel/scalar.hpp is the oracle), at
// lengths around the batch width and at unaligned addresses.
#include <abc/kernel/softmax_slots.hpp>
#include <abc/kernel/exp_sum.hpp>
#include <abc/kernel/finite.hpp>
#include <abc/kernel/forget_gate.hpp>
#include <abc/kernel/online_normalise.hpp>
#include <abc/kernel/rows.hpp>
#include <abc/kernel/sin_cos.hpp>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "support/batch_width.hpp"
#include "support/catch.hpp"
#include "support/reference.hpp"

namespace rows_test {

namespace {

using abc::Index;

template <class T>
Index width() {
  return ref::batch_width<T>();
}

template <class T>
std::vector<Index> lengths() {
  const Index w = width<T>();
  return {0, 1, w - 1, w, w + 1, 2 * w + 3, 64, 65, 1000};
}

// Buffers with a one-element offset so the kernels see unaligned pointers.
template <class T>
std::vector<T> data(Index n, std::uint64_t seed) {
  const auto m = ref::random<T>(1, n + 1, seed);
  return std::vector<T>(m.data(), m.data() + n + 1);
}

// Scores for the slot softmax tests, drawn from `rng`: NaN, −∞, ±1e30 and (every fourth trial) +∞
// scattered at random among finite scores, and a fifth of the slots unwritten.
template <class T>
void scattered_scores(std::mt19937_64& rng, int trial, std::vector<T>& logits, std::vector<std::uint8_t>& written) {
  constexpr T inf = std::numeric_limits<T>::infinity();
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  for (std::size_t l = 0; l < logits.size(); ++l) {
    const double u = unit(rng);
    T x = T(60.0 * unit(rng) - 30.0);
    if (u < 0.10) x = std::numeric_limits<T>::quiet_NaN();
    else if (u < 0.14) x = -inf;
    else if (u < 0.15 && trial % 4 == 0) x = inf;
    else if (u < 0.18) x = T(unit(rng) < 0.5 ? -1e30 : 1e30);
    logits[l] = x;
    written[l] = unit(rng) < 0.8 ? 1 : 0;
  }
}

template <class T>
double tol(Index n) {
  return (std::is_same<T, float>::value ? 1e-6 : 1e-14) * double(std::max<Index>(n, 1));
}

}  // namespace

TEMPLATE_TEST_CASE("row kernels match the scalar oracle at every tail length", "[kernel][rows]", float, double) {
  using T = TestType;
  for (Index n : lengths<T>())
    for (Index off : {Index(0), Index(1)}) {
      INFO("n = " << n << ", offset " << off);
      auto row_a = data<T>(n, 1), row_b = row_a, x = data<T>(n, 2), q = data<T>(n, 3);
      auto out_a = data<T>(n, 4), out_b = out_a;
      const T a = T(0.75), w = T(-1.25), p = T(0.3);
      const T d_simd = abc::kernel::update_dot(row_a.data() + off, a, w, x.data() + off, q.data() + off, n);
      const T d_ref = abc::kernel::scalar::update_dot(row_b.data() + off, a, w, x.data() + off, q.data() + off, n);
      REQUIRE(std::abs(double(d_simd - d_ref)) <= tol<T>(n));
      for (Index j = 0; j <= n; ++j) REQUIRE(std::abs(double(row_a[size_t(j)] - row_b[size_t(j)])) <= tol<T>(1));
      abc::kernel::update_axpy(row_a.data() + off, a, w, x.data() + off, p, out_a.data() + off, n);
      abc::kernel::scalar::update_axpy(row_b.data() + off, a, w, x.data() + off, p, out_b.data() + off, n);
      for (Index j = 0; j <= n; ++j) {
        REQUIRE(std::abs(double(row_a[size_t(j)] - row_b[size_t(j)])) <= tol<T>(1));
        REQUIRE(std::abs(double(out_a[size_t(j)] - out_b[size_t(j)])) <= tol<T>(1));
      }
      REQUIRE(std::abs(double(abc::kernel::dot(x.data() + off, q.data() + off, n) -
                              abc::kernel::scalar::dot(x.data() + off, q.data() + off, n))) <= tol<T>(n));
      abc::kernel::axpy(p, x.data() + off, out_a.data() + off, n);
      abc::kernel::scalar::axpy(p, x.data() + off, out_b.data() + off, n);
      for (Index j = 0; j <= n; ++j) REQUIRE(std::abs(double(out_a[size_t(j)] - out_b[size_t(j)])) <= tol<T>(1));
      // Nothing outside [off, off + n) is written.
      if (off == 1) REQUIRE(row_a[0] == row_b[0]);
    }
}

// columns_dot / rows_axpy: the step's two passes over whole blocks (columns_dot keeps slot blocks
// of 4 batches, then one block of the 1 to 3 full batches left, in registers; rows_axpy the same
// for column blocks). Counts and widths around those blocks, a leading dimension past the block
// (padding that must stay untouched) and an unaligned base.
template <bool Update, class T>
void check_blocks() {
  const Index wd = width<T>();
  const std::vector<Index> counts = {0, 1, wd - 1, wd, wd + 1, 2 * wd + 3, 3 * wd, 4 * wd, 4 * wd + 1, 5 * wd + 3,
                                     7 * wd + 5, 64};
  const std::vector<Index> widths = {1, 2, wd - 1, wd, wd + 1, 3 * wd + 1, 4 * wd, 4 * wd + 1, 5 * wd + 3, 64};
  for (Index n : counts)
    for (Index d : widths) {
      if (d < 1) continue;
      INFO("update " << Update << ", n = " << n << ", d = " << d);
      const T scale = T(0.125);
      const auto a = data<T>(n, 21), w = data<T>(n, 22), x = data<T>(d, 23), q = data<T>(d, 24);
      {  // K̃: n slots × d columns, column-major, column j at off + j · ld
        const Index ld = n + 3, off = 1, size = off + d * ld;
        auto cols_a = data<T>(size, 20), cols_b = cols_a;
        std::vector<T> dots_a(size_t(n) + 1, T(7)), dots_b = dots_a;
        abc::kernel::columns_dot<Update>(cols_a.data() + off, ld, n, d, a.data(), w.data(), x.data(), q.data(), scale,
                                         dots_a.data());
        abc::kernel::scalar::columns_dot<Update>(cols_b.data() + off, ld, n, d, a.data(), w.data(), x.data(), q.data(),
                                                 scale, dots_b.data());
        for (Index l = 0; l < n; ++l) REQUIRE(std::abs(double(dots_a[size_t(l)] - dots_b[size_t(l)])) <= tol<T>(d));
        REQUIRE(dots_a[size_t(n)] == T(7));  // nothing written past the last slot
        for (Index i = 0; i < size; ++i) REQUIRE(std::abs(double(cols_a[size_t(i)] - cols_b[size_t(i)])) <= tol<T>(1));
        for (Index j = 0; j < d; ++j)  // padding after each column and before the block is never touched
          for (Index l = n; l < ld; ++l) REQUIRE(cols_a[size_t(off + j * ld + l)] == cols_b[size_t(off + j * ld + l)]);
        REQUIRE(cols_a[0] == cols_b[0]);
        if (!Update) REQUIRE(cols_a == data<T>(size, 20));  // a read-only pass leaves the block as it was
      }
      {  // Ṽ: n rows of width d, row-major, row l at off + l · ld
        const Index ld = d + 3, off = 1, size = off + n * ld;
        auto rows_a = data<T>(size, 20), rows_b = rows_a;
        auto p = data<T>(n, 25);
        if (n > 2) p[1] = T(0);  // a zero weight (an empty or masked slot)
        std::vector<T> out_a(size_t(d) + 1, T(7)), out_b = out_a;
        abc::kernel::rows_axpy<Update>(rows_a.data() + off, ld, n, d, a.data(), w.data(), x.data(), p.data() + 1,
                                       out_a.data());
        abc::kernel::scalar::rows_axpy<Update>(rows_b.data() + off, ld, n, d, a.data(), w.data(), x.data(),
                                               p.data() + 1, out_b.data());
        for (Index j = 0; j < d; ++j) REQUIRE(std::abs(double(out_a[size_t(j)] - out_b[size_t(j)])) <= tol<T>(n));
        REQUIRE(out_a[size_t(d)] == T(7));
        for (Index i = 0; i < size; ++i) REQUIRE(std::abs(double(rows_a[size_t(i)] - rows_b[size_t(i)])) <= tol<T>(1));
        for (Index l = 0; l < n; ++l)
          for (Index j = d; j < ld; ++j) REQUIRE(rows_a[size_t(off + l * ld + j)] == rows_b[size_t(off + l * ld + j)]);
        if (!Update) REQUIRE(rows_a == data<T>(size, 20));
      }
    }
}

// Pass::decay, the passes of a gated sparse step: a decayed entry is a_l · entry and only the
// slots with a write take the multiply-add, which equals Pass::update's result to the bit (apart
// from the sign of a zero entry, which random data does not make). The writes fall in a full block,
// a single batch and the scalar tail, leaving whole batches with none.
template <class T>
void check_decay_blocks() {
  const Index wd = width<T>();
  const std::vector<Index> counts = {1, wd - 1, wd, wd + 1, 4 * wd, 4 * wd + 1, 5 * wd + 3, 64};
  const std::vector<Index> widths = {1, wd - 1, wd + 1, 4 * wd, 5 * wd + 3, 64};
  for (Index n : counts)
    for (Index d : widths) {
      if (d < 1 || n < 1) continue;
      INFO("n = " << n << ", d = " << d);
      const T scale = T(0.125);
      const auto a = data<T>(n, 41), x = data<T>(d, 43), q = data<T>(d, 44);
      std::vector<T> w(static_cast<size_t>(n), T(0));
      for (Index l : {Index(0), n / 2, n - 1}) w[size_t(l)] = T(0.75) + T(l % 3);
      const auto u = abc::kernel::Pass::update, dk = abc::kernel::Pass::decay;
      {
        const Index ld = n + 3, off = 1, size = off + d * ld;
        auto cols_a = data<T>(size, 40), cols_b = cols_a;
        std::vector<T> dots_a(static_cast<size_t>(n)), dots_b = dots_a;
        abc::kernel::columns_pass<dk>(cols_a.data() + off, ld, n, d, a.data(), w.data(), x.data(), q.data(), scale,
                                      dots_a.data());
        abc::kernel::columns_pass<u>(cols_b.data() + off, ld, n, d, a.data(), w.data(), x.data(), q.data(), scale,
                                     dots_b.data());
        REQUIRE(dots_a == dots_b);
        REQUIRE(cols_a == cols_b);
        const auto orig = data<T>(size, 40);
        for (Index l = 0; l < n; ++l)  // an entry with no write: the decay's product, one rounding
          if (w[size_t(l)] == T(0))
            for (Index j = 0; j < d; ++j) REQUIRE(cols_a[size_t(off + j * ld + l)] == a[size_t(l)] * orig[size_t(off + j * ld + l)]);
      }
      {
        const Index ld = d + 3, off = 1, size = off + n * ld;
        auto rows_a = data<T>(size, 40), rows_b = rows_a;
        const auto p = data<T>(n, 45);
        std::vector<T> out_a(static_cast<size_t>(d)), out_b = out_a;
        abc::kernel::rows_pass<dk>(rows_a.data() + off, ld, n, d, a.data(), w.data(), x.data(), p.data(), out_a.data());
        abc::kernel::rows_pass<u>(rows_b.data() + off, ld, n, d, a.data(), w.data(), x.data(), p.data(), out_b.data());
        REQUIRE(out_a == out_b);
        REQUIRE(rows_a == rows_b);
      }
    }
}

// Pass::overwrite, the read pass of a ring buffer's step: slot l's entries become weight · x_j as
// the pass goes, which must give the bits of writing the row first and then reading (apply_sparse's
// order): the entries, every dot, and the entries around the block untouched. The slot falls in
// each batch of a full block, at each end of a single batch, of a narrower batch and of the scalar
// tail, and outside the block (then the pass only reads).
template <class T>
void check_overwrite_blocks() {
  const Index wd = width<T>();
  const std::vector<Index> counts = {1, wd - 1, wd, wd + 1, 4 * wd, 4 * wd + 1, 5 * wd + 3, 64};
  const std::vector<Index> widths = {1, wd + 1, 5 * wd + 3, 64};
  for (Index n : counts)
    for (Index d : widths) {
      if (d < 1 || n < 1) continue;
      std::vector<Index> slots = {-1, n, 0, n - 1, n / 2};
      for (Index edge : {wd - 1, wd, 2 * wd, 3 * wd - 1, 4 * wd - 1, 4 * wd, 5 * wd - 1, 5 * wd, 5 * wd + wd / 2})
        if (edge < n) slots.push_back(edge);
      for (Index slot : slots) {
        INFO("n = " << n << ", d = " << d << ", slot = " << slot);
        const T scale = T(0.125), weight = T(0.75);
        const auto x = data<T>(d, 43), q = data<T>(d, 44);
        const Index ld = n + 3, off = 1, size = off + d * ld;
        auto cols_a = data<T>(size, 40), cols_b = cols_a;
        std::vector<T> dots_a(static_cast<size_t>(n)), dots_b = dots_a;
        const T* none = nullptr;  // an overwrite reads no decays or writes
        abc::kernel::columns_pass<abc::kernel::Pass::overwrite>(cols_a.data() + off, ld, n, d, none, none, x.data(),
                                                                q.data(), scale, dots_a.data(),
                                                                abc::kernel::OneWrite<T>{slot, weight});
        if (slot >= 0 && slot < n)
          for (Index j = 0; j < d; ++j) cols_b[size_t(off + j * ld + slot)] = weight * x[size_t(j)];
        const std::vector<T> unused(static_cast<size_t>(n));
        abc::kernel::columns_pass<abc::kernel::Pass::read>(cols_b.data() + off, ld, n, d, unused.data(), unused.data(),
                                                           x.data(), q.data(), scale, dots_b.data());
        REQUIRE(cols_a == cols_b);
        REQUIRE(dots_a == dots_b);
      }
    }
}

// The passes keep a block of up to four batches in registers and take the 1 to 3 full batches left
// after the blocks of four as one block (kernel::impl::for_blocks): every batch of a block must get
// the bits it gets alone. Each pass over r full batches and a tail is compared, bit for bit (state
// and output), with the same pass called once per batch and once for the tail.
template <class T>
void check_block_grouping() {
  using abc::kernel::Pass;
  using abc::kernel::OneWrite;
  const Index wd = width<T>();
  const auto same = [](const std::vector<T>& x, const std::vector<T>& y) {
    return std::memcmp(x.data(), y.data(), x.size() * sizeof(T)) == 0;  // ±0 and every NaN bit
  };
  for (Index r = 1; r <= 7; ++r)
    for (Index tail : {Index(0), Index(3)}) {
      const Index n = r * wd + tail, d = 2 * wd + 1;
      // The calls over [0, n) split at the batches: [c · wd, (c + 1) · wd) for c < r, then the tail.
      std::vector<Index> cuts;
      for (Index c = 0; c <= r; ++c) cuts.push_back(c * wd);
      if (tail > 0) cuts.push_back(n);
      const T scale = T(0.125);
      auto a = data<T>(n, 51), w = data<T>(n, 52);
      w[size_t(n / 2)] = T(0);  // a slot with no write, for Pass::decay
      const auto x = data<T>(std::max(n, d), 53), q = data<T>(d, 54);
      auto a_rows = data<T>(d, 62), w_rows = data<T>(d, 63);  // Ṽ's d rows: their decays, writes, weights
      const auto p_rows = data<T>(d, 64);
      w_rows[size_t(d / 2)] = T(0);
      const auto passes = [&](auto pass) {
        constexpr Pass P = decltype(pass)::value;
        for (Index slot : {Index(-1), Index(0), wd + 1, n - 1}) {
          INFO("pass " << int(P) << ", r = " << r << ", tail = " << tail << ", slot = " << slot);
          const OneWrite<T> one{P == Pass::overwrite ? slot : Index(-1), T(0.75)};
          {  // K̃: n slots × d columns; the calls split the slots
            const Index ld = n + 1;
            auto cols_a = data<T>(d * ld, 50), cols_b = cols_a;
            std::vector<T> dots_a(static_cast<size_t>(n)), dots_b(static_cast<size_t>(n));
            abc::kernel::columns_pass<P>(cols_a.data(), ld, n, d, a.data(), w.data(), x.data(), q.data(), scale,
                                         dots_a.data(), one);
            for (size_t i = 0; i + 1 < cuts.size(); ++i) {
              const Index l0 = cuts[i];
              abc::kernel::columns_pass<P>(cols_b.data() + l0, ld, cuts[i + 1] - l0, d, a.data() + l0, w.data() + l0,
                                           x.data(), q.data(), scale, dots_b.data() + l0, one.from(l0));
            }
            REQUIRE(same(cols_a, cols_b));
            REQUIRE(same(dots_a, dots_b));
          }
          if constexpr (P != Pass::overwrite) {  // Ṽ: d rows of width n; the calls split the columns
            const Index ld = n + 1;
            auto rows_a = data<T>(d * ld, 56), rows_b = rows_a;
            std::vector<T> out_a(static_cast<size_t>(n)), out_b(static_cast<size_t>(n));
            abc::kernel::rows_pass<P>(rows_a.data(), ld, d, n, a_rows.data(), w_rows.data(), x.data(), p_rows.data(),
                                      out_a.data());
            for (size_t i = 0; i + 1 < cuts.size(); ++i) {
              const Index j0 = cuts[i];
              abc::kernel::rows_pass<P>(rows_b.data() + j0, ld, d, cuts[i + 1] - j0, a_rows.data(), w_rows.data(),
                                        x.data() + j0, p_rows.data(), out_b.data() + j0);
            }
            REQUIRE(same(rows_a, rows_b));
            REQUIRE(same(out_a, out_b));
          }
        }
      };
      passes(std::integral_constant<Pass, Pass::read>{});
      passes(std::integral_constant<Pass, Pass::update>{});
      passes(std::integral_constant<Pass, Pass::decay>{});
      passes(std::integral_constant<Pass, Pass::overwrite>{});
      {  // chunk_scores: token t of a chunk over n slots; the calls split the slots
        const Index t = 2, ld = n;
        auto e_a = data<T>((t + 1) * ld, 57), e_b = e_a, dcum_a = data<T>(n, 58), dcum_b = dcum_a;
        const auto g = data<T>(t + 1, 59), prev = data<T>(n, 60);
        std::vector<T> out_a(static_cast<size_t>(n)), out_b(static_cast<size_t>(n));
        abc::kernel::chunk_scores<true>(e_a.data(), n, t, a.data(), w.data(), g.data(), dcum_a.data(), prev.data(),
                                        out_a.data());
        // chunk_scores' rows are n apart: the split calls see the same rows through a copy per part.
        for (size_t i = 0; i + 1 < cuts.size(); ++i) {
          const Index l0 = cuts[i], m = cuts[i + 1] - l0;
          std::vector<T> part(static_cast<size_t>((t + 1) * m));
          for (Index k = 0; k <= t; ++k)
            std::copy_n(e_b.begin() + k * ld + l0, m, part.begin() + k * m);
          abc::kernel::chunk_scores<true>(part.data(), m, t, a.data() + l0, w.data() + l0, g.data(), dcum_b.data() + l0,
                                          prev.data() + l0, out_b.data() + l0);
          for (Index k = 0; k <= t; ++k)
            std::copy_n(part.begin() + k * m, m, e_b.begin() + k * ld + l0);
        }
        INFO("chunk_scores, r = " << r << ", tail = " << tail);
        REQUIRE(same(e_a, e_b));
        REQUIRE(same(dcum_a, dcum_b));
        REQUIRE(same(out_a, out_b));
      }
      {  // weighted_rows: d rows of width n; the calls split the columns
        const auto rows = data<T>(d * n, 61);
        std::vector<T> out_a(static_cast<size_t>(n)), out_b(static_cast<size_t>(n));
        abc::kernel::weighted_rows(rows.data(), n, d, n, p_rows.data(), out_a.data());
        for (size_t i = 0; i + 1 < cuts.size(); ++i) {
          const Index j0 = cuts[i];
          abc::kernel::weighted_rows(rows.data() + j0, n, d, cuts[i + 1] - j0, p_rows.data(), out_b.data() + j0);
        }
        INFO("weighted_rows, r = " << r << ", tail = " << tail);
        REQUIRE(same(out_a, out_b));
      }
    }
}

TEMPLATE_TEST_CASE("a pass's block of several batches gives each batch the bits it gets alone", "[kernel][rows]",
                   float, double) {
  check_block_grouping<TestType>();
}

// weighted_rows_interleaved (a decode step's logits): the SIMD path against the scalar oracle bit
// for bit; the oracle against a float64 plain loop; every column's bits the same whether it is
// summed with all dv columns or alone (a memory's logits inside a layer's stacked W); a zero weight
// adds nothing. Rows are ld = dv + 1 apart, read from an unaligned start.
template <class T>
void check_interleaved_rows() {
  const Index w = width<T>();
  for (const Index n : {Index(0), Index(1), Index(2), Index(3), w - 1, w + 1, Index(64), Index(65)})
    for (const Index dv : {Index(1), w - 1, w, w + 1, 3 * w + 5, 4 * w, 5 * w + 3, 9 * w + 1}) {
      const Index ld = dv + 1;
      const auto rows = data<T>(std::max<Index>(n, 1) * ld, std::uint64_t(300 + n * 13 + dv));
      auto p = data<T>(std::max<Index>(n, 1), std::uint64_t(400 + n));
      if (n > 2) p[size_t(n / 2)] = T(0);
      const T* r = rows.data() + 1;  // unaligned
      std::vector<T> simd(size_t(dv), T(-7)), oracle(size_t(dv), T(-7)), alone(size_t(dv), T(-7));
      abc::kernel::weighted_rows_interleaved(r, ld, n, dv, p.data(), simd.data());
      abc::kernel::scalar::weighted_rows_interleaved(r, ld, 0, n, dv, p.data(), oracle.data());
      for (Index j = 0; j < dv; ++j) abc::kernel::weighted_rows_interleaved(r + j, ld, n, 1, p.data(), &alone[size_t(j)]);
      INFO("n = " << n << ", dv = " << dv);
      REQUIRE(std::memcmp(simd.data(), oracle.data(), simd.size() * sizeof(T)) == 0);
      REQUIRE(std::memcmp(simd.data(), alone.data(), simd.size() * sizeof(T)) == 0);
      for (Index j = 0; j < dv; ++j) {
        double expect = 0;
        for (Index l = 0; l < n; ++l) expect += double(p[size_t(l)]) * double(r[l * ld + j]);
        INFO("column " << j);
        REQUIRE(std::abs(double(oracle[size_t(j)]) - expect) <= tol<T>(n));
      }
    }
}
TEMPLATE_TEST_CASE("weighted_rows_interleaved: the scalar oracle's bits in every column, alone or among others",
                   "[kernel][rows]", float, double) {
  check_interleaved_rows<TestType>();
}

// The scalar oracles themselves, against float64 plain loops of the definitions.
template <bool Update, class T>
void check_scalar_blocks_against_definition() {
  const Index n = 5, d = 7, ld_k = 8, ld_v = 9;
  auto cols = data<T>(d * ld_k, 30), rows = data<T>(n * ld_v, 36);
  const auto a = data<T>(n, 31), w = data<T>(n, 32), x = data<T>(d, 33), q = data<T>(d, 34), p = data<T>(n, 35);
  std::vector<double> expect_cols(cols.begin(), cols.end()), expect_rows(rows.begin(), rows.end());
  std::vector<double> expect_dots(static_cast<size_t>(n)), expect_out(static_cast<size_t>(d), 0.0);
  for (Index l = 0; l < n; ++l) {
    double dot = 0;
    for (Index j = 0; j < d; ++j) {
      double& k = expect_cols[size_t(l + j * ld_k)];
      double& v = expect_rows[size_t(l * ld_v + j)];
      if (Update) {
        k = double(a[size_t(l)]) * k + double(w[size_t(l)]) * double(x[size_t(j)]);
        v = double(a[size_t(l)]) * v + double(w[size_t(l)]) * double(x[size_t(j)]);
      }
      dot += k * double(q[size_t(j)]);
      expect_out[size_t(j)] += double(p[size_t(l)]) * v;
    }
    expect_dots[size_t(l)] = 0.5 * dot;
  }
  std::vector<T> dots(static_cast<size_t>(n)), out(static_cast<size_t>(d));
  abc::kernel::scalar::columns_dot<Update>(cols.data(), ld_k, n, d, a.data(), w.data(), x.data(), q.data(), T(0.5),
                                           dots.data());
  abc::kernel::scalar::rows_axpy<Update>(rows.data(), ld_v, n, d, a.data(), w.data(), x.data(), p.data(), out.data());
  for (Index l = 0; l < n; ++l) REQUIRE(std::abs(double(dots[size_t(l)]) - expect_dots[size_t(l)]) <= tol<T>(d));
  for (Index j = 0; j < d; ++j) REQUIRE(std::abs(double(out[size_t(j)]) - expect_out[size_t(j)]) <= tol<T>(n * d));
  for (Index i = 0; i < d * ld_k; ++i) REQUIRE(std::abs(double(cols[size_t(i)]) - expect_cols[size_t(i)]) <= tol<T>(2));
  for (Index i = 0; i < n * ld_v; ++i) REQUIRE(std::abs(double(rows[size_t(i)]) - expect_rows[size_t(i)]) <= tol<T>(2));
}

TEMPLATE_TEST_CASE("columns_dot and rows_axpy match the scalar oracle over whole blocks", "[kernel][rows]", float,
                   double) {
  check_blocks<true, TestType>();
  check_blocks<false, TestType>();
}

TEMPLATE_TEST_CASE("the decay passes of a gated sparse step equal the dense update passes", "[kernel][rows]", float,
                   double) {
  check_decay_blocks<TestType>();
}

TEMPLATE_TEST_CASE("a read pass that overwrites one slot equals the write followed by a read, bit for bit",
                   "[kernel][rows]", float, double) {
  check_overwrite_blocks<TestType>();
}

// A read pass skips the rows whose weight is 0: a row there holding NaN or ±∞ must not reach the
// output (0 · NaN is NaN). The pass tests the weights once and, when none is 0, reads every row
// without testing each (kernel::rows_pass): so one zero weight at any place, in a full batch or
// in the tail, must still be found. The output is compared with the float64 sum of the other rows.
TEMPLATE_TEST_CASE("a read pass skips every row of weight 0, wherever it is, and reads all rows when none is",
                   "[kernel][rows]", float, double) {
  using T = TestType;
  const Index w = width<T>();
  for (const Index n : {Index(1), w - 1, w, w + 1, 2 * w + 3, 4 * w, 4 * w + 1, Index(65)}) {
    for (const Index dv : {Index(1), w, 4 * w + 3}) {
      const auto rows = ref::random<T>(n, dv, std::uint64_t(100 + n * 7 + dv));
      const auto weights = ref::random<T>(1, n, std::uint64_t(200 + n));
      for (Index zero = -1; zero < n; ++zero) {  // −1: no weight is 0
        std::vector<T> p(weights.data(), weights.data() + n), r(rows.data(), rows.data() + n * dv);
        for (auto& x : p) x = std::abs(x) + T(0.25);  // positive, never 0
        if (zero >= 0) {
          p[size_t(zero)] = T(0);
          for (Index j = 0; j < dv; ++j)
            r[size_t(zero * dv + j)] = j % 2 ? std::numeric_limits<T>::quiet_NaN() : std::numeric_limits<T>::infinity();
        }
        std::vector<T> out(size_t(dv), T(-7));
        abc::kernel::rows_pass<abc::kernel::Pass::read>(r.data(), dv, n, dv, static_cast<const T*>(nullptr),
                                                         static_cast<const T*>(nullptr), static_cast<const T*>(nullptr),
                                                         p.data(), out.data());
        for (Index j = 0; j < dv; ++j) {
          double expect = 0;
          for (Index l = 0; l < n; ++l)
            if (l != zero) expect += double(p[size_t(l)]) * double(r[size_t(l * dv + j)]);
          INFO("n = " << n << ", dv = " << dv << ", zero weight at " << zero << ", column " << j);
          REQUIRE(std::isfinite(out[size_t(j)]));
          REQUIRE(std::abs(double(out[size_t(j)]) - expect) <= tol<T>(n) * 4);
        }
      }
    }
  }
}

TEMPLATE_TEST_CASE("the scalar block kernels compute their definitions", "[kernel][rows]", float, double) {
  check_scalar_blocks_against_definition<true, TestType>();
  check_scalar_blocks_against_definition<false, TestType>();
}

TEMPLATE_TEST_CASE("online_normalise matches the scalar oracle, including −∞ and huge log-weights",
                   "[kernel][online_normalise]", float, double) {
  using T = TestType;
  constexpr T inf = std::numeric_limits<T>::infinity();
  for (Index n : lengths<T>())
    for (bool prefix : {true, false}) {
      INFO("n = " << n << ", prefix " << prefix);
      std::vector<T> m_a(size_t(n) + 1, -inf), z_a(size_t(n) + 1, T(0)), m_b = m_a, z_b = z_a;
      std::vector<T> dec_a(size_t(n) + 1), wr_a(size_t(n) + 1), dec_b(size_t(n) + 1), wr_b(size_t(n) + 1);
      for (int token = 0; token < 6; ++token) {
        auto lam = data<T>(n, 10 + std::uint64_t(token));
        for (Index j = 0; j <= n; ++j) {
          if ((j + token) % 5 == 0) lam[size_t(j)] = -inf;                  // no mass (relu zero)
          if ((j + token) % 7 == 3) lam[size_t(j)] *= T(1e4);               // extreme logits
        }
        abc::kernel::online_normalise(lam.data() + 1, m_a.data() + 1, z_a.data() + 1, dec_a.data() + 1, wr_a.data() + 1, n, prefix);
        abc::kernel::scalar::online_normalise(lam.data() + 1, m_b.data() + 1, z_b.data() + 1, dec_b.data() + 1, wr_b.data() + 1, n, prefix);
        for (Index j = 1; j <= n; ++j) {
          const size_t i = size_t(j);
          REQUIRE(std::isfinite(double(dec_a[i])));
          REQUIRE(std::isfinite(double(wr_a[i])));
          REQUIRE(m_a[i] == m_b[i]);
          REQUIRE(std::abs(double(z_a[i] - z_b[i])) <= 8 * tol<T>(1) * double(std::max(T(1), z_b[i])));
          REQUIRE(std::abs(double(dec_a[i] - dec_b[i])) <= 8 * tol<T>(1));
          REQUIRE(std::abs(double(wr_a[i] - wr_b[i])) <= 8 * tol<T>(1));
          REQUIRE(dec_a[i] >= T(0));
          REQUIRE(dec_a[i] <= T(1) + T(8) * std::numeric_limits<T>::epsilon());
          REQUIRE(wr_a[i] >= T(0));
          REQUIRE(wr_a[i] <= T(1) + T(8) * std::numeric_limits<T>::epsilon());
        }
      }
    }
}

// block_normalise against its definition in float64: the block's tokens through the per-slot
// running softmax one at a time (m' = max(m, λ), z' = e^{m−m'} z + e^{λ−m'}), then each token's
// weight in the memory at the block's end, e^{λ_i − m_end} / z_end, and what the block leaves of the
// memory before it, e^{m_start − m_end} z_start / z_end. Three blocks in a row, so later blocks start
// from a state with mass; −∞ entries, a slot with no mass in a block, extreme log-weights (whose
// weights underflow to 0) and slots past the last full batch.
TEMPLATE_TEST_CASE("block_normalise matches the token-by-token running softmax in float64",
                   "[kernel][online_normalise]", float, double) {
  using T = TestType;
  constexpr T inf = std::numeric_limits<T>::infinity();
  constexpr double eps = std::numeric_limits<T>::epsilon(), inf64 = std::numeric_limits<double>::infinity();
  for (Index n : lengths<T>())
    for (Index c : {1, 2, 7, 16, 33}) {
      INFO("n = " << n << ", c = " << c);
      std::vector<T> m(std::size_t(n), -inf), z(std::size_t(n), T(0)), dcum(std::size_t(n), T(0));
      std::vector<double> m_ref(std::size_t(n), -inf64), z_ref(std::size_t(n), 0.0);
      for (int block = 0; block < 3; ++block) {
        std::vector<T> lam(std::size_t(c * n));
        for (Index i = 0; i < c; ++i) {
          const auto row = data<T>(n, 100 + std::uint64_t(block * 64 + i));
          for (Index l = 0; l < n; ++l) {
            T x = T(8) * row[std::size_t(l)];
            if ((l + i + block) % 5 == 0) x = -inf;            // no mass (a relu zero)
            if ((l + 2 * i + block) % 11 == 3) x *= T(1e4);     // weights that underflow beside it
            if (l % 13 == 4 && block == 1) x = -inf;            // a slot with no mass in this block
            lam[std::size_t(i * n + l)] = x;
          }
        }
        const std::vector<T> lam_in = lam;
        std::vector<double> m_start = m_ref, z_start = z_ref;
        for (Index i = 0; i < c; ++i)
          for (Index l = 0; l < n; ++l) {
            const double x = double(lam_in[std::size_t(i * n + l)]);
            const std::size_t s = std::size_t(l);
            const double top = std::max(m_ref[s], x);
            if (top == -inf64) continue;
            z_ref[s] = (m_ref[s] == -inf64 ? 0.0 : std::exp(m_ref[s] - top) * z_ref[s]) +
                       (x == -inf64 ? 0.0 : std::exp(x - top));
            m_ref[s] = top;
          }
        abc::kernel::block_normalise(lam.data(), c, n, m.data(), z.data(), dcum.data());
        for (Index l = 0; l < n; ++l) {
          const std::size_t s = std::size_t(l);
          INFO("block " << block << ", slot " << l);
          REQUIRE(double(m[s]) == m_ref[s]);  // a max is exact
          REQUIRE(std::abs(double(z[s]) - z_ref[s]) <= 4 * double(c + 2) * eps * std::max(1.0, z_ref[s]));
          if (m_ref[s] == -inf64) {  // no mass yet: nothing moves
            REQUIRE(dcum[s] == T(1));
            REQUIRE(z[s] == T(0));
          } else {
            const double d_ref = m_start[s] == -inf64 ? 0.0 : std::exp(m_start[s] - m_ref[s]) * z_start[s] / z_ref[s];
            REQUIRE(std::abs(double(dcum[s]) - d_ref) <= 4 * double(c + 4) * eps);
          }
          for (Index i = 0; i < c; ++i) {
            const double x = double(lam_in[std::size_t(i * n + l)]);
            const double e_ref = x == -inf64 ? 0.0 : std::exp(x - m_ref[s]) / z_ref[s];
            const T e = lam[std::size_t(i * n + l)];
            REQUIRE(e >= T(0));
            REQUIRE(std::abs(double(e) - e_ref) <= 4 * double(c + 4) * eps);
            if (x == -inf) REQUIRE(e == T(0));
          }
        }
      }
    }
}

// scale_rows / rows_dot: the chunked causal kernel's per-token passes over the chunk's weights (rows
// of n slots at a stride past n: the padding must stay untouched). rows_dot takes four rows at a time.
TEMPLATE_TEST_CASE("scale_rows and rows_dot match the scalar oracle and their definitions", "[kernel][rows]", float,
                   double) {
  using T = TestType;
  const Index wd = width<T>();
  for (Index count : {0, 1, 3, 4, 5, 9})
    for (Index n : {Index(1), wd - 1, wd, wd + 1, 4 * wd + 3, Index(64)}) {
      if (n < 1) continue;
      INFO("count = " << count << ", n = " << n);
      const Index ld = n + 2, size = 1 + count * ld;
      const auto a = data<T>(n, 31), x = data<T>(n, 32);
      auto rows_a = data<T>(size, 30), rows_b = rows_a;
      const auto before = rows_a;
      abc::kernel::scale_rows(rows_a.data() + 1, ld, count, n, a.data());
      abc::kernel::scalar::scale_rows(rows_b.data() + 1, ld, count, n, a.data());
      REQUIRE(rows_a == rows_b);  // one rounded product per entry on both paths
      for (Index i = 0; i < count; ++i)
        for (Index j = 0; j < ld; ++j) {
          const std::size_t at = std::size_t(1 + i * ld + j);
          if (j < n)
            REQUIRE(double(rows_a[at]) == double(before[at] * a[std::size_t(j)]));
          else
            REQUIRE(rows_a[at] == before[at]);
        }
      REQUIRE(rows_a[0] == before[0]);
      std::vector<T> out_a(std::size_t(count) + 1, T(7)), out_b = out_a;
      abc::kernel::rows_dot(rows_a.data() + 1, ld, count, n, x.data(), out_a.data());
      abc::kernel::scalar::rows_dot(rows_a.data() + 1, ld, count, n, x.data(), out_b.data());
      for (Index i = 0; i < count; ++i) {
        double want = 0;
        for (Index j = 0; j < n; ++j) want += double(rows_a[std::size_t(1 + i * ld + j)]) * double(x[std::size_t(j)]);
        REQUIRE(std::abs(double(out_a[std::size_t(i)]) - want) <= tol<T>(n));
        REQUIRE(std::abs(double(out_b[std::size_t(i)]) - want) <= tol<T>(n));
      }
      REQUIRE(out_a[std::size_t(count)] == T(7));  // nothing written past the last row
      // Each row's sum is reduced together with up to three others (impl::hsum4), in the order of a
      // dot of its own: the same bits as dot(), whatever its group and place in it.
      for (Index i = 0; i < count; ++i)
        REQUIRE(out_a[std::size_t(i)] == abc::kernel::dot(rows_a.data() + 1 + i * ld, x.data(), n));
    }
}

// chunk_scores: token t of the causal chunk, over the chunk's weight rows. With Update it advances
// rows 0..t−1 by a, writes row t and D; both forms then return Σ_{i≤t} g_i E[i] + D ⊙ prev. The
// SIMD path gives the scalar path's bits (one multiply-add chain per slot, in the same order).
template <bool Update, class T>
void check_chunk_scores(Index n, Index t, bool decays) {
  INFO("update " << Update << ", n = " << n << ", t = " << t << (decays ? "" : ", no decay"));
  const auto a = data<T>(n, 41), w = data<T>(n, 42), g = data<T>(t + 1, 43), prev = data<T>(n, 44);
  const auto e0 = data<T>((t + 2) * n, 40), d0 = data<T>(n, 45);
  auto e_a = e0, e_b = e0, d_a = d0, d_b = d0;
  std::vector<T> out_a(std::size_t(n) + 1, T(7)), out_b = out_a;
  const T* decay = decays ? a.data() : nullptr;
  abc::kernel::chunk_scores<Update>(e_a.data(), n, t, decay, w.data(), g.data(), d_a.data(), prev.data(), out_a.data());
  abc::kernel::scalar::chunk_scores<Update>(e_b.data(), n, t, decay, w.data(), g.data(), d_b.data(), prev.data(),
                                            out_b.data());
  REQUIRE(out_a == out_b);
  REQUIRE(e_a == e_b);
  REQUIRE(d_a == d_b);
  REQUIRE(out_a[std::size_t(n)] == T(7));  // nothing written past the last slot
  for (Index j = 0; j < n; ++j) {
    const std::size_t sj = std::size_t(j);
    double sum = 0;
    for (Index i = 0; i <= t; ++i) {
      double r = double(e0[std::size_t(i * n + j)]);
      if (Update && i < t && decays) r *= double(a[sj]);
      if (Update && i == t) r = double(w[sj]);
      REQUIRE(std::abs(double(e_a[std::size_t(i * n + j)]) - r) <= tol<T>(1) * std::abs(r));
      sum += double(g[std::size_t(i)]) * r;
    }
    const double d = double(d0[sj]) * (Update && decays ? double(a[sj]) : 1.0);
    REQUIRE(std::abs(double(d_a[sj]) - d) <= tol<T>(1) * std::abs(d));
    REQUIRE(std::abs(double(out_a[sj]) - (sum + d * double(prev[sj]))) <= tol<T>(t + 2));
    REQUIRE(e_a[std::size_t((t + 1) * n + j)] == e0[std::size_t((t + 1) * n + j)]);  // rows past t untouched
  }
}

#ifndef ABC_NO_SIMD
TEMPLATE_TEST_CASE("hsum4 is four hsums bit for bit; hmax is the largest lane", "[kernel][rows]", float, double) {
  using T = TestType;
  using B = abc::kernel::batch<T>;
  constexpr Index w = Index(B::size);
  for (std::uint64_t seed = 40; seed < 60; ++seed) {
    INFO("seed = " << seed);
    // Magnitudes over many octaves, so that a different order of the additions would show.
    auto v = data<T>(4 * w, seed);
    for (Index i = 0; i < 4 * w; ++i) v[std::size_t(i)] *= T(std::ldexp(1.0, int(i % 23) - 11));
    B b[4];
    for (int k = 0; k < 4; ++k) b[k] = B::load_unaligned(v.data() + k * w);
    T sums[4];
    abc::kernel::impl::hsum4(b[0], b[1], b[2], b[3], sums);
    for (int k = 0; k < 4; ++k) {
      REQUIRE(sums[k] == abc::kernel::impl::hsum(b[k]));
      T m = v[std::size_t(k * w)];
      for (Index i = 1; i < w; ++i) m = std::max(m, v[std::size_t(k * w + i)]);
      REQUIRE(abc::kernel::impl::hmax(b[k]) == m);
    }
  }
}

TEMPLATE_TEST_CASE("hsum16 puts each batch's sum in its own place", "[kernel][rows]", float, double) {
  using T = TestType;
  using B = abc::kernel::batch<T>;
  constexpr Index w = Index(B::size);
  for (std::uint64_t seed = 60; seed < 80; ++seed) {
    INFO("seed = " << seed);
    // Small integers first: every order of the additions gives the exact sum, so a sum that lands
    // in another batch's place (the tree's lane order) shows as a wrong value.
    std::vector<T> v(static_cast<std::size_t>(16 * w));
    for (Index i = 0; i < 16 * w; ++i) v[std::size_t(i)] = T((i / w) * 100 + i % w + Index(seed % 7));
    B b[16];
    for (int k = 0; k < 16; ++k) b[k] = B::load_unaligned(v.data() + k * w);
    T sums[16];
    abc::kernel::impl::hsum16(b, sums);
    for (int k = 0; k < 16; ++k) {
      double want = 0;
      for (Index i = 0; i < w; ++i) want += double(v[std::size_t(k * w + i)]);
      REQUIRE(double(sums[k]) == want);
    }
    // Magnitudes over many octaves: each sum within the rounding of w − 1 additions.
    v = data<T>(16 * w, seed);
    for (Index i = 0; i < 16 * w; ++i) v[std::size_t(i)] *= T(std::ldexp(1.0, int(i % 23) - 11));
    for (int k = 0; k < 16; ++k) b[k] = B::load_unaligned(v.data() + k * w);
    abc::kernel::impl::hsum16(b, sums);
    for (int k = 0; k < 16; ++k) {
      double want = 0, size = 0;
      for (Index i = 0; i < w; ++i) {
        want += double(v[std::size_t(k * w + i)]);
        size += std::abs(double(v[std::size_t(k * w + i)]));
      }
      REQUIRE(std::abs(double(sums[k]) - want) <= double(w) * double(std::numeric_limits<T>::epsilon()) * size);
    }
  }
}
#endif

TEMPLATE_TEST_CASE("chunk_scores matches the scalar oracle bit for bit and its definition", "[kernel][rows]", float,
                   double) {
  using T = TestType;
  const Index wd = width<T>();
  for (Index n : {Index(1), wd - 1, wd, wd + 1, 4 * wd, 4 * wd + 3, Index(64)})
    for (Index t : {0, 1, 5, 15})
      for (bool decays : {true, false}) {
        if (n < 1) continue;
        check_chunk_scores<true, T>(n, t, decays);
        check_chunk_scores<false, T>(n, t, decays);
      }
}

// The exponentials of a softmax row: −∞ and every exponent below log(smallest normal) give exactly
// 0 in both paths (the SIMD one must not inherit the tiny non-zero of Eigen 3.4's SSE2/AVX2 exp).
TEMPLATE_TEST_CASE("exp_sum matches the scalar oracle and its definition; −∞ and underflow give exactly 0",
                   "[kernel][exp_sum]", float, double) {
  using T = TestType;
  constexpr T inf = std::numeric_limits<T>::infinity();
  const double lo = std::log(double(std::numeric_limits<T>::min()));
  for (Index n : lengths<T>())
    for (T shift : {T(0), T(2.5), T(-1e3)}) {
      INFO("n = " << n << ", shift " << shift);
      auto x = data<T>(n, 20);
      for (Index j = 0; j <= n; ++j) {
        T& e = x[size_t(j)];
        e = shift + T(4) * (e - T(1));                  // exponents in [−8, 0]
        if (j % 5 == 1) e = -inf;                        // a masked slot
        if (j % 7 == 2) e = shift + T(lo) * T(1.5);      // underflows
        if (j % 11 == 3) e = shift + T(lo) + T(1);       // just above the smallest normal
        if (j % 13 == 4) e = shift;                      // the row's max
      }
      auto a = x, b = x;
      const T sum_a = abc::kernel::exp_sum(a.data() + 1, n, shift);
      const T sum_b = abc::kernel::scalar::exp_sum(b.data() + 1, n, shift);
      REQUIRE(a[0] == x[0]);  // the element before the row is untouched
      REQUIRE(std::abs(double(sum_a - sum_b)) <= tol<T>(n) * std::max(1.0, double(sum_b)));
      double sum_def = 0;
      for (Index j = 1; j <= n; ++j) {
        const size_t i = size_t(j);
        const double e = double(x[i]) - double(shift);
        const double want = e >= lo ? std::exp(e) : 0.0;  // the definition, in double
        sum_def += double(b[i]);
        INFO("j = " << j << ", exponent " << e);
        REQUIRE((a[i] == T(0)) == (want == 0.0));
        REQUIRE((b[i] == T(0)) == (want == 0.0));
        REQUIRE(std::abs(double(a[i]) - want) <= 4 * tol<T>(1) * want);
        REQUIRE(std::abs(double(b[i]) - want) <= 4 * tol<T>(1) * want);
      }
      REQUIRE(std::abs(double(sum_b) - sum_def) <= tol<T>(n) * std::max(1.0, sum_def));
    }
}

// Per-slot forget gates f = σ(s)^(1/τ): both paths against the definition in double (log σ for each
// sign of s, so 1 − f and tiny f keep their digits), exact 0 and 1 at the same slots, NaN as 0 and
// ±∞ as ±max, and the logits may be overwritten in place by the decays.
TEMPLATE_TEST_CASE("forget_gate matches the scalar oracle and its definition, from 1e-30 to 1 − 1e-7",
                   "[kernel][forget_gate]", float, double) {
  using T = TestType;
  constexpr T inf = std::numeric_limits<T>::infinity(), big = std::numeric_limits<T>::max();
  const double eps = std::numeric_limits<T>::epsilon();
  const double lo = std::log(double(std::numeric_limits<T>::min()));
  for (Index n : lengths<T>())
    for (T tau : {T(1), T(8), T(0.5)}) {
      INFO("n = " << n << ", tau " << tau);
      auto s = data<T>(n, 40);
      for (Index j = 0; j <= n; ++j) {
        T& e = s[size_t(j)];
        e *= T(30);                                     // gates from about 1e-13 to 1 − 1e-13
        if (j % 5 == 1) e = T(-69.0776) * tau;          // about 1e-30 at every τ
        if (j % 7 == 2) e = T(16.1181);                 // 1 − 1e-7 at τ = 1
        if (j % 11 == 3) e = T(1e4);                    // exactly 1: no write
        if (j % 13 == 4) e = T(-1e4);                   // exactly 0: a reset
        if (j % 17 == 5) e = std::numeric_limits<T>::quiet_NaN();
        if (j % 19 == 6) e = (j % 2 ? inf : -inf);
      }
      std::vector<T> dec_a(size_t(n) + 1, T(7)), wr_a = dec_a, dec_b = dec_a, wr_b = dec_a;
      abc::kernel::forget_gate(s.data() + 1, tau, dec_a.data() + 1, wr_a.data() + 1, n);
      abc::kernel::scalar::forget_gate(s.data() + 1, tau, dec_b.data() + 1, wr_b.data() + 1, n);
      REQUIRE(dec_a[0] == T(7));
      REQUIRE(wr_a[0] == T(7));
      auto in_place = s;
      abc::kernel::forget_gate(in_place.data() + 1, tau, in_place.data() + 1, wr_b.data() + 1, n);
      for (Index j = 1; j <= n; ++j) {
        const size_t i = size_t(j);
        double x = double(s[i]);
        if (std::isnan(x)) x = 0;
        x = std::max(std::min(x, double(big)), -double(big));
        const double log_sigma = x >= 0 ? -std::log1p(std::exp(-x)) : x - std::log1p(std::exp(x));
        double lf = log_sigma / double(tau);
        if (lf > -double(std::numeric_limits<T>::min())) lf = 0;  // 1 − f below the smallest normal: f = 1
        const double f = lf >= lo ? std::exp(lf) : 0.0, one_minus_f = lf >= lo ? -std::expm1(lf) : 1.0;
        INFO("j = " << j << ", logit " << s[i] << ", log f " << lf);
        // log f carries a relative rounding of a few ε, so f carries |log f| times that.
        const double tol_f = f > 0 ? 8 * eps * std::max(1.0, std::abs(lf)) * f : 0.0, tol_w = 8 * eps * one_minus_f;
        for (const auto* out : {&dec_a, &dec_b}) REQUIRE(std::abs(double((*out)[i]) - f) <= tol_f);
        REQUIRE(std::abs(double(wr_a[i]) - one_minus_f) <= tol_w);
        REQUIRE(std::abs(double(wr_b[i]) - one_minus_f) <= tol_w);
        REQUIRE((dec_a[i] == T(0)) == (f == 0.0));
        REQUIRE((dec_b[i] == T(0)) == (f == 0.0));
        REQUIRE((wr_a[i] == T(0)) == (one_minus_f == 0.0));
        REQUIRE((wr_b[i] == T(0)) == (one_minus_f == 0.0));
        REQUIRE(in_place[i] == dec_a[i]);
      }
    }
}

// The softmax over slots gives a slot it may not read (masked, outside the control's range, or a
// score that is not a number) exactly 0, and the readable ones sum to 1.
TEMPLATE_TEST_CASE("softmax_slots: unreadable slots get exactly 0", "[kernel][exp_sum]", float, double) {
  using T = TestType;
  for (Index n : lengths<T>()) {
    if (n == 0) continue;  // every control has at least one slot
    INFO("n = " << n);
    std::vector<std::uint8_t> written(size_t(n) + 1, 1);
    auto logits = data<T>(n, 30);
    for (Index l = 0; l < n; ++l) {
      if (l % 7 == 3) written[size_t(l)] = 0;
      if (l % 11 == 5) logits[size_t(l)] = std::numeric_limits<T>::quiet_NaN();
      if (l % 13 == 6) logits[size_t(l)] = T(-1e4);  // readable, but exp(−1e4 − max) underflows: 0 too
    }
    const abc::kernel::SlotRange range{std::min<Index>(1, n), std::max<Index>(n - 2, std::min<Index>(1, n))};
    const bool any = abc::kernel::softmax_slots(logits.data(), n, written.data(), true, range);
    double total = 0;
    Index readable_count = 0;
    for (Index l = 0; l < n; ++l) {
      const bool readable = l >= range.lo && l < range.hi && l % 7 != 3 && l % 11 != 5;
      INFO("slot " << l);
      if (readable && l % 13 != 6) {
        REQUIRE(logits[size_t(l)] > T(0));
      } else {
        REQUIRE(logits[size_t(l)] == T(0));
      }
      readable_count += readable;
      total += double(logits[size_t(l)]);
    }
    REQUIRE(any == (readable_count > 0));
    REQUIRE(std::abs(total - (any ? 1.0 : 0.0)) <= tol<T>(n));
  }
}

// A NaN logit (finite inputs overflowing in q·k) takes no mass, and a larger logit in an earlier
// batch of the same lane is still the max: the regression was a SIMD max that let the NaN replace
// it (x86 max returns its second operand when either is NaN) after an ordered != had left the NaN
// in place, so exp(100 − a smaller max) overflowed and the row became NaN.
TEMPLATE_TEST_CASE("softmax_slots: a NaN logit takes no mass and hides no larger logit", "[kernel][exp_sum]", float,
                   double) {
  using T = TestType;
  const Index w = width<T>();
  for (Index n : {3 * w, 3 * w + 1, 4 * w - 1}) {
    for (Index lane = 0; lane < w; lane += std::max<Index>(1, w / 4)) {
      INFO("n = " << n << ", lane " << lane);
      std::vector<T> logits(std::size_t(n), T(0.5));
      logits[std::size_t(lane)] = T(100);
      logits[std::size_t(w + lane)] = std::numeric_limits<T>::quiet_NaN();
      logits[std::size_t(2 * w + lane)] = T(-1);
      std::vector<std::uint8_t> written(std::size_t(n), 1);
      std::vector<T> clean = logits;
      REQUIRE(abc::kernel::impl::clean_max(clean.data(), n) == T(100));
      REQUIRE(clean[std::size_t(w + lane)] == -std::numeric_limits<T>::infinity());  // NaN → −∞ in place
      REQUIRE(abc::kernel::softmax_slots(logits.data(), n, written.data(), false, abc::kernel::SlotRange{0, n}));
      double total = 0;
      for (Index l = 0; l < n; ++l) {
        INFO("slot " << l);
        REQUIRE(std::isfinite(logits[std::size_t(l)]));
        total += double(logits[std::size_t(l)]);
      }
      REQUIRE(logits[std::size_t(w + lane)] == T(0));
      REQUIRE(double(logits[std::size_t(lane)]) > 0.999);
      REQUIRE(std::abs(total - 1.0) <= tol<T>(n));
    }
  }
}

// The slot softmax against a float64 softmax written from its rule, on rows with NaN, ±∞, huge and
// masked entries scattered at random over the vector body and tail: NaN, −∞, masked and
// out-of-range slots take exactly 0; +∞ entries, if any, share the mass equally; otherwise
// exp(x − max) / Σ over the readable slots. Every output is finite whatever the input.
TEMPLATE_TEST_CASE("softmax_slots matches a float64 softmax with NaN, ±∞ and masks anywhere", "[kernel][exp_sum]",
                   float, double) {
  using T = TestType;
  const Index w = width<T>();
  std::mt19937_64 rng(77);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  for (Index n : {Index(1), w - 1, w, w + 1, 2 * w, 3 * w, 3 * w + 5, 4 * w, Index(64), Index(100)}) {
    if (n < 1) continue;
    for (int trial = 0; trial < 200; ++trial) {
      INFO("n = " << n << ", trial " << trial);
      std::vector<T> logits(static_cast<std::size_t>(n));
      std::vector<std::uint8_t> written(static_cast<std::size_t>(n));
      scattered_scores(rng, trial, logits, written);
      const bool mask = trial % 2 == 0;
      const Index lo = Index(unit(rng) * double(n) / 3), hi = std::max(lo + 1, n - Index(unit(rng) * double(n) / 3));
      const abc::kernel::SlotRange range{lo, hi};
      // The rule, in float64.
      std::vector<double> want(static_cast<std::size_t>(n), 0.0);
      std::vector<bool> readable(static_cast<std::size_t>(n));
      double mx = -std::numeric_limits<double>::infinity();
      Index infinite = 0;
      for (Index l = 0; l < n; ++l) {
        const double x = double(logits[std::size_t(l)]);
        readable[std::size_t(l)] = l >= lo && l < hi && (!mask || written[std::size_t(l)]) && !std::isnan(x);
        if (!readable[std::size_t(l)]) continue;
        mx = std::max(mx, x);
        infinite += x == std::numeric_limits<double>::infinity();
      }
      const bool any = mx > -std::numeric_limits<double>::infinity();
      if (any && infinite > 0) {
        for (Index l = 0; l < n; ++l)
          if (readable[std::size_t(l)] && std::isinf(double(logits[std::size_t(l)])) && logits[std::size_t(l)] > 0)
            want[std::size_t(l)] = 1.0 / double(infinite);
      } else if (any) {
        double total = 0;
        for (Index l = 0; l < n; ++l)
          if (readable[std::size_t(l)]) total += want[std::size_t(l)] = std::exp(double(logits[std::size_t(l)]) - mx);
        for (auto& p : want) p /= total;
      }
      auto got = logits;
      REQUIRE(abc::kernel::softmax_slots(got.data(), n, written.data(), mask, range) == any);
      for (Index l = 0; l < n; ++l) {
        INFO("slot " << l << ", logit " << logits[std::size_t(l)]);
        const T p = got[std::size_t(l)];
        REQUIRE(std::isfinite(p));
        if (want[std::size_t(l)] == 0.0 && !readable[std::size_t(l)]) REQUIRE(p == T(0));
        REQUIRE(std::abs(double(p) - want[std::size_t(l)]) <= tol<T>(n));
      }
    }
  }
}

// A row of one to four full batches is kept in registers from the NaN check to the division; it
// must give the bits of the passes every other row takes (clean_max, exp_sum, a division per
// slot), so that a memory of 64 slots reads the same whichever path a build's batch width puts it
// on. Rows with NaN, −∞ and masked slots, and rows whose max is −∞ or +∞.
TEMPLATE_TEST_CASE("softmax_slots: a row held in registers gives the bits of the general passes", "[kernel][exp_sum]",
                   float, double) {
  using T = TestType;
  constexpr T inf = std::numeric_limits<T>::infinity();
  const Index w = width<T>();
  std::mt19937_64 rng(91);
  for (Index n : {w, 2 * w, 3 * w, 4 * w}) {
    for (int trial = 0; trial < 300; ++trial) {
      INFO("n = " << n << ", trial " << trial);
      std::vector<T> logits(static_cast<std::size_t>(n));
      std::vector<std::uint8_t> written(static_cast<std::size_t>(n));
      scattered_scores(rng, trial, logits, written);
      if (trial % 50 == 1) std::fill(logits.begin(), logits.end(), -inf);  // no readable slot
      const bool mask = trial % 3 != 0;
      // The general passes, by hand, after the same masking.
      std::vector<T> want = logits;
      for (Index l = 0; l < n; ++l)
        if (mask && !written[std::size_t(l)]) want[std::size_t(l)] = -inf;
      const T m = abc::kernel::impl::clean_max(want.data(), n);
      if (m == -inf) {
        std::fill(want.begin(), want.end(), T(0));
      } else if (m == inf) {
        T count = 0;
        for (T x : want) count += x == inf ? T(1) : T(0);
        for (T& x : want) x = x == inf ? T(1) / count : T(0);
      } else {
        const T sum = abc::kernel::exp_sum(want.data(), n, m);
        for (T& x : want) x /= sum;
      }
      auto got = logits;
      REQUIRE(abc::kernel::softmax_slots(got.data(), n, written.data(), mask, abc::kernel::SlotRange{0, n}) ==
              (m != -inf));
      for (Index l = 0; l < n; ++l) {
        INFO("slot " << l << ", logit " << logits[std::size_t(l)]);
        REQUIRE(std::memcmp(&got[std::size_t(l)], &want[std::size_t(l)], sizeof(T)) == 0);
      }
    }
  }
}

// softmax_rows runs the rows of a long call's read four at a time, interleaved; each row must get
// exactly softmax_slots' bits (mask_slots, then softmax_masked), whether its group of four is
// finite, holds a row whose max is ±∞ (the whole group then takes the general path) or is a tail of
// fewer than four, at every row width (held in registers or not) and at a stride past the width.
TEMPLATE_TEST_CASE("softmax_rows gives each row softmax_slots' bits, four rows at a time or one",
                   "[kernel][exp_sum]", float, double) {
  using T = TestType;
  constexpr T inf = std::numeric_limits<T>::infinity();
  const Index w = width<T>();
  std::mt19937_64 rng(1234);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  for (Index n : {Index(1), w - 1, w, w + 1, 2 * w, 3 * w, 4 * w, 4 * w + 1, Index(64), Index(100)}) {
    if (n < 1) continue;
    for (Index count : {0, 1, 3, 4, 5, 8, 11})
      for (int trial = 0; trial < 12; ++trial) {
        INFO("n = " << n << ", rows " << count << ", trial " << trial);
        const Index ld = n + 3;
        std::vector<T> rows(static_cast<std::size_t>(count * ld + 1), T(5));
        std::vector<std::vector<std::uint8_t>> written(static_cast<std::size_t>(count), std::vector<std::uint8_t>(static_cast<std::size_t>(n)));
        for (Index i = 0; i < count; ++i) {
          std::vector<T> logits(static_cast<std::size_t>(n));
          // Most rows finite (the grouped path); some with NaN, ±∞, ±1e30 or nothing readable.
          scattered_scores(rng, trial * 7 + int(i), logits, written[std::size_t(i)]);
          if ((trial + i) % 3 != 0)
            for (T& x : logits) x = T(40.0 * unit(rng) - 20.0);
          if (trial % 5 == 2 && i == 1) std::fill(logits.begin(), logits.end(), -inf);
          if (trial % 5 == 3 && i == 2) logits[std::size_t(n - 1)] = inf;
          std::copy(logits.begin(), logits.end(), rows.begin() + std::ptrdiff_t(i * ld));
        }
        const bool mask = trial % 2 == 0;
        std::vector<T> want = rows;
        std::vector<char> want_ok(static_cast<std::size_t>(count));
        for (Index i = 0; i < count; ++i)
          want_ok[std::size_t(i)] = abc::kernel::softmax_slots(want.data() + i * ld, n, written[std::size_t(i)].data(),
                                                               mask, abc::kernel::SlotRange{0, n});
        for (Index i = 0; i < count; ++i)
          abc::kernel::mask_slots(rows.data() + i * ld, n, written[std::size_t(i)].data(), mask,
                                  abc::kernel::SlotRange{0, n});
        bool ok[16];
        abc::kernel::softmax_rows(rows.data(), ld, count, n, ok);
        for (Index i = 0; i < count; ++i) {
          INFO("row " << i);
          REQUIRE(ok[i] == (want_ok[std::size_t(i)] != 0));
        }
        REQUIRE(std::memcmp(rows.data(), want.data(), rows.size() * sizeof(T)) == 0);  // padding untouched too
      }
  }
}

// lower_dots: the lower triangle of X Yᵀ, against float64 dots, with exact zeros above the diagonal,
// for chunk sizes around the 4 × 4 (or 4 × 2) blocks, widths around the batch width, and strides
// past the width (whose padding must not be read into a sum: it holds NaN).
TEMPLATE_TEST_CASE("lower_dots is the lower triangle of X Yᵀ, zero above the diagonal", "[kernel][rows]", float,
                   double) {
  using T = TestType;
  const Index w = width<T>();
  for (Index c : {1, 2, 3, 4, 5, 7, 8, 9, 16, 17, 19})
    for (Index n : {Index(1), w - 1, w, w + 1, 4 * w + 3, Index(64)}) {
      if (n < 1) continue;
      INFO("c = " << c << ", n = " << n);
      const Index ldx = n + 1, ldy = n + 2, ldo = c + 3;
      auto x = data<T>(c * ldx, 41), y = data<T>(c * ldy, 42);
      for (Index i = 0; i < c; ++i) {
        x[std::size_t(i * ldx + n)] = std::numeric_limits<T>::quiet_NaN();
        if (ldy > n + 1) y[std::size_t(i * ldy + n + 1)] = std::numeric_limits<T>::quiet_NaN();
      }
      std::vector<T> out(static_cast<std::size_t>(c * ldo), T(9));
      abc::kernel::lower_dots(x.data(), ldx, y.data(), ldy, c, n, out.data(), ldo);
      for (Index t = 0; t < c; ++t)
        for (Index i = 0; i < ldo; ++i) {
          INFO("entry (" << t << ", " << i << ")");
          const T got = out[std::size_t(t * ldo + i)];
          if (i >= c) {
            REQUIRE(got == T(9));  // past the triangle's columns: untouched
          } else if (i > t) {
            REQUIRE(got == T(0));
          } else {
            double want = 0, size = 0;
            for (Index j = 0; j < n; ++j) {
              const double p = double(x[std::size_t(t * ldx + j)]) * double(y[std::size_t(i * ldy + j)]);
              want += p;
              size += std::abs(p);
            }
            REQUIRE(std::abs(double(got) - want) <= 4 * double(n) * std::numeric_limits<T>::epsilon() * size);
          }
        }
    }
}

// chunk_normalise against its definition in float64: the chunk's tokens through the per-slot running
// softmax one at a time; at every token t of the chunk, each earlier token i's weight in the memory of
// t's prefix, e^{λ_i − m_t} / z_t, must be u_i r_t, and what is left of the memory before the chunk,
// e^{m_start − m_t} z_start / z_t, must be carry · r_t. Three chunks in a row (later ones start
// from mass), −∞ entries, slots with no mass in a chunk or ever, spreads up to the limit; then the
// chunks it declines (a spread past chunk_spread, mass that starts after the first token, a sum
// below 1 in the state) must change nothing.
TEMPLATE_TEST_CASE("chunk_normalise matches the token-by-token running softmax in float64, or declines",
                   "[kernel][online_normalise]", float, double) {
  using T = TestType;
  constexpr T inf = std::numeric_limits<T>::infinity();
  constexpr double eps = std::numeric_limits<T>::epsilon(), inf64 = std::numeric_limits<double>::infinity();
  const double spread = double(abc::kernel::chunk_spread<T>());
  for (Index n : lengths<T>())
    for (Index c : {1, 2, 7, 16, 33}) {
      INFO("n = " << n << ", c = " << c);
      std::vector<T> m(std::size_t(n), -inf), z(std::size_t(n), T(0)), carry(static_cast<std::size_t>(n));
      std::vector<double> m_ref(std::size_t(n), -inf64), z_ref(std::size_t(n), 0.0);
      for (int chunk = 0; chunk < 3; ++chunk) {
        std::vector<T> lam(static_cast<std::size_t>(c * n)), r(static_cast<std::size_t>(c * n));
        for (Index i = 0; i < c; ++i) {
          const auto row = data<T>(n, 300 + std::uint64_t(chunk * 64 + i));
          for (Index l = 0; l < n; ++l) {
            T x = T(4) * row[std::size_t(l)];
            if (i > 0 && (l + i + chunk) % 5 == 0) x = -inf;  // no mass (a relu zero), never first
            if (l % 7 == 3 && i == c - 1 && c > 1) x = lam[std::size_t(l)] + T(spread * 0.9);  // near the limit
            if (l % 13 == 4) x = -inf;  // a slot that never has mass
            lam[std::size_t(i * n + l)] = x;
          }
        }
        const std::vector<T> lam_in = lam;
        REQUIRE(abc::kernel::chunk_normalise(lam.data(), c, n, m.data(), z.data(), r.data(), carry.data()));
        for (Index l = 0; l < n; ++l) {
          const std::size_t s = std::size_t(l);
          const double m_start = m_ref[s], z_start = z_ref[s];
          for (Index t = 0; t < c; ++t) {
            const double x = double(lam_in[std::size_t(t * n + l)]);
            const double top = std::max(m_ref[s], x);
            if (top > -inf64) {
              z_ref[s] = (m_ref[s] == -inf64 ? 0.0 : std::exp(m_ref[s] - top) * z_ref[s]) +
                         (x == -inf64 ? 0.0 : std::exp(x - top));
              m_ref[s] = top;
            }
            INFO("chunk " << chunk << ", slot " << l << ", token " << t);
            const T rt = r[std::size_t(t * n + l)];
            if (m_ref[s] == -inf64) {  // no mass yet: the memory stays, nothing is written
              REQUIRE(rt == T(1));
              REQUIRE(carry[s] == T(1));
              REQUIRE(lam[std::size_t(t * n + l)] == T(0));
              continue;
            }
            // Beyond the sums' rounding, an exponent's: |λ − m′| up to the spread (chunk_spread).
            const double bound = 4 * (double(c + 4) + spread) * eps;
            const double d_ref = m_start == -inf64 ? 0.0 : std::exp(m_start - m_ref[s]) * z_start / z_ref[s];
            REQUIRE(std::abs(double(carry[s]) * double(rt) - d_ref) <= bound);
            for (Index i = 0; i <= t; ++i) {
              const double xi = double(lam_in[std::size_t(i * n + l)]);
              const double e_ref = xi == -inf64 ? 0.0 : std::exp(xi - m_ref[s]) / z_ref[s];
              const T u = lam[std::size_t(i * n + l)];
              REQUIRE(u >= T(0));
              REQUIRE(std::abs(double(u) * double(rt) - e_ref) <= bound);
              if (xi == -inf64) REQUIRE(u == T(0));
            }
          }
          REQUIRE(double(m[s]) == m_ref[s]);  // a max is exact
          REQUIRE(std::abs(double(z[s]) - z_ref[s]) <= 4 * double(c + 2) * eps * std::max(1.0, z_ref[s]));
        }
      }
      if (n == 0) continue;
      // Chunks it must decline, each leaving λ, m and z as they were.
      for (int kind = 0; kind < 3; ++kind) {
        INFO("declined chunk of kind " << kind);
        std::vector<T> lam(std::size_t(c * n), T(0.5)), r(std::size_t(c * n));
        std::vector<T> mm = m, zz = z;
        const std::size_t last = std::size_t(n - 1);
        if (kind < 2 && c < 2) continue;  // one token: its first is its last
        if (kind == 0) {  // a later token past the first's reach
          mm[last] = T(0);
          zz[last] = T(1);
          lam[std::size_t((c - 1) * n) + last] = T(spread * 1.01) + T(1);
        }
        if (kind == 1) {  // a slot whose mass starts after the chunk's first token
          mm[last] = -inf;
          zz[last] = T(0);
          for (Index i = 0; i < c; ++i) lam[std::size_t(i * n) + last] = -inf;
          lam[std::size_t((c - 1) * n) + last] = T(0);
        }
        if (kind == 2) {  // a state no normaliser leaves (its largest weight counts 1)
          mm[last] = T(0);
          zz[last] = T(0.5);
        }
        const std::vector<T> lam_in = lam, m_in = mm, z_in = zz;
        REQUIRE_FALSE(abc::kernel::chunk_normalise(lam.data(), c, n, mm.data(), zz.data(), r.data(), carry.data()));
        REQUIRE(std::memcmp(lam.data(), lam_in.data(), lam.size() * sizeof(T)) == 0);
        REQUIRE(std::memcmp(mm.data(), m_in.data(), mm.size() * sizeof(T)) == 0);
        REQUIRE(std::memcmp(zz.data(), z_in.data(), zz.size() * sizeof(T)) == 0);
      }
    }
}

// Overflowed logits: the +∞ entries share the mass equally (exactly 1/count each), everything else
// gets 0, wherever the +∞ entries fall relative to the vector body and tail.
TEMPLATE_TEST_CASE("softmax_slots: +∞ logits share the mass equally, at every place", "[kernel][exp_sum]", float,
                   double) {
  using T = TestType;
  constexpr T inf = std::numeric_limits<T>::infinity();
  for (Index n : lengths<T>()) {
    if (n < 2) continue;
    for (Index at = 0; at < n; ++at) {
      INFO("n = " << n << ", +∞ at " << at << " and " << n - 1);
      std::vector<std::uint8_t> written(size_t(n), 1);
      auto logits = data<T>(n, 31);
      logits[size_t(at)] = inf;
      logits[size_t(n - 1)] = inf;
      const Index nan_at = (at + 1) % n;  // a NaN beside them takes nothing
      if (nan_at != n - 1) logits[size_t(nan_at)] = std::numeric_limits<T>::quiet_NaN();
      const Index count = at == n - 1 ? 1 : 2;
      REQUIRE(abc::kernel::softmax_slots(logits.data(), n, written.data(), false, abc::kernel::SlotRange{0, n}));
      for (Index l = 0; l < n; ++l) {
        const bool top = l == at || l == n - 1;
        REQUIRE(logits[size_t(l)] == (top ? T(1) / T(count) : T(0)));
      }
    }
  }
}

TEMPLATE_TEST_CASE("finite_residue is zero for finite entries and NaN for any NaN or infinity, at every place",
                   "[kernel][finite]", float, double) {
  using T = TestType;
  const T specials[] = {std::numeric_limits<T>::quiet_NaN(), std::numeric_limits<T>::infinity(),
                        -std::numeric_limits<T>::infinity()};
  for (Index n : lengths<T>()) {
    INFO("n = " << n);
    std::vector<T> x = data<T>(n, 41);
    if (n > 1) x[1] = std::numeric_limits<T>::max();               // the largest finite values
    if (n > 2) x[2] = std::numeric_limits<T>::denorm_min();        // and subnormals are finite
    REQUIRE(abc::kernel::finite_residue(x.data() + 1, n) == T(0));  // unaligned
    REQUIRE(abc::kernel::scalar::finite_residue(x.data() + 1, n) == T(0));
    for (Index i = 0; i < n; ++i)
      for (T bad : specials) {
        std::vector<T> y = x;
        y[std::size_t(i + 1)] = bad;
        INFO("entry " << i << " = " << bad);
        REQUIRE(std::isnan(abc::kernel::finite_residue(y.data() + 1, n)));
        REQUIRE(std::isnan(abc::kernel::scalar::finite_residue(y.data() + 1, n)));
        // Outside the range nothing is read.
        REQUIRE(abc::kernel::finite_residue(y.data() + 1, i) == T(0));
      }
  }
  // Strided rows: rows × cols of a buffer with row stride cols + 3; a bad entry between the rows
  // is not read, one in a row is found wherever it is.
  for (Index cols : lengths<T>()) {
    if (cols > 100) continue;
    for (Index rows : {0, 1, 2, 5}) {
      INFO("rows = " << rows << ", cols = " << cols);
      const Index stride = cols + 3;
      std::vector<T> x = data<T>(std::max<Index>(rows * stride, 1), 43);
      for (Index i = 0; i < rows; ++i)
        for (Index j = cols; j < stride; ++j) x[std::size_t(1 + i * stride + j)] = specials[0];
      REQUIRE(abc::kernel::finite_residue_rows(x.data() + 1, rows, cols, stride) == T(0));
      for (Index i = 0; i < rows; ++i)
        for (Index j = 0; j < cols; ++j) {
          std::vector<T> y = x;
          y[std::size_t(1 + i * stride + j)] = specials[std::size_t(i + j) % 3];
          REQUIRE(std::isnan(abc::kernel::finite_residue_rows(y.data() + 1, rows, cols, stride)));
        }
    }
  }
  // Rows of their own lengths anywhere (a decode step's q, k, v and x): each row read to its own
  // end and no further, a bad entry found in whichever row and place it is.
  const std::vector<Index> lens = lengths<T>();
  for (std::size_t a = 0; a + 2 < lens.size(); ++a) {
    const Index len[3] = {lens[a], lens[a + 1], lens[a + 2] > 100 ? Index(7) : lens[a + 2]};
    std::vector<std::vector<T>> buf;
    for (int r = 0; r < 3; ++r) {
      buf.push_back(data<T>(len[r] + 2, std::uint64_t(50 + r)));
      buf.back()[std::size_t(len[r] + 1)] = specials[std::size_t(r)];  // just past the row: not read
    }
    const T* row[3] = {buf[0].data() + 1, buf[1].data() + 1, buf[2].data() + 1};
    INFO("lengths " << len[0] << ", " << len[1] << ", " << len[2]);
    REQUIRE(abc::kernel::finite_residue_each(row, len, 3) == T(0));
    REQUIRE(abc::kernel::finite_residue_each(row, len, 0) == T(0));
    for (int r = 0; r < 3; ++r)
      for (Index j = 0; j < len[r]; ++j) {
        const T keep = buf[std::size_t(r)][std::size_t(j + 1)];
        buf[std::size_t(r)][std::size_t(j + 1)] = specials[std::size_t(j + r) % 3];
        INFO("row " << r << ", entry " << j);
        REQUIRE(std::isnan(abc::kernel::finite_residue_each(row, len, 3)));
        REQUIRE(abc::kernel::finite_residue_each(row, len, r) == T(0));  // the rows before it only
        buf[std::size_t(r)][std::size_t(j + 1)] = keep;
      }
  }
}

TEMPLATE_TEST_CASE("saturate: NaN gives −∞, everything else is clamped to the finite range, bit for bit",
                   "[kernel][finite]", float, double) {
  using T = TestType;
  using lim = std::numeric_limits<T>;
  const T specials[] = {lim::quiet_NaN(), lim::infinity(), -lim::infinity(), lim::max(), -lim::max(),
                        lim::denorm_min(), -lim::denorm_min(), T(0), -T(0), lim::min()};
  for (Index n : lengths<T>()) {
    INFO("n = " << n);
    std::vector<T> x = data<T>(n, 49);
    for (Index j = 0; j <= n; ++j)  // every special at every place, among ordinary values
      if (j % 2 == 0) x[std::size_t(j)] = specials[std::size_t(j / 2) % std::size(specials)];
    std::vector<T> want = x;
    for (Index j = 1; j <= n; ++j) {  // the definition
      T& w = want[std::size_t(j)];
      if (std::isnan(w)) w = -lim::infinity();
      else if (w > lim::max()) w = lim::max();
      else if (w < -lim::max()) w = -lim::max();
    }
    abc::kernel::saturate(x.data() + 1, n);  // unaligned; entry 0 is outside the range
    REQUIRE(std::memcmp(x.data(), want.data(), x.size() * sizeof(T)) == 0);
  }
}

TEMPLATE_TEST_CASE("max_magnitude is the largest |x_j|, and NaN for any NaN or infinity, at every place",
                   "[kernel][finite]", float, double) {
  using T = TestType;
  using lim = std::numeric_limits<T>;
  REQUIRE(abc::kernel::max_magnitude(static_cast<const T*>(nullptr), 0) == T(0));
  for (Index n : lengths<T>()) {
    if (n == 0) continue;
    INFO("n = " << n);
    std::vector<T> x = data<T>(n, 47);
    // The largest magnitude at every place, negative or positive, subnormal when all others are
    // zero, and the largest finite value.
    for (Index i = 0; i < n; ++i)
      for (T big : {T(-7.5), T(7.5), lim::max(), -lim::max()}) {
        std::vector<T> y = x;
        y[std::size_t(i + 1)] = big;
        INFO("entry " << i << " = " << big);
        REQUIRE(abc::kernel::max_magnitude(y.data() + 1, n) == std::abs(big));  // unaligned
      }
    std::vector<T> tiny(std::size_t(n + 1), T(0));
    tiny[std::size_t(n)] = -lim::denorm_min();
    REQUIRE(abc::kernel::max_magnitude(tiny.data() + 1, n) == lim::denorm_min());
    tiny[std::size_t(n)] = T(-0.0);
    REQUIRE(abc::kernel::max_magnitude(tiny.data() + 1, n) == T(0));
    for (Index i = 0; i < n; ++i)
      for (T bad : {lim::quiet_NaN(), lim::infinity(), -lim::infinity()}) {
        std::vector<T> y = x;
        y[std::size_t(i + 1)] = bad;
        INFO("entry " << i << " = " << bad);
        REQUIRE(std::isnan(abc::kernel::max_magnitude(y.data() + 1, n)));
        // Outside the range nothing is read.
        if (i > 0) REQUIRE(!std::isnan(abc::kernel::max_magnitude(y.data() + 1, i)));
      }
  }
}

TEMPLATE_TEST_CASE("sin_cos: sines and cosines of a row; arguments past 64π, ±∞ and NaN as std::sin and std::cos",
                   "[kernel][sin_cos]", float, double) {
  // Past 64π xsimd reduces with its port of fdlibm's rem_pio2, which shifts a negative int left
  // (undefined behaviour, found by fuzz_api): such a batch takes the scalar path, so UBSan sees
  // nothing here, and those entries are std::sin and std::cos themselves.
  using T = TestType;
  using lim = std::numeric_limits<T>;
  const T scale = T(0.25);
  const T specials[] = {T(1e6), T(-3e7), T(1e30), lim::max(), lim::infinity(), -lim::infinity(), lim::quiet_NaN()};
  for (Index n : lengths<T>()) {
    std::vector<T> y = data<T>(n, 53);
    for (auto& e : y) e *= T(40);  // up to about 40 in magnitude: the vector path
    for (Index i = -1; i < n; ++i)
      for (T big : specials) {
        std::vector<T> a = y;
        if (i >= 0) a[std::size_t(i + 1)] = big;
        std::vector<T> s(std::size_t(n) + 1, T(7)), c = s;
        abc::kernel::sin_cos(a.data() + 1, n, scale, s.data() + 1, c.data() + 1);
        INFO("n = " << n << ", entry " << i << " = " << big);
        REQUIRE(s[0] == T(7));
        REQUIRE(c[0] == T(7));
        for (Index j = 0; j < n; ++j) {
          const T x = a[std::size_t(j + 1)], gs = s[std::size_t(j + 1)], gc = c[std::size_t(j + 1)];
          if (j == i) {  // the scalar path: std's values, bit for bit
            const T ws = scale * std::sin(x), wc = scale * std::cos(x);
            REQUIRE(((gs == ws) || (std::isnan(gs) && std::isnan(ws))));
            REQUIRE(((gc == wc) || (std::isnan(gc) && std::isnan(wc))));
          } else {
            const double tol = 4 * double(lim::epsilon()) * (1 + std::abs(double(x)));
            REQUIRE(std::abs(double(gs) - double(scale) * std::sin(double(x))) <= tol);
            REQUIRE(std::abs(double(gc) - double(scale) * std::cos(double(x))) <= tol);
          }
        }
        if (i < 0) break;
      }
  }
  // In place: the sines replace the arguments.
  std::vector<T> y = data<T>(37, 54), c(37);
  const std::vector<T> y0 = y;
  std::vector<T> s(37);
  abc::kernel::sin_cos(y0.data(), 37, scale, s.data(), c.data());
  abc::kernel::sin_cos(y.data(), 37, scale, y.data(), c.data());
  REQUIRE(std::vector<T>(y.begin(), y.begin() + 37) == s);
}

}  // namespace rows_test
