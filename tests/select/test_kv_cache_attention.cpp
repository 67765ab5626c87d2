// SPDX-License-Identifier: MIT
// abc tests: select::KvCacheAttention with its three policies (docs/operators/kv_cache.md) against a
// float64 reference written with plain loops from their rules: read every kept token and the
// segment causally; score (H2O: add each query's probabilities to the masses of what it read;
// sinks: minus the position; SnapKV: a prompt's last queries vote, pooled, a decoded token −∞);
// keep the `recent` newest and the highest scores among the rest (of equal scores the newer).
// Every form (prefill, decode loop, mixed segments), odd sizes, the rules by construction, sinks
// against Concat<GlobalTokens, SlidingWindow>, errors, and state blobs.
#include <abc/abc.hpp>
#include <abc/select/attention_sinks.hpp>
#include <abc/select/heavy_hitters.hpp>
#include <abc/select/snap_kv.hpp>
#include <abc/select/state_io.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "support/approx.hpp"
#include "support/blob.hpp"
#include "support/catch.hpp"
#include "support/kv_cache_reference.hpp"
#include "support/reference.hpp"

namespace kv_cache_attention_test {

namespace {

using abc::Index;
using abc::select::AttentionSinks;
using abc::select::HeavyHitterAttention;
using abc::select::HeavyHitterConfig;
using abc::select::HeavyHitters;
using abc::select::KvCacheAttention;
using abc::select::SinkConfig;
using abc::select::SnapKv;
using abc::select::SnapKvConfig;
using Blob = std::vector<std::uint8_t>;
using kvref::RefCache;
using kvref::Rule;
using kvref::kept_positions;
using kvref::ref_cache;

ref::Mat rows_of(const ref::Mat& m, size_t first, size_t count) {
  return ref::Mat(m.begin() + long(first), m.begin() + long(first + count));
}

// The stream in calls of the given lengths (cycled); a length of 1 is a step.
template <class Policy>
void check_stream(const Policy& policy, const std::vector<Index>& lengths, Index N, Index d, Index dv,
                  std::uint64_t seed) {
  using T = typename Policy::scalar_type;
  const KvCacheAttention<Policy> attn(policy);
  // Keys of unequal norms, so that attention is far from uniform and masses separate.
  const abc::Matrix<T> q = ref::random<T>(N, d, seed, 1.5), k = ref::random<T>(N, d, seed + 1, 1.5),
                       v = ref::random<T>(N, dv, seed + 2);
  const ref::Mat qd = ref::from(q), kd = ref::from(k), vd = ref::from(v);
  RefCache r = ref_cache(policy, d);
  auto s = attn.make_state(d, dv);
  Index t = 0;
  for (size_t c = 0; t < N; ++c) {
    const Index len = std::min(lengths[c % lengths.size()], N - t);
    INFO("tokens " << t << " .. " << t + len);
    const bool exact = std::is_same<T, double>::value;
    // A float cache's masses may order near-ties differently from float64's: the reference then
    // reads the cache's own kept set, and the cache's cut is checked against the rule up to them.
    if (!exact) r.follow(kept_positions(s));
    abc::Matrix<T> got(len, dv);
    if (len == 1)
      got.row(0) = attn.step(s, q.row(t).transpose(), k.row(t).transpose(), v.row(t).transpose()).transpose();
    else
      got = attn.segment(s, q.middleRows(t, len), k.middleRows(t, len), v.middleRows(t, len));
    const ref::Mat expected = r.segment(rows_of(qd, size_t(t), size_t(len)), rows_of(kd, size_t(t), size_t(len)),
                                        rows_of(vd, size_t(t), size_t(len)));
    ref::require_close(got, expected);
    REQUIRE(s.position() == t + len);
    REQUIRE(s.size() == std::min<Index>(t + len, attn.budget()));
    const std::vector<std::int64_t> mine = kept_positions(s), theirs = kept_positions(r);
    if (exact) {
      REQUIRE(mine == theirs);
    } else {
      for (std::int64_t a : mine)
        for (std::int64_t b : theirs)
          if (std::find(theirs.begin(), theirs.end(), a) == theirs.end() &&
              std::find(mine.begin(), mine.end(), b) == mine.end()) {
            const double ma = r.seen.at(a).score, mb = r.seen.at(b).score;
            INFO("kept " << a << " (score " << ma << ") where the reference kept " << b << " (score " << mb << ")");
            REQUIRE(std::abs(ma - mb) <= 1e-4 * (1 + std::max(std::abs(ma), std::abs(mb))));
          }
    }
    for (Index a = 0; a < s.size(); ++a) {
      const double want = r.seen.at(s.token_position(a)).score;
      if (std::isinf(want))
        REQUIRE(s.score(a) == want);
      else
        REQUIRE(std::abs(s.score(a) - want) <= (std::is_same<T, double>::value ? 1e-12 : 1e-4) * (1 + std::abs(want)));
    }
    t += len;
  }
}

}  // namespace

TEMPLATE_TEST_CASE("H2O equals its float64 reference in every form", "[h2o]", float, double) {
  using T = TestType;
  const std::vector<std::vector<Index>> schedules = {{1}, {9, 1}, {3, 1, 5, 2}, {40}};
  for (const HeavyHitterConfig cfg : {HeavyHitterConfig{3, 2}, HeavyHitterConfig{0, 4}, HeavyHitterConfig{4, 0},
                                      HeavyHitterConfig{1, 1}, HeavyHitterConfig{5, 3}, HeavyHitterConfig{64, 64}}) {
    for (const auto& lengths : schedules) {
      INFO("heavy " << cfg.heavy << ", recent " << cfg.recent << ", first call " << lengths[0]);
      check_stream(HeavyHitters<T>(cfg), lengths, 37, 5, 3, 7);
    }
  }
}

TEMPLATE_TEST_CASE("attention sinks and SnapKV equal their float64 references in every form", "[sinks][snapkv]",
                   float, double) {
  using T = TestType;
  const std::vector<std::vector<Index>> schedules = {{1}, {9, 1}, {3, 1, 5, 2}, {40}};
  for (const auto& lengths : schedules) {
    INFO("first call " << lengths[0]);
    for (const SinkConfig cfg : {SinkConfig{4, 5}, SinkConfig{0, 3}, SinkConfig{2, 0}, SinkConfig{1, 1}})
      check_stream(AttentionSinks<T>(cfg), lengths, 37, 5, 3, 11);
    for (const SnapKvConfig cfg :
         {SnapKvConfig{6, 2, 3, abc::select::Pooling::average, 0}, SnapKvConfig{5, 3, 1, abc::select::Pooling::max, 2},
          SnapKvConfig{7, 4, 5, abc::select::Pooling::max, 3}, SnapKvConfig{4, 4, 3, abc::select::Pooling::average, 1},
          // A kernel wider than any prompt (a pool of a whole prompt; the fuzzer's huge kernels
          // once reserved kernel / 2 entries).
          SnapKvConfig{6, 3, 1001, abc::select::Pooling::average, 1}, SnapKvConfig{6, 3, 1001, abc::select::Pooling::max, 0}}) {
      INFO("snapkv capacity " << cfg.capacity << ", window " << cfg.window << ", kernel " << cfg.kernel);
      check_stream(SnapKv<T>(cfg), lengths, 37, 5, 3, 13);
    }
  }
}

TEMPLATE_TEST_CASE("attention sinks read what Concat<GlobalTokens, SlidingWindow> reads", "[sinks]", float, double) {
  using T = TestType;
  using namespace abc::control;
  const Index N = 40, d = 6, dv = 4;
  const abc::Matrix<T> q = ref::random<T>(N, d, 5, 1.5), k = ref::random<T>(N, d, 6, 1.5), v = ref::random<T>(N, dv, 7);
  for (const SinkConfig cfg : {SinkConfig{4, 7}, SinkConfig{1, 3}, SinkConfig{3, 0}, SinkConfig{2, 5}}) {
    INFO("sinks " << cfg.sinks << ", window " << cfg.window);
    const abc::select::SinkAttention<T> sinks(cfg);
    std::vector<Index> first(std::size_t(cfg.sinks));
    for (Index i = 0; i < cfg.sinks; ++i) first[std::size_t(i)] = i;
    // A step reads the sinks, the `window` previous tokens and itself: a window of window + 1.
    const abc::BoundedAttention concat{
        Concat<GlobalTokens<T>, SlidingWindow<T>>(GlobalTokens<T>(first), SlidingWindow<T>(cfg.window + 1))};
    auto cache = sinks.make_state(d, dv);
    auto state = concat.make_state(d, dv);
    abc::Matrix<T> a(N, dv), b(N, dv);
    for (Index t = 0; t < N; ++t) {
      a.row(t) = sinks.step(cache, q.row(t).transpose(), k.row(t).transpose(), v.row(t).transpose()).transpose();
      b.row(t) = concat.step(state, q.row(t).transpose(), k.row(t).transpose(), v.row(t).transpose()).transpose();
    }
    ref::require_same(a, b);
    std::vector<std::int64_t> want;  // the sinks, then the window
    for (Index i = 0; i < cfg.sinks; ++i) want.push_back(i);
    for (Index i = N - cfg.window; i < N; ++i) want.push_back(i);
    REQUIRE(kept_positions(cache) == want);
  }
}

// SnapKV's prompt compression as its paper states it, with no decode window: the observation
// window's votes for each earlier prompt token, pooled; keep the top capacity − window and the window.
TEST_CASE("SnapKV with no decode window keeps exactly SnapKV's compressed prompt", "[snapkv]") {
  const Index L = 30, d = 5, dv = 3;
  const abc::Matrix<double> q = ref::random<double>(L, d, 21, 2.0), k = ref::random<double>(L, d, 22, 2.0),
                            v = ref::random<double>(L, dv, 23);
  for (auto pooling : {abc::select::Pooling::average, abc::select::Pooling::max}) {
    for (Index kernel : {1, 3, 5}) {
      const SnapKvConfig cfg{10, 4, kernel, pooling, 0};
      INFO("kernel " << kernel << ", max " << (pooling == abc::select::Pooling::max));
      const abc::select::SnapKvAttention<double> attn(cfg);
      auto s = attn.make_state(d, dv);
      (void)attn.segment(s, q, k, v);
      // The votes: softmax rows of the window's queries over every earlier key (causal).
      const Index w = cfg.window, prefix = L - w;
      std::vector<double> votes(std::size_t(prefix), 0.0);
      for (Index i = L - w; i < L; ++i) {
        std::vector<double> logit(std::size_t(i + 1));
        double mx = -1e300, sum = 0;
        for (Index j = 0; j <= i; ++j) {
          logit[std::size_t(j)] = q.row(i).dot(k.row(j)) / std::sqrt(double(d));
          mx = std::max(mx, logit[std::size_t(j)]);
        }
        for (double x : logit) sum += std::exp(x - mx);
        for (Index j = 0; j < prefix; ++j) votes[std::size_t(j)] += std::exp(logit[std::size_t(j)] - mx) / sum;
      }
      std::vector<std::pair<double, Index>> pooled;
      for (Index j = 0; j < prefix; ++j) {
        double acc = pooling == abc::select::Pooling::max ? -1e300 : 0.0;
        for (Index t = j - kernel / 2; t <= j + kernel / 2; ++t) {
          const double x = (t >= 0 && t < prefix) ? votes[std::size_t(t)] : (pooling == abc::select::Pooling::max ? -1e300 : 0.0);
          acc = pooling == abc::select::Pooling::max ? std::max(acc, x) : acc + x;
        }
        pooled.push_back({pooling == abc::select::Pooling::max ? acc : acc / double(kernel), j});
      }
      // Max pooling gives neighbours equal scores: of equal scores the newer token is kept.
      std::sort(pooled.begin(), pooled.end(),
                [](const auto& a, const auto& b) { return a.first != b.first ? a.first > b.first : a.second > b.second; });
      std::vector<std::int64_t> want;
      for (Index i = 0; i < cfg.capacity - w; ++i) want.push_back(pooled[std::size_t(i)].second);
      for (Index j = prefix; j < L; ++j) want.push_back(j);
      std::sort(want.begin(), want.end());
      REQUIRE(kept_positions(s) == want);
      // Decoding keeps the compressed prompt: a decoded token is read, then goes (no decode window).
      const abc::Vector<double> one = abc::Vector<double>::Ones(d);
      (void)attn.step(s, one, one, abc::Vector<double>::Ones(dv));
      REQUIRE(kept_positions(s) == want);
    }
  }
}

TEMPLATE_TEST_CASE("H2O with a budget of the whole stream is exact causal attention", "[h2o]", float, double) {
  using T = TestType;
  const Index N = 23, d = 7, dv = 5;
  const HeavyHitterAttention<T> attn(HeavyHitterConfig{20, 3});
  const abc::Matrix<T> q = ref::random<T>(N, d, 1), k = ref::random<T>(N, d, 2), v = ref::random<T>(N, dv, 3);
  const ref::Mat want = ref::attention(ref::from(q), ref::from(k), ref::from(v), 1.0 / std::sqrt(double(d)), true);
  auto prefill = attn.make_state(d, dv);
  ref::require_close(attn.segment(prefill, q, k, v), want);
  auto loop = attn.make_state(d, dv);
  abc::Matrix<T> stepped(N, dv);
  for (Index t = 0; t < N; ++t)
    stepped.row(t) = attn.step(loop, q.row(t).transpose(), k.row(t).transpose(), v.row(t).transpose()).transpose();
  ref::require_close(stepped, want);
  // Nothing was evicted: the two forms read the same tokens and hold the same masses.
  REQUIRE(kept_positions(prefill) == kept_positions(loop));
  for (Index a = 0; a < N; ++a) REQUIRE(std::abs(prefill.score(a) - loop.score(a)) <= 1e-5 * (1 + loop.score(a)));
}

// One-wide keys and queries of 1: a key of 0 gets attention, a key of −1e4 gets exactly none.
template <class T>
std::vector<std::int64_t> run_keys(const HeavyHitterConfig& cfg, const std::vector<T>& keys) {
  const HeavyHitterAttention<T> attn(cfg);
  auto s = attn.make_state(1, 1);
  const abc::Vector<T> one = abc::Vector<T>::Ones(1);
  for (T key : keys) (void)attn.step(s, one, abc::Vector<T>::Constant(1, key), one);
  return kept_positions(s);
}

TEMPLATE_TEST_CASE("H2O's rules: equal masses evict the older token; the recent tokens stay", "[h2o]", float, double) {
  using T = TestType;
  const T none = T(-1e4);
  // Masses after token 3: token 0 has 3.5, tokens 1 and 2 exactly 0 (a tie), token 3 (recent) 0.5.
  // The tie goes against the older token: 1 leaves, 2 stays.
  REQUIRE(run_keys<T>(HeavyHitterConfig{2, 1}, {0, none, none, 0}) == std::vector<std::int64_t>{0, 2, 3});
  // The two newest are kept with no mass at all, and the one heavy hitter is token 0.
  REQUIRE(run_keys<T>(HeavyHitterConfig{1, 2}, {0, none, none, none, none, none}) ==
          std::vector<std::int64_t>{0, 4, 5});
  // No recent window: a new token with no mass is the one to go (the tie with the older zero-mass
  // tokens goes against them first, until only token 0 and the newest zero remain).
  REQUIRE(run_keys<T>(HeavyHitterConfig{2, 0}, {0, none, none, none}) == std::vector<std::int64_t>{0, 3});
  // A segment is cut once, after all its queries have read: token 1, read by the three later
  // queries, outweighs token 2; a step loop would have made the same choice here.
  const HeavyHitterAttention<T> attn(HeavyHitterConfig{1, 1});
  auto s = attn.make_state(1, 1);
  abc::Matrix<T> k(4, 1), qv = abc::Matrix<T>::Ones(4, 1);
  k << none, 0, none, none;
  (void)attn.segment(s, qv, k, qv);
  REQUIRE(kept_positions(s) == std::vector<std::int64_t>{1, 3});
}

TEST_CASE("H2O errors name the argument, and a failed call changes nothing", "[h2o][errors]") {
  using Attn = HeavyHitterAttention<float>;
  REQUIRE_THROWS_WITH(Attn(HeavyHitterConfig{-1, 2}),
                      ABC_CONTAINS("abc::select::HeavyHitters: config.heavy is -1, expected at least 0"));
  REQUIRE_THROWS_WITH(Attn(HeavyHitterConfig{2, -3}),
                      ABC_CONTAINS("abc::select::HeavyHitters: config.recent is -3, expected at least 0"));
  REQUIRE_THROWS_WITH(Attn(HeavyHitterConfig{0, 0}),
                      ABC_CONTAINS("abc::select::KvCacheAttention: selected + recent is 0, expected at least 1"));
  REQUIRE_THROWS_WITH(Attn(HeavyHitterConfig{2, 2}, -1.0), ABC_CONTAINS("abc::select::KvCacheAttention: scale"));
  const Attn attn(HeavyHitterConfig{2, 2});
  REQUIRE_THROWS_AS(attn.make_state(0, 3), abc::config_error);
  REQUIRE_THROWS_WITH(attn.make_state(4, 0), ABC_CONTAINS("make_state: dv is 0, expected at least 1"));
  REQUIRE_THROWS_WITH(attn.make_state(std::numeric_limits<Index>::max() / 2, 4), ABC_CONTAINS("overflows"));

  auto s = attn.make_state(4, 3);
  const abc::Matrix<float> q = ref::random<float>(6, 4, 1), v = ref::random<float>(6, 3, 2);
  (void)attn.segment(s, q, q, v);
  const Blob before = abc::select::save_state(attn, s);
  const auto unchanged = [&] { REQUIRE(abc::select::save_state(attn, s) == before); };
  REQUIRE_THROWS_AS(attn.segment(s, q.leftCols(3), q, v), abc::shape_error);
  REQUIRE_THROWS_WITH(attn.segment(s, q.leftCols(3), q, v),
                      ABC_CONTAINS("abc::select::KvCacheAttention: q is [6 x 3], expected [6 x 4]"));
  unchanged();
  REQUIRE_THROWS_WITH(attn.segment(s, q, q.topRows(5), v), ABC_CONTAINS("k is [5 x 4], expected [6 x 4]"));
  unchanged();
  abc::Matrix<float> bad = q;
  bad(2, 1) = std::numeric_limits<float>::quiet_NaN();
  REQUIRE_THROWS_WITH(attn.segment(s, q, bad, v), ABC_CONTAINS("k holds a non-finite value at row 2, column 1"));
  unchanged();
  REQUIRE_THROWS_WITH(attn.step(s, q.row(0).transpose(), q.row(0).transpose(), q.row(0).transpose()),
                      ABC_CONTAINS("v.size() is 4, expected 3"));
  unchanged();
  const Attn other(HeavyHitterConfig{3, 2});
  auto foreign = other.make_state(4, 3);
  REQUIRE_THROWS_WITH(attn.segment(foreign, q, q, v), ABC_CONTAINS("state.capacity() is 5, expected 4"));
  REQUIRE(foreign.size() == 0);
}

// A cache after `prefix` tokens (a prompt segment, then steps) saves, loads into a default State,
// saves back to the same bytes, and continues bit for bit as the saved one.
template <class Policy>
void round_trip(const Policy& policy, std::size_t tag_length) {
  using T = typename Policy::scalar_type;
  const Index d = 5, dv = 3;
  const KvCacheAttention<Policy> attn(policy);
  const abc::Matrix<T> q = ref::random<T>(40, d, 4, 1.5), k = ref::random<T>(40, d, 5, 1.5), v = ref::random<T>(40, dv, 6);
  for (Index prefix : {0, 3, 5, 12, 20}) {  // empty, filling, full, evicting
    INFO(Policy::tag() << ", prefix " << prefix);
    auto s = attn.make_state(d, dv);
    const Index prompt = prefix / 2;
    if (prompt > 0) (void)attn.segment(s, q.topRows(prompt), k.topRows(prompt), v.topRows(prompt));
    for (Index t = prompt; t < prefix; ++t) (void)attn.step(s, q.row(t).transpose(), k.row(t).transpose(), v.row(t).transpose());
    const Blob saved = abc::select::save_state(attn, s);
    REQUIRE(saved.size() == 8 + 4 + 4 + 4 + tag_length + 6 * 8 + std::size_t(s.size()) * ((d + dv) * sizeof(T) + 16) + 8);
    typename KvCacheAttention<Policy>::State loaded;
    abc::select::load_state(attn, saved, loaded);
    REQUIRE(abc::select::save_state(attn, loaded) == saved);
    for (Index t = prefix; t < prefix + 10; ++t)
      REQUIRE(attn.step(loaded, q.row(t).transpose(), k.row(t).transpose(), v.row(t).transpose()) ==
              attn.step(s, q.row(t).transpose(), k.row(t).transpose(), v.row(t).transpose()));
    REQUIRE(abc::select::save_state(attn, loaded) == abc::select::save_state(attn, s));
  }
}

TEMPLATE_TEST_CASE("a KV cache round-trips bit-exactly and continues as the saved one, for every policy",
                   "[h2o][sinks][snapkv][state_io]", float, double) {
  using T = TestType;
  round_trip(HeavyHitters<T>(HeavyHitterConfig{3, 2}), 25);
  round_trip(AttentionSinks<T>(SinkConfig{2, 3}), 27);
  round_trip(SnapKv<T>(SnapKvConfig{4, 2, 3, abc::select::Pooling::max, 2}), 19);  // scores of ±∞ too
}

TEST_CASE("sink and SnapKV blobs hold scores their policy could give", "[sinks][snapkv][state_io][errors]") {
  const Index d = 4, dv = 3;
  const abc::Matrix<double> q = ref::random<double>(9, d, 1), v = ref::random<double>(9, dv, 2);
  const std::size_t score_at = (d + dv) * sizeof(double);
  const auto field = [&](std::size_t tag_length, std::size_t token) {
    return 8 + 4 + 4 + 4 + tag_length + 48 + token * ((d + dv) * sizeof(double) + 16) + score_at;
  };
  const abc::select::SinkAttention<double> sinks(SinkConfig{2, 2});
  auto s = sinks.make_state(d, dv);
  (void)sinks.segment(s, q, q, v);  // kept: 0, 1 (sinks), 7, 8
  Blob sink_blob = abc::select::save_state(sinks, s);
  const double wrong = -5.0;  // token 1 scores −1
  std::memcpy(&sink_blob[field(27, 1)], &wrong, 8);
  blob::reseal(sink_blob);
  auto dst = sinks.make_state(d, dv);
  REQUIRE_THROWS_WITH(abc::select::load_state(sinks, sink_blob, dst),
                      ABC_CONTAINS("the score of the token of age 1 is -5.000000, expected minus the token's position"));
  const abc::select::SnapKvAttention<double> snap(SnapKvConfig{3, 2, 3, abc::select::Pooling::average, 1});
  auto t = snap.make_state(d, dv);
  (void)snap.segment(t, q, q, v);
  Blob snap_blob = abc::select::save_state(snap, t);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  std::memcpy(&snap_blob[field(19, 0)], &nan, 8);
  blob::reseal(snap_blob);
  auto snap_dst = snap.make_state(d, dv);
  REQUIRE_THROWS_WITH(abc::select::load_state(snap, snap_blob, snap_dst),
                      ABC_CONTAINS("the score of the token of age 0 is nan, expected a number"));
  REQUIRE(snap_dst.size() == 0);
}

TEST_CASE("bad H2O cache blobs are refused by name and leave the destination untouched", "[h2o][state_io][errors]") {
  using T = double;
  const Index d = 4, dv = 3;
  const HeavyHitterAttention<T> attn(HeavyHitterConfig{2, 2});
  const abc::Matrix<T> q = ref::random<T>(9, d, 1), v = ref::random<T>(9, dv, 2);
  auto s = attn.make_state(d, dv);
  (void)attn.segment(s, q, q, v);  // 9 tokens: 4 kept, the newest two 7 and 8
  const Blob good = abc::select::save_state(attn, s);
  auto dst = attn.make_state(d, dv);
  (void)attn.segment(dst, q.topRows(2), q.topRows(2), v.topRows(2));
  const Blob before = abc::select::save_state(attn, dst);
  const auto refused = [&](const Blob& blob, const std::string& why) {
    INFO(why);
    REQUIRE_THROWS_AS(abc::select::load_state(attn, blob, dst), abc::config_error);
    REQUIRE_THROWS_WITH(abc::select::load_state(attn, blob, dst), ABC_CONTAINS("abc::select::load_state: " + why));
    REQUIRE(abc::select::save_state(attn, dst) == before);
  };
  const auto edited = [&](std::size_t at, std::uint64_t x) {
    Blob b = good;
    blob::put_u64(b, at, x);
    blob::reseal(b);
    return b;
  };
  // After the header (45 bytes with this tag): heavy, recent, d, dv, size, position; then tokens of
  // key, value, mass, position.
  const std::size_t header = 8 + 4 + 4 + 4 + 25, tokens = header + 48, token_bytes = (d + dv) * sizeof(T) + 16;
  const auto field = [&](std::size_t token, std::size_t offset) { return tokens + token * token_bytes + offset; };

  Blob flipped = good;
  flipped[good.size() / 2] ^= 0x20;
  refused(flipped, "checksum mismatch");
  const abc::select::TramsAttention<T> trams(abc::select::TramsConfig{4, 2, 2}, abc::select::KeyScore<T>::norm());
  refused(abc::select::save_state(trams, trams.make_state(d, dv)),
          "control kind is abc::select::TramsAttention, expected abc::select::HeavyHitters");
  const HeavyHitterAttention<T> split(HeavyHitterConfig{3, 1});
  refused(abc::select::save_state(split, split.make_state(d, dv)),
          "selected is 3 and recent 1, expected 2 and 2 (the attention's policy)");
  refused(edited(header + 24, 4), "widths are d = 4, dv = 4, expected d = 4, dv = 3 (the destination's)");
  refused(edited(header + 16, 70000), "widths are d = 70000, dv = 3, expected each in [1, 65536]");
  refused(edited(header + 32, 5), "size is 5, expected at most 4 (selected + recent)");
  refused(edited(header + 40, 3), "position is 3, expected in [4, 2^62)");
  refused(edited(header + 32, 3), "length is");
  Blob mass = good;
  const double negative = -0.5;
  std::memcpy(&mass[field(1, (d + dv) * sizeof(T))], &negative, 8);
  blob::reseal(mass);
  refused(mass, "the score of the token of age 1 is -0.500000, expected a mass in [0, position + 1]");
  // Positions out of order, at or past the stream's position, or a recent token not the newest.
  const std::size_t pos_at = (d + dv) * sizeof(T) + 8;
  Blob order = good;
  std::memcpy(&order[field(1, pos_at)], &order[field(0, pos_at)], 8);
  blob::reseal(order);
  refused(order, "the position of the token of age 1 is");
  refused(edited(field(3, pos_at), 9), "the position of the token of age 3 is 9, expected in");
  refused(edited(field(2, pos_at), 6), "the position of the token of age 2 is 6, expected 7 (the newest 2 kept tokens");
  Blob inf = good;
  const T infinity = std::numeric_limits<T>::infinity();
  std::memcpy(&inf[field(2, 0)], &infinity, sizeof(T));
  blob::reseal(inf);
  refused(inf, "the key or value of the token of age 2 is not finite");
  Blob short_header(good.begin(), good.begin() + long(header + 16));  // ends inside d
  short_header.resize(short_header.size() + 8);
  blob::reseal(short_header);
  refused(short_header, "truncated header");
}

TEST_CASE("select::save_state refuses a cache of another attention", "[h2o][state_io][errors]") {
  const HeavyHitterAttention<float> attn(HeavyHitterConfig{2, 2}), other(HeavyHitterConfig{3, 2});
  REQUIRE_THROWS_AS(abc::select::save_state(attn, other.make_state(3, 3)), abc::config_error);
  REQUIRE_THROWS_WITH(abc::select::save_state(attn, other.make_state(3, 3)),
                      ABC_CONTAINS("abc::select::save_state: state.capacity() is 5, expected 4 (selected + recent"));
  REQUIRE_THROWS_WITH(abc::select::save_state(attn, HeavyHitterAttention<float>::State{}),
                      ABC_CONTAINS("abc::select::save_state: state.capacity() is 0, expected 4"));
}

// A prompt grows a read's work space to its length; the cache then gives it back, so that what a
// cache holds between calls is O(budget), as after the same tokens fed one step at a time.
TEST_CASE("a prefill leaves a KV cache or a TRAMS pool holding what steps would", "[h2o][trams][memory]") {
  const Index N = 300, d = 8, dv = 4;
  const abc::Matrix<float> q = ref::random<float>(N, d, 1), k = ref::random<float>(N, d, 2), v = ref::random<float>(N, dv, 3);
  const auto compare_bytes = [&](const auto& attn) {
    auto prefilled = attn.make_state(d, dv), stepped = attn.make_state(d, dv);
    (void)attn.segment(prefilled, q.topRows(N - 1), k.topRows(N - 1), v.topRows(N - 1));
    for (Index t = 0; t < N - 1; ++t)
      (void)attn.step(stepped, q.row(t).transpose(), k.row(t).transpose(), v.row(t).transpose());
    (void)attn.step(prefilled, q.row(N - 1).transpose(), k.row(N - 1).transpose(), v.row(N - 1).transpose());
    (void)attn.step(stepped, q.row(N - 1).transpose(), k.row(N - 1).transpose(), v.row(N - 1).transpose());
    INFO("prefilled " << prefilled.bytes() << " bytes, stepped " << stepped.bytes());
    REQUIRE(prefilled.bytes() <= stepped.bytes() + 64 * sizeof(Index));  // a selection's index list may differ
  };
  compare_bytes(HeavyHitterAttention<float>(HeavyHitterConfig{6, 4}));
  compare_bytes(abc::select::SnapKvAttention<float>(SnapKvConfig{8, 4, 3, abc::select::Pooling::max, 2}));
  compare_bytes(abc::select::TramsAttention<float>(abc::select::TramsConfig{12, 3, 4}, abc::select::KeyScore<float>::norm()));
}

// An empty segment reads nothing and adds nothing: every policy's cache is left as it was (SnapKV
// once rescored every token from an empty observation window, to zero).
TEMPLATE_TEST_CASE("an empty segment leaves a KV cache as it was", "[h2o][sinks][snapkv]", float, double) {
  using T = TestType;
  const Index d = 4, dv = 3;
  const abc::Matrix<T> q = ref::random<T>(12, d, 1), v = ref::random<T>(12, dv, 2);
  const auto unchanged = [&](const auto& attn) {
    auto s = attn.make_state(d, dv);
    (void)attn.segment(s, q, q, v);
    const Blob before = abc::select::save_state(attn, s);
    const abc::Matrix<T> out = attn.segment(s, q.topRows(0), q.topRows(0), v.topRows(0));
    REQUIRE(out.rows() == 0);
    REQUIRE(abc::select::save_state(attn, s) == before);
  };
  unchanged(HeavyHitterAttention<T>(HeavyHitterConfig{3, 2}));
  unchanged(abc::select::SinkAttention<T>(SinkConfig{2, 3}));
  unchanged(abc::select::SnapKvAttention<T>(SnapKvConfig{4, 2, 3, abc::select::Pooling::average, 2}));
}

}  // namespace kv_cache_attention_test
