// SPDX-License-Identifier: MIT
// abc tests: select::Rope against RoPE's definition (both pairings), its composition rule, and a KV
// cache with rotary keys at compacted positions (StreamingLLM's sink cache; H2O, SnapKV) against
// the float64 reference that keeps keys unrotated and turns every kept token to its index at each
// read: the cache's re-rotation on eviction must give the same logits.
#include <abc/abc.hpp>
#include <abc/select/rope.hpp>
#include <abc/select/state_io.hpp>

#include <cmath>
#include <cstdint>
#include <vector>

#include "support/approx.hpp"
#include "support/catch.hpp"
#include "support/kv_cache_reference.hpp"
#include "support/reference.hpp"

namespace rope_test {

namespace {

using abc::Index;
using abc::select::KvCacheAttention;
using abc::select::Rope;
using abc::select::RopePairs;

}  // namespace

TEMPLATE_TEST_CASE("Rope turns pairs by position times its frequencies, and its turns compose", "[rope]", float,
                   double) {
  using T = TestType;
  const double tol = std::is_same<T, double>::value ? 1e-12 : 2e-5;
  for (const RopePairs pairs : {RopePairs::half, RopePairs::interleaved}) {
    for (const Index dims : {2, 6, 8}) {
      const Index d = dims + 3;  // entries past dims are left alone
      const Rope<T> rope(dims, 500.0, pairs);
      const abc::Matrix<T> x = ref::random<T>(1, d, 7);
      const std::vector<double> xd = ref::from(x)[0];
      for (const std::int64_t delta : {0, -1, 1, 5, -13, 1000}) {
        INFO("dims " << dims << ", delta " << delta << (pairs == RopePairs::half ? ", half" : ", interleaved"));
        abc::Matrix<T> y = x;
        rope.rotate(y.data(), delta);
        const auto want = kvref::rope(xd, double(delta), size_t(dims), 500.0, pairs == RopePairs::interleaved);
        for (Index j = 0; j < d; ++j) REQUIRE(std::abs(double(y(0, j)) - want[size_t(j)]) <= tol * (1 + std::abs(want[size_t(j)])));
        // R(a) R(b) = R(a + b): a key turned to 9 and then through delta sits at 9 + delta.
        abc::Matrix<T> z = x;
        rope.rotate(z.data(), 9);
        rope.rotate(z.data(), delta);
        const auto at = kvref::rope(xd, double(9 + delta), size_t(dims), 500.0, pairs == RopePairs::interleaved);
        for (Index j = 0; j < d; ++j) REQUIRE(std::abs(double(z(0, j)) - at[size_t(j)]) <= tol * (1 + std::abs(at[size_t(j)])));
      }
      // apply(): row i to position first + i.
      abc::Matrix<T> rows = ref::random<T>(3, d, 8);
      const ref::Mat before = ref::from(rows);
      rope.apply(rows, 4);
      for (Index i = 0; i < 3; ++i) {
        const auto want = kvref::rope(before[size_t(i)], double(4 + i), size_t(dims), 500.0, pairs == RopePairs::interleaved);
        for (Index j = 0; j < d; ++j) REQUIRE(std::abs(double(rows(i, j)) - want[size_t(j)]) <= tol * (1 + std::abs(want[size_t(j)])));
      }
    }
  }
  REQUIRE_THROWS_WITH(Rope<T>(5), ABC_CONTAINS("abc::select::Rope: dims is 5, expected an even number at least 2"));
  REQUIRE_THROWS_WITH(Rope<T>(0), ABC_CONTAINS("abc::select::Rope: dims is 0"));
  REQUIRE_THROWS_WITH(Rope<T>(4, 1.0), ABC_CONTAINS("abc::select::Rope: base is 1"));
}

namespace {

// A stream through a cache with rotary keys at compacted positions: the caller turns each
// segment's queries and keys to positions size(), size() + 1, …; the reference keeps raw keys and
// turns them at every read. Calls of the cycled lengths (1: a step).
template <class Policy>
void check_rope_stream(const Policy& policy, RopePairs pairs, const std::vector<Index>& lengths) {
  const Index N = 61, d = 6, dv = 3, dims = 4;
  const double base = 100.0;  // fast turns at small positions: a wrong position shows
  const KvCacheAttention<Policy> attn(policy, 0.0, Rope<double>(dims, base, pairs));
  const abc::Matrix<double> q = ref::random<double>(N, d, 31, 1.5), k = ref::random<double>(N, d, 32, 1.5),
                            v = ref::random<double>(N, dv, 33);
  kvref::RefCache r = kvref::ref_cache(policy, d);
  r.rope_dims = size_t(dims);
  r.rope_base = base;
  r.rope_interleaved = pairs == RopePairs::interleaved;
  auto s = attn.make_state(d, dv);
  Index t = 0;
  for (size_t c = 0; t < N; ++c) {
    const Index len = std::min(lengths[c % lengths.size()], N - t);
    INFO("tokens " << t << " .. " << t + len);
    abc::Matrix<double> qr = q.middleRows(t, len), kr = k.middleRows(t, len);
    attn.rope()->apply(qr, s.size());
    attn.rope()->apply(kr, s.size());
    const abc::Matrix<double> got = attn.segment(s, qr, kr, v.middleRows(t, len));
    const auto rows = [&](const abc::Matrix<double>& m) { return ref::from(abc::Matrix<double>(m.middleRows(t, len))); };
    ref::require_close(got, r.segment(rows(q), rows(k), rows(v)));
    REQUIRE(kvref::kept_positions(s) == kvref::kept_positions(r));
    // Every kept key is its raw key turned to its age.
    for (Index a = 0; a < s.size(); ++a) {
      const auto want = kvref::rope(r.kept[size_t(a)].k, double(a), size_t(dims), base, r.rope_interleaved);
      for (Index j = 0; j < d; ++j) REQUIRE(std::abs(s.key(a)(j) - want[size_t(j)]) <= 1e-12);
    }
    t += len;
  }
}

}  // namespace

TEST_CASE("a cache with rotary keys at compacted positions re-rotates what eviction moves",
          "[rope][sinks][h2o][snapkv]") {
  const std::vector<std::vector<Index>> schedules = {{1}, {9, 1}, {3, 1, 5, 2}};
  for (const auto& lengths : schedules) {
    for (const RopePairs pairs : {RopePairs::half, RopePairs::interleaved}) {
      INFO("first call " << lengths[0] << (pairs == RopePairs::half ? ", half" : ", interleaved"));
      check_rope_stream(abc::select::AttentionSinks<double>(abc::select::SinkConfig{2, 5}), pairs, lengths);
      check_rope_stream(abc::select::HeavyHitters<double>(abc::select::HeavyHitterConfig{4, 3}), pairs, lengths);
      check_rope_stream(
          abc::select::SnapKv<double>(abc::select::SnapKvConfig{5, 3, 3, abc::select::Pooling::average, 2}), pairs,
          lengths);
    }
  }
}

TEST_CASE("a cache's rope needs keys as wide as its turns", "[rope][errors]") {
  using Attn = abc::select::HeavyHitterAttention<float>;
  const Attn attn(abc::select::HeavyHitterConfig{2, 2}, 0.0, Rope<float>(8));
  REQUIRE_THROWS_WITH(attn.make_state(6, 3), ABC_CONTAINS("make_state: d is 6, expected at least 8 (the rope's dims()"));
  // A cache of the same budget made without a rope, with narrower keys, is refused before a turn.
  const Attn plain(abc::select::HeavyHitterConfig{2, 2});
  auto narrow = plain.make_state(6, 3);
  const abc::Matrix<float> x = ref::random<float>(3, 6, 1), v = ref::random<float>(3, 3, 2);
  REQUIRE_THROWS_WITH(attn.segment(narrow, x, x, v), ABC_CONTAINS("state.key_dim() is 6, expected at least 8"));
  REQUIRE(narrow.size() == 0);
  (void)plain.segment(narrow, x, x, v);
  typename Attn::State loaded;
  REQUIRE_THROWS_WITH(abc::select::load_state(attn, abc::select::save_state(plain, narrow), loaded),
                      ABC_CONTAINS("d is 6, expected at least 8 (the attention's rope turns that many entries)"));
  REQUIRE(loaded.capacity() == 0);
}

}  // namespace rope_test
