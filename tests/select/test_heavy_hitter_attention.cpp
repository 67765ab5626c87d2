// SPDX-License-Identifier: MIT
// abc tests: select::HeavyHitterAttention (H2O, docs/operators/h2o.md) against a float64 reference
// written with plain loops from its rules: read every kept token and the segment causally, add each
// query's probabilities to the masses of what it read, keep the `recent` newest and the `heavy`
// largest masses among the rest (of equal masses the newer). Every form (prefill, decode loop,
// mixed segments), odd sizes, the tie and recency rules by construction, errors, and state blobs.
#include <abc/abc.hpp>
#include <abc/select/heavy_hitter_attention.hpp>
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
#include "support/reference.hpp"

namespace {

using abc::Index;
using abc::select::HeavyHitterAttention;
using abc::select::HeavyHitterConfig;
using Blob = std::vector<std::uint8_t>;

struct RefToken {
  std::int64_t pos;
  std::vector<double> k, v;
  double mass;
};

// The reference cache. follow(): before a segment, keep exactly the tokens at the given positions
// (a float cache's own decisions, whose near-tied masses may rank differently from float64's).
struct RefH2O {
  size_t heavy, recent;
  double scale;
  std::vector<RefToken> kept;
  std::int64_t next = 0;
  std::map<std::int64_t, RefToken> seen;  // every token by position, with its mass while kept

  ref::Mat segment(const ref::Mat& q, const ref::Mat& k, const ref::Mat& v) {
    const size_t m = kept.size(), n = q.size();
    std::vector<RefToken> all = kept;
    for (size_t i = 0; i < n; ++i) all.push_back({next + std::int64_t(i), k[i], v[i], 0.0});
    ref::Mat out;
    for (size_t i = 0; i < n; ++i) {
      const size_t readable = m + i + 1;
      std::vector<double> logit(readable);
      double mx = -std::numeric_limits<double>::infinity();
      for (size_t j = 0; j < readable; ++j) {
        logit[j] = scale * ref::dot(q[i], all[j].k);
        mx = std::max(mx, logit[j]);
      }
      double sum = 0;
      for (size_t j = 0; j < readable; ++j) sum += std::exp(logit[j] - mx);
      std::vector<double> o(v[0].size(), 0.0);
      for (size_t j = 0; j < readable; ++j) {
        const double p = std::exp(logit[j] - mx) / sum;
        all[j].mass += p;
        for (size_t c = 0; c < o.size(); ++c) o[c] += p * all[j].v[c];
      }
      out.push_back(o);
    }
    next += std::int64_t(n);
    for (const RefToken& t : all) seen[t.pos] = t;  // every mass as it stands, the evicted' included
    const size_t budget = heavy + recent;
    if (all.size() > budget) {
      const size_t older = all.size() - std::min(recent, all.size()), drop = all.size() - budget;
      std::vector<size_t> order(older);
      for (size_t i = 0; i < older; ++i) order[i] = i;
      std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
        return all[a].mass != all[b].mass ? all[a].mass < all[b].mass : all[a].pos < all[b].pos;
      });
      std::vector<bool> keep(all.size(), true);
      for (size_t i = 0; i < drop; ++i) keep[order[i]] = false;
      std::vector<RefToken> survivors;
      for (size_t i = 0; i < all.size(); ++i)
        if (keep[i]) survivors.push_back(all[i]);
      all = survivors;
    }
    kept = all;
    return out;
  }

  void follow(const std::vector<std::int64_t>& positions) {
    kept.clear();
    for (std::int64_t p : positions) kept.push_back(seen.at(p));
  }
};

template <class T>
std::vector<std::int64_t> kept_positions(const typename HeavyHitterAttention<T>::State& s) {
  std::vector<std::int64_t> p;
  for (Index a = 0; a < s.size(); ++a) p.push_back(s.token_position(a));
  return p;
}

std::vector<std::int64_t> kept_positions(const RefH2O& r) {
  std::vector<std::int64_t> p;
  for (const RefToken& t : r.kept) p.push_back(t.pos);
  return p;
}

ref::Mat rows_of(const ref::Mat& m, size_t first, size_t count) {
  return ref::Mat(m.begin() + long(first), m.begin() + long(first + count));
}

