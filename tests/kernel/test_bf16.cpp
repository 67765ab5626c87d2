// SPDX-License-Identifier: MIT
// abc tests: the bfloat16 codec of a State's memory (kernel/bf16.hpp) against rounding worked out
// from the two neighbouring bfloat16 values in double, and the decode step's row kernels on a
// bfloat16 memory against the same kernels on the memory widened to float, then rounded.
#include <abc/kernel/bf16.hpp>
#include <abc/kernel/rows.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "support/catch.hpp"
#include "support/reference.hpp"

namespace bf16_test {

namespace {

using abc::Index;
using abc::kernel::bf16;

float bits_to_float(std::uint32_t b) {
  float f;
  std::memcpy(&f, &b, sizeof f);
  return f;
}
std::uint32_t float_to_bits(float f) {
  std::uint32_t b;
  std::memcpy(&b, &f, sizeof b);
  return b;
}
double bf16_value(std::uint32_t h) { return double(bits_to_float(h << 16)); }

// The nearest bfloat16 to a finite float, from its two neighbours: the pattern that truncates
// toward zero and the next one away from zero; the nearer in double, the even pattern on a tie;
// infinity replaced by the largest finite bfloat16 of the sign.
bf16 nearest_bf16(float f) {
  const std::uint32_t toward = float_to_bits(f) >> 16, away = toward + 1;
  const double x = double(f), lo = bf16_value(toward);
  const bool away_is_inf = (away & 0x7FFFu) == 0x7F80u;
  const double hi = away_is_inf ? std::numeric_limits<double>::infinity() : bf16_value(away);
  const double d_lo = std::abs(x - lo), d_hi = std::abs(hi - x);
  std::uint32_t pick = d_lo < d_hi ? toward : d_hi < d_lo ? away : ((toward & 1u) == 0 ? toward : away);
  if ((pick & 0x7FFFu) == 0x7F80u) pick -= 1;  // saturate: the largest finite value of the sign
  return bf16(pick);
}

// Finite floats spread over every exponent, subnormals and both zeros included.
std::vector<float> finite_floats(std::size_t count, std::uint32_t seed) {
  std::mt19937 gen(seed);
  std::vector<float> out;
  while (out.size() < count) {
    const float f = bits_to_float(std::uint32_t(gen()));
    if (std::isfinite(f)) out.push_back(f);
  }
  return out;
}

}  // namespace

TEST_CASE("to_bf16 rounds a float to the nearest bfloat16, ties to even, saturating; from_bf16 is exact",
          "[kernel][bf16]") {
  using abc::kernel::from_bf16;
  using abc::kernel::to_bf16;
  const float one = 1.0f, ulp = std::ldexp(1.0f, -7);  // bfloat16's spacing at 1
  CHECK(to_bf16(one) == 0x3F80);
  CHECK(to_bf16(one + ulp / 2) == 0x3F80);                            // a tie, to the even 1.0
  CHECK(to_bf16(one + 3 * ulp / 2) == 0x3F82);                        // a tie, to the even 1 + 2^-6
  CHECK(to_bf16(one + ulp / 2 + std::ldexp(1.0f, -20)) == 0x3F81);    // just past the tie
  CHECK(to_bf16(-0.0f) == 0x8000);
  CHECK(to_bf16(0.0f) == 0x0000);
  CHECK(to_bf16(std::numeric_limits<float>::max()) == 0x7F7F);       // not infinity
  CHECK(to_bf16(-std::numeric_limits<float>::max()) == 0xFF7F);
  CHECK(to_bf16(std::ldexp(1.0f, -133)) == 0x0001);                   // the smallest subnormal bfloat16
  CHECK(to_bf16(std::ldexp(1.0f, -149)) == 0x0000);                   // below half of it
  CHECK(to_bf16(std::numeric_limits<float>::min()) == 0x0080);        // the smallest normal float
  CHECK(from_bf16(0x3F80) == 1.0f);
  CHECK(from_bf16(0x0001) == std::ldexp(1.0f, -133));
  CHECK(std::signbit(from_bf16(0x8000)));
  for (std::uint32_t h = 0; h < 0x10000u; ++h)  // every finite bfloat16 survives a round trip
    if ((h & 0x7F80u) != 0x7F80u) REQUIRE(to_bf16(from_bf16(bf16(h))) == bf16(h));
  for (float f : finite_floats(200000, 1)) {
    INFO("f = " << f << " (bits " << float_to_bits(f) << ")");
    REQUIRE(to_bf16(f) == nearest_bf16(f));
  }
}

TEST_CASE("encode_bf16 and decode_bf16 equal the scalar codec at every length and offset", "[kernel][bf16]") {
  auto values = finite_floats(1100, 2);
  // Subnormals, alone in a batch of normal numbers and filling whole batches (the AVX-512-BF16
  // instruction flushes them; such batches must round like the rest).
  values[5] = 1e-40f;
  values[9] = -std::ldexp(1.0f, -140);
  for (std::size_t i = 40; i < 80; ++i) values[i] = std::ldexp(float(i), -150) * (i % 2 ? 1.0f : -1.0f);
  for (Index n : {0, 1, 3, 4, 7, 8, 15, 16, 17, 33, 64, 1000})
    for (Index off : {Index(0), Index(1)}) {
      INFO("n = " << n << ", offset " << off);
      std::vector<bf16> packed(std::size_t(n + 2), 0xABCD);
      abc::kernel::encode_bf16(values.data() + off, packed.data() + off, n);
      for (Index i = 0; i < n; ++i)
        REQUIRE(packed[std::size_t(off + i)] == abc::kernel::to_bf16(values[std::size_t(off + i)]));
      REQUIRE(packed[std::size_t(off + n)] == 0xABCD);  // nothing written past the end
      std::vector<float> back(std::size_t(n + 2), 7.0f);
      abc::kernel::decode_bf16(packed.data() + off, back.data() + off, n);
      for (Index i = 0; i < n; ++i)
        REQUIRE(float_to_bits(back[std::size_t(off + i)]) == std::uint32_t(packed[std::size_t(off + i)]) << 16);
      REQUIRE(back[std::size_t(off + n)] == 7.0f);
    }
}

namespace {
// A step's memory of n slots, keys and values of width d, in bfloat16 (K̃ column-major with a
// stride past n, Ṽ row-major with a stride past d) and widened to float: finite values from every
// exponent, brought into [-4, 4] and [-3, 3].
struct Bf16Memory {
  Index ldk, ldv;
  std::vector<bf16> cols, rows;
  std::vector<float> cols_f, rows_f;
  Bf16Memory(Index n, Index d, std::uint32_t seed) : ldk(n + 2), ldv(d + 3) {
    const auto start = finite_floats(std::size_t(std::max(ldk * d, ldv * n)), seed);
    cols.resize(static_cast<std::size_t>(ldk * d));
    rows.resize(static_cast<std::size_t>(ldv * n));
    for (std::size_t i = 0; i < cols.size(); ++i) cols[i] = abc::kernel::to_bf16(float(std::fmod(start[i], 4.0f)));
    for (std::size_t i = 0; i < rows.size(); ++i) rows[i] = abc::kernel::to_bf16(float(std::fmod(start[i], 3.0f)));
    cols_f.resize(cols.size());
    rows_f.resize(rows.size());
    abc::kernel::decode_bf16(cols.data(), cols_f.data(), Index(cols.size()));
    abc::kernel::decode_bf16(rows.data(), rows_f.data(), Index(rows.size()));
  }
};
}  // namespace

// A step's passes on a bfloat16 memory: every entry is widened, updated and read in float, then
// stored rounded, so scores and outputs equal those of the same kernel on the widened memory, and
// the memory it leaves equals that kernel's, rounded.
template <bool Update>
void check_bf16_blocks(bool scalar) {
  for (Index n : {1, 3, 8, 17, 64, 67})
    for (Index d : {1, 5, 16, 33}) {
      INFO("n = " << n << ", d = " << d << (scalar ? ", scalar" : ", simd") << (Update ? ", update" : ", read"));
      const auto r = ref::random<float>(6, std::max(n, d), std::uint64_t(n * 100 + d));
      const float* a = r.row(0).data();
      const float* w = r.row(1).data();
      const float* x = r.row(2).data();
      const float* q = r.row(3).data();
      const float* p = r.row(4).data();
      Bf16Memory m(n, d, std::uint32_t(n + d));
      auto &cols = m.cols, &rows = m.rows;
      auto &cols_f = m.cols_f, &rows_f = m.rows_f;
      const Index ldk = m.ldk, ldv = m.ldv;
      const auto nn = static_cast<std::size_t>(n), dd = static_cast<std::size_t>(d);
      std::vector<float> dots(nn), dots_f(nn), out(dd), out_f(dd);
      if (scalar) {
        abc::kernel::scalar::columns_dot<Update>(cols.data(), ldk, n, d, a, w, x, q, 0.5f, dots.data());
        abc::kernel::scalar::columns_dot<Update>(cols_f.data(), ldk, n, d, a, w, x, q, 0.5f, dots_f.data());
        abc::kernel::scalar::rows_axpy<Update>(rows.data(), ldv, n, d, a, w, x, p, out.data());
        abc::kernel::scalar::rows_axpy<Update>(rows_f.data(), ldv, n, d, a, w, x, p, out_f.data());
      } else {
        abc::kernel::columns_dot<Update>(cols.data(), ldk, n, d, a, w, x, q, 0.5f, dots.data());
        abc::kernel::columns_dot<Update>(cols_f.data(), ldk, n, d, a, w, x, q, 0.5f, dots_f.data());
        abc::kernel::rows_axpy<Update>(rows.data(), ldv, n, d, a, w, x, p, out.data());
        abc::kernel::rows_axpy<Update>(rows_f.data(), ldv, n, d, a, w, x, p, out_f.data());
      }
      REQUIRE(dots == dots_f);
      REQUIRE(out == out_f);
      for (std::size_t i = 0; i < cols.size(); ++i) REQUIRE(cols[i] == abc::kernel::to_bf16(cols_f[i]));
      for (std::size_t i = 0; i < rows.size(); ++i) REQUIRE(rows[i] == abc::kernel::to_bf16(rows_f[i]));
    }
}

TEST_CASE("the step's row kernels on a bfloat16 memory equal them on the widened memory, rounded",
          "[kernel][bf16]") {
  for (bool scalar : {true, false}) {
    check_bf16_blocks<true>(scalar);
    check_bf16_blocks<false>(scalar);
  }
}

// Up to four query heads reading one bfloat16 memory share one pass over each matrix: the first
// head's pass updates it, and every head reads the entries as updated in float, before they are
// rounded. Scores and outputs equal one update pass and, per other head, a read of the updated
// rows in that pass's order (weighted_rows, which skips the rows it weighs 0) over the widened
// memory, and the memory left equals that one, rounded.
TEST_CASE("the step's passes for a group of heads on a bfloat16 memory equal them on the widened memory",
          "[kernel][bf16]") {
  using abc::kernel::Pass;
  for (Index heads = 1; heads <= abc::kernel::max_shared_heads; ++heads)
    for (Index n : {1, 3, 17, 33, 64, 67})
      for (Index d : {1, 5, 16, 33, 70}) {
        INFO("heads = " << heads << ", n = " << n << ", d = " << d);
        const auto r = ref::random<float>(3 + 2 * heads, std::max(n, d), std::uint64_t(heads * 10000 + n * 100 + d));
        const float* a = r.row(0).data();
        const float* w = r.row(1).data();
        const float* x = r.row(2).data();
        abc::Matrix<float> p = r.bottomRows(heads);  // head g's weights; some rows weighed 0 by the others
        for (Index g = 1; g < heads; ++g)
          for (Index l = g; l < n; l += 3) p(g, l) = 0.0f;
        const auto q = [&](Index g) { return r.row(3 + g).data(); };
        const auto weights = [&](Index g) { return p.row(g).data(); };
        Bf16Memory m(n, d, std::uint32_t(heads + n + d));
        auto &cols = m.cols, &rows = m.rows;
        auto &cols_f = m.cols_f, &rows_f = m.rows_f;
        const Index ldk = m.ldk, ldv = m.ldv;
        abc::Matrix<float> dots(heads, n), dots_f(heads, n), out(heads, d), out_f(heads, d);
        abc::kernel::columns_pass_heads<Pass::update>(cols.data(), ldk, n, d, a, w, x, heads, q, 0.5f,
                                                      [&](Index g) { return dots.row(g).data(); });
        abc::kernel::rows_pass_heads<Pass::update>(rows.data(), ldv, n, d, a, w, x, heads, weights,
                                                   [&](Index g) { return out.row(g).data(); });
        abc::kernel::columns_pass<Pass::update>(cols_f.data(), ldk, n, d, a, w, x, q(0), 0.5f, dots_f.row(0).data());
        abc::kernel::rows_pass<Pass::update>(rows_f.data(), ldv, n, d, a, w, x, weights(0), out_f.row(0).data());
        for (Index g = 1; g < heads; ++g) {
          abc::kernel::columns_pass<Pass::read>(cols_f.data(), ldk, n, d, a, w, x, q(g), 0.5f, dots_f.row(g).data());
          abc::kernel::weighted_rows(rows_f.data(), ldv, n, d, weights(g), out_f.row(g).data());
        }
        REQUIRE(dots == dots_f);
        REQUIRE(out == out_f);
        for (std::size_t i = 0; i < cols.size(); ++i) REQUIRE(cols[i] == abc::kernel::to_bf16(cols_f[i]));
        for (std::size_t i = 0; i < rows.size(); ++i) REQUIRE(rows[i] == abc::kernel::to_bf16(rows_f[i]));
        // A pass that only reads (a one-hot write applied before it): each head reads as a read pass
        // of its own over the widened memory, and the memory is left as it was.
        const std::vector<bf16> kept = rows;
        std::vector<float> widened(rows.size());
        abc::kernel::decode_bf16(rows.data(), widened.data(), Index(rows.size()));
        abc::Matrix<float> read(heads, d), read_f(heads, d);
        abc::kernel::rows_pass_heads<Pass::read>(rows.data(), ldv, n, d, a, w, x, heads, weights,
                                                 [&](Index g) { return read.row(g).data(); });
        for (Index g = 0; g < heads; ++g)
          abc::kernel::rows_pass<Pass::read>(widened.data(), ldv, n, d, a, w, x, weights(g), read_f.row(g).data());
        REQUIRE(read == read_f);
        REQUIRE(rows == kept);
      }
}

}  // namespace bf16_test