// The stream in calls of the given lengths (cycled); a length of 1 is a step.
template <class T>
void check_stream(const HeavyHitterConfig& cfg, const std::vector<Index>& lengths, Index N, Index d, Index dv,
                  std::uint64_t seed) {
  const HeavyHitterAttention<T> attn(cfg);
  // Keys of unequal norms, so that attention is far from uniform and masses separate.
  const abc::Matrix<T> q = ref::random<T>(N, d, seed, 1.5), k = ref::random<T>(N, d, seed + 1, 1.5),
                       v = ref::random<T>(N, dv, seed + 2);
  const ref::Mat qd = ref::from(q), kd = ref::from(k), vd = ref::from(v);
  RefH2O r{size_t(cfg.heavy), size_t(cfg.recent), 1.0 / std::sqrt(double(d)), {}, 0, {}};
  auto s = attn.make_state(d, dv);
  Index t = 0;
  for (size_t c = 0; t < N; ++c) {
    const Index len = std::min(lengths[c % lengths.size()], N - t);
    INFO("tokens " << t << " .. " << t + len);
    const bool exact = std::is_same<T, double>::value;
    // A float cache's masses may order near-ties differently from float64's: the reference then
    // reads the cache's own kept set, and the cache's cut is checked against the rule up to them.
    if (!exact) r.follow(kept_positions<T>(s));
    abc::Matrix<T> got(len, dv);
    if (len == 1)
      got.row(0) = attn.step(s, q.row(t).transpose(), k.row(t).transpose(), v.row(t).transpose()).transpose();
    else
      got = attn.segment(s, q.middleRows(t, len), k.middleRows(t, len), v.middleRows(t, len));
    const ref::Mat want = r.segment(rows_of(qd, size_t(t), size_t(len)), rows_of(kd, size_t(t), size_t(len)),
                                    rows_of(vd, size_t(t), size_t(len)));
    ref::require_close(got, want);
    REQUIRE(s.position() == t + len);
    REQUIRE(s.size() == std::min<Index>(t + len, cfg.heavy + cfg.recent));
    const std::vector<std::int64_t> mine = kept_positions<T>(s), theirs = kept_positions(r);
    if (exact) {
      REQUIRE(mine == theirs);
    } else {
      for (std::int64_t a : mine)
        for (std::int64_t b : theirs)
          if (std::find(theirs.begin(), theirs.end(), a) == theirs.end() &&
              std::find(mine.begin(), mine.end(), b) == mine.end()) {
            const double ma = r.seen.at(a).mass, mb = r.seen.at(b).mass;
            INFO("kept " << a << " (mass " << ma << ") where the reference kept " << b << " (mass " << mb << ")");
            REQUIRE(std::abs(ma - mb) <= 1e-4 * (1 + std::max(ma, mb)));
          }
    }
    for (Index a = 0; a < s.size(); ++a) {
      const double want_mass = r.seen.at(s.token_position(a)).mass;
      REQUIRE(std::abs(s.mass(a) - want_mass) <= (std::is_same<T, double>::value ? 1e-12 : 1e-4) * (1 + want_mass));
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
      check_stream<T>(cfg, lengths, 37, 5, 3, 7);
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
  REQUIRE(kept_positions<T>(prefill) == kept_positions<T>(loop));
  for (Index a = 0; a < N; ++a) REQUIRE(std::abs(prefill.mass(a) - loop.mass(a)) <= 1e-5 * (1 + loop.mass(a)));
}

// One-wide keys and queries of 1: a key of 0 gets attention, a key of −1e4 gets exactly none.
template <class T>
std::vector<std::int64_t> run_keys(const HeavyHitterConfig& cfg, const std::vector<T>& keys) {
  const HeavyHitterAttention<T> attn(cfg);
  auto s = attn.make_state(1, 1);
  const abc::Vector<T> one = abc::Vector<T>::Ones(1);
  for (T key : keys) (void)attn.step(s, one, abc::Vector<T>::Constant(1, key), one);
  return kept_positions<T>(s);
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
  REQUIRE(kept_positions<T>(s) == std::vector<std::int64_t>{1, 3});
}

TEST_CASE("H2O errors name the argument, and a failed call changes nothing", "[h2o][errors]") {
  using Attn = HeavyHitterAttention<float>;
  REQUIRE_THROWS_WITH(Attn(HeavyHitterConfig{-1, 2}),
                      ABC_CONTAINS("abc::select::HeavyHitterAttention: config.heavy is -1, expected at least 0"));
  REQUIRE_THROWS_WITH(Attn(HeavyHitterConfig{2, -3}),
                      ABC_CONTAINS("abc::select::HeavyHitterAttention: config.recent is -3, expected at least 0"));
  REQUIRE_THROWS_WITH(Attn(HeavyHitterConfig{0, 0}),
                      ABC_CONTAINS("config.heavy + config.recent is 0, expected at least 1"));
  REQUIRE_THROWS_WITH(Attn(HeavyHitterConfig{2, 2, -1.0}), ABC_CONTAINS("config.scale"));
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
                      ABC_CONTAINS("abc::select::HeavyHitterAttention: q is [6 x 3], expected [6 x 4]"));
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

TEMPLATE_TEST_CASE("an H2O cache round-trips bit-exactly and continues as the saved one", "[h2o][state_io]", float,
                   double) {
  using T = TestType;
  const Index d = 5, dv = 3;
  const HeavyHitterAttention<T> attn(HeavyHitterConfig{3, 2});
  const abc::Matrix<T> q = ref::random<T>(30, d, 4, 1.5), k = ref::random<T>(30, d, 5, 1.5), v = ref::random<T>(30, dv, 6);
  for (Index prefix : {0, 3, 5, 12}) {  // empty, filling, full, evicting
    INFO("prefix " << prefix);
    auto s = attn.make_state(d, dv);
    if (prefix > 0) (void)attn.segment(s, q.topRows(prefix), k.topRows(prefix), v.topRows(prefix));
    const Blob blob = abc::select::save_state(attn, s);
    REQUIRE(blob.size() == 8 + 4 + 4 + 4 + 33 + 6 * 8 + std::size_t(s.size()) * ((d + dv) * sizeof(T) + 16) + 8);
    typename HeavyHitterAttention<T>::State loaded;
    abc::select::load_state(attn, blob, loaded);
    REQUIRE(abc::select::save_state(attn, loaded) == blob);
    for (Index t = prefix; t < prefix + 10; ++t)
      REQUIRE(attn.step(loaded, q.row(t).transpose(), k.row(t).transpose(), v.row(t).transpose()) ==
              attn.step(s, q.row(t).transpose(), k.row(t).transpose(), v.row(t).transpose()));
    REQUIRE(abc::select::save_state(attn, loaded) == abc::select::save_state(attn, s));
  }
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
  // After the header (53 bytes with this tag): heavy, recent, d, dv, size, position; then tokens of
  // key, value, mass, position.
  const std::size_t header = 8 + 4 + 4 + 4 + 33, tokens = header + 48, token_bytes = (d + dv) * sizeof(T) + 16;
  const auto field = [&](std::size_t token, std::size_t offset) { return tokens + token * token_bytes + offset; };

  Blob flipped = good;
  flipped[good.size() / 2] ^= 0x20;
  refused(flipped, "checksum mismatch");
  const abc::select::TramsAttention<T> trams(abc::select::TramsConfig{4, 2, 2}, abc::select::KeyScore<T>::norm());
  refused(abc::select::save_state(trams, trams.make_state(d, dv)),
          "control kind is abc::select::TramsAttention, expected abc::select::HeavyHitterAttention");
  const HeavyHitterAttention<T> split(HeavyHitterConfig{3, 1});
  refused(abc::select::save_state(split, split.make_state(d, dv)),
          "heavy is 3 and recent 1, expected 2 and 2 (the attention's config)");
  refused(edited(header + 24, 4), "widths are d = 4, dv = 4, expected d = 4, dv = 3 (the destination's)");
  refused(edited(header + 16, 70000), "widths are d = 70000, dv = 3, expected each in [1, 65536]");
  refused(edited(header + 32, 5), "size is 5, expected at most 4 (heavy + recent)");
  refused(edited(header + 40, 3), "position is 3, expected in [4, 2^62)");
  refused(edited(header + 32, 3), "length is");
  Blob mass = good;
  const double negative = -0.5;
  std::memcpy(&mass[field(1, (d + dv) * sizeof(T))], &negative, 8);
  blob::reseal(mass);
  refused(mass, "the mass of the token of age 1 is -0.5");
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
}
