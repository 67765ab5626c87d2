// SPDX-License-Identifier: MIT
// abc tests: select::MultiHeadCache, the KV caches (H2O, sinks, SnapKV, TRAMS) over heads and
// sequences. Grouped query heads sharing one cache against the float64 reference (each head reads
// as one would; the policy scores from the group's mean probabilities) in every form, over a
// variable-length batch; one head per cache against the single-head operator bit for bit; a budget
// no smaller than the sequence against exact attention; errors that change nothing.
#include <abc/abc.hpp>
#include <abc/select/multi_head_cache.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "support/approx.hpp"
#include "support/catch.hpp"
#include "support/kv_cache_reference.hpp"
#include "support/reference.hpp"

namespace multi_head_cache_test {

namespace {

using abc::HeadTensor;
using abc::Index;
using abc::select::AttentionSinks;
using abc::select::HeavyHitterConfig;
using abc::select::HeavyHitters;
using abc::select::KvCacheAttention;
using abc::select::MultiHeadCache;
using abc::select::SinkConfig;
using abc::select::SnapKv;
using abc::select::SnapKvConfig;
using abc::select::TramsAttention;
using abc::select::TramsConfig;

// A packed [total, heads, dim] buffer of the given sequence lengths, random entries.
template <class T>
struct Packed {
  std::vector<Index> offsets{0};
  Index heads, dim;
  std::vector<T> data;
  Packed(const std::vector<Index>& lengths, Index h, Index d, std::uint64_t seed, double spread = 1.0)
      : heads(h), dim(d) {
    for (Index l : lengths) offsets.push_back(offsets.back() + l);
    const abc::Matrix<T> r = ref::random<T>(std::max<Index>(offsets.back(), 1), h * d, seed, spread);
    data.assign(r.data(), r.data() + offsets.back() * h * d);
  }
  Index length(Index b) const { return offsets[std::size_t(b) + 1] - offsets[std::size_t(b)]; }
  // Tokens [s0, s0 + count) of every sequence (clipped to its length), as a packed view.
  HeadTensor<const T> rows(const std::vector<Index>& s0, const std::vector<Index>& count, std::vector<T>& buf) const {
    std::vector<Index> off{0};
    buf.clear();
    for (std::size_t b = 0; b + 1 < offsets.size(); ++b) {
      const Index first = std::min(s0[b], length(Index(b))), n = std::min(count[b], length(Index(b)) - first);
      const T* at = data.data() + (offsets[b] + first) * heads * dim;
      buf.insert(buf.end(), at, at + n * heads * dim);
      off.push_back(off.back() + n);
    }
    return HeadTensor<const T>::packed(buf.data(), off, heads, dim);
  }
  HeadTensor<const T> all() const { return HeadTensor<const T>::packed(data.data(), offsets, heads, dim); }
  abc::Matrix<T> head(Index b, Index h) const { return all().head(b, h); }
};

ref::Mat head_rows(const abc::Matrix<double>& m, Index first, Index count) {
  return ref::from(abc::Matrix<double>(m.middleRows(first, count)));
}

// Streams a batch through a MultiHeadCache (no pool: one call; else the pool in calls of the
// cycled lengths) and checks every head against the float64 reference of its group's cache.
template <class Policy>
void check_grouped(const Policy& policy, const std::vector<Index>& schedule, bool pooled) {
  const Index H = 6, G = 2, g = H / G, d = 5, dv = 3;
  const std::vector<Index> lengths = {23, 1, 0, 17};
  const Index B = Index(lengths.size());
  const Packed<double> q(lengths, H, d, 3, 1.5), k(lengths, G, d, 4, 1.5), v(lengths, G, dv, 5);
  const MultiHeadCache<KvCacheAttention<Policy>> layer(KvCacheAttention<Policy>(policy), H, G);
  REQUIRE(layer.memories() == G);
  std::vector<std::vector<kvref::RefCache>> refs(static_cast<std::size_t>(B));
  for (auto& r : refs)
    for (Index m = 0; m < G; ++m) r.push_back(kvref::ref_cache(policy, d));
  typename MultiHeadCache<KvCacheAttention<Policy>>::Pool pool;
  std::vector<std::uint64_t> ids;
  for (Index b = 0; b < B; ++b) {
    ids.push_back(std::uint64_t(100 + 7 * b));
    layer.add(pool, ids.back(), d, dv);
  }
  std::vector<Index> at(std::size_t(B), 0);
  for (std::size_t c = 0;; ++c) {
    bool left = false;
    for (Index b = 0; b < B; ++b) left = left || at[std::size_t(b)] < lengths[std::size_t(b)];
    if (!left) break;
    std::vector<Index> count(std::size_t(B), pooled ? schedule[c % schedule.size()] : Index(1) << 20);
    std::vector<double> qb, kb, vb;
    const auto qs = q.rows(at, count, qb), ks = k.rows(at, count, kb), vs = v.rows(at, count, vb);
    std::vector<Index> off{0};
    for (Index b = 0; b < B; ++b) off.push_back(off.back() + qs.length(b));
    std::vector<double> ob(std::size_t(off.back() * H * dv), -7.0);
    const auto out = HeadTensor<double>::packed(ob.data(), off, H, dv);
    if (pooled)
      layer.forward_causal(pool, ids, qs, ks, vs, out);
    else
      layer.forward_causal(qs, ks, vs, out);
    for (Index b = 0; b < B; ++b) {
      const Index t = at[std::size_t(b)], n = qs.length(b);
      INFO("sequence " << b << ", tokens " << t << " .. " << t + n);
      if (n == 0) continue;
      for (Index m = 0; m < G; ++m) {
        std::vector<ref::Mat> group;
        for (Index i = 0; i < g; ++i) group.push_back(head_rows(q.head(b, m * g + i), t, n));
        const auto want = refs[std::size_t(b)][std::size_t(m)].segment_heads(group, head_rows(k.head(b, m), t, n),
                                                                               head_rows(v.head(b, m), t, n));
        for (Index i = 0; i < g; ++i) {
          INFO("query head " << m * g + i);
          ref::require_close(abc::Matrix<double>(out.head(b, m * g + i)), want[std::size_t(i)]);
        }
        if (pooled) {
          const auto& cache = pool.states(ids[std::size_t(b)])[std::size_t(m)];
          REQUIRE(kvref::kept_positions(cache) == kvref::kept_positions(refs[std::size_t(b)][std::size_t(m)]));
          for (Index a = 0; a < cache.size(); ++a) {
            const double want_score = refs[std::size_t(b)][std::size_t(m)].kept[std::size_t(a)].score;
            if (std::isinf(want_score))
              REQUIRE(cache.score(a) == want_score);
            else
              REQUIRE(std::abs(cache.score(a) - want_score) <= 1e-12 * (1 + std::abs(want_score)));
          }
        }
      }
      at[std::size_t(b)] += n;
    }
  }
}

}  // namespace

TEST_CASE("grouped query heads share a cache scored by their mean probabilities, as the float64 reference",
          "[multi_head_cache][h2o][sinks][snapkv]") {
  const std::vector<std::vector<Index>> schedules = {{1}, {7, 1}, {3, 1, 5, 2}};
  const HeavyHitters<double> h2o(HeavyHitterConfig{4, 3});
  const AttentionSinks<double> sinks(SinkConfig{2, 4});
  const SnapKv<double> snap(SnapKvConfig{5, 3, 3, abc::select::Pooling::average, 2});
  const SnapKv<double> snap_max(SnapKvConfig{4, 4, 5, abc::select::Pooling::max, 1});
  check_grouped(h2o, {}, false);
  check_grouped(sinks, {}, false);
  check_grouped(snap, {}, false);
  check_grouped(snap_max, {}, false);
  for (const auto& s : schedules) {
    INFO("calls of " << s[0] << (s.size() > 1 ? ", ..." : ""));
    check_grouped(h2o, s, true);
    check_grouped(sinks, s, true);
    check_grouped(snap, s, true);
    check_grouped(snap_max, s, true);
  }
}

namespace {

// Every head of a MultiHeadCache against the single-head operator of its memory, bit for bit: the
// layer's outputs and, with a pool, each cache's kept tokens and scores, over a prefill and steps.
template <class Attention>
void check_single_heads(const std::vector<Attention>& per_memory, Index H, Index G,
                        const std::vector<Index>& lengths = {13, 6, 9}, Index d = 4, Index dv = 3) {
  using T = typename Attention::scalar_type;
  const Index B = Index(lengths.size());
  const Packed<T> q(lengths, H, d, 11, 1.5), k(lengths, G, d, 12, 1.5), v(lengths, G, dv, 13);
  const MultiHeadCache<Attention> layer(per_memory, H, G);
  // One call from empty caches.
  std::vector<T> ob(std::size_t(q.offsets.back() * H * dv));
  const auto out = HeadTensor<T>::packed(ob.data(), q.offsets, H, dv);
  layer.forward_causal(q.all(), k.all(), v.all(), out);
  // A pool: a prompt of 4, then steps.
  typename MultiHeadCache<Attention>::Pool pool;
  const std::vector<std::uint64_t> ids = {5, 3, 9};
  for (std::uint64_t id : ids) layer.add(pool, id, d, dv);
  std::vector<T> pb(ob.size());
  const auto pooled = HeadTensor<T>::packed(pb.data(), q.offsets, H, dv);
  std::vector<Index> at(std::size_t(B), 0);
  for (Index c = 0; c < 10; ++c) {
    const std::vector<Index> count(std::size_t(B), c == 0 ? 4 : 1);
    std::vector<T> qb, kb, vb, o;
    const auto qs = q.rows(at, count, qb), ks = k.rows(at, count, kb), vs = v.rows(at, count, vb);
    std::vector<Index> off{0};
    for (Index b = 0; b < B; ++b) off.push_back(off.back() + qs.length(b));
    o.resize(std::size_t(off.back() * H * dv));
    const auto step_out = HeadTensor<T>::packed(o.data(), off, H, dv);
    layer.forward_causal(pool, ids, qs, ks, vs, step_out);
    for (Index b = 0; b < B; ++b)
      for (Index h = 0; h < H; ++h)
        pooled.rows(b, h, at[std::size_t(b)], qs.length(b)) = step_out.head(b, h);
    for (Index b = 0; b < B; ++b) at[std::size_t(b)] += qs.length(b);
  }
  for (Index b = 0; b < B; ++b) {
    for (Index h = 0; h < H; ++h) {
      INFO("sequence " << b << ", head " << h);
      const Attention& a = layer.memory(layer.memory_of(h));
      const abc::Matrix<T> qh = q.head(b, h), kh = k.head(b, layer.kv_head(h)), vh = v.head(b, layer.kv_head(h));
      auto s = a.make_state(d, dv);
      REQUIRE(abc::Matrix<T>(out.head(b, h)) == a.segment(s, qh, kh, vh));
      auto t = a.make_state(d, dv);
      const Index n = at[std::size_t(b)];
      abc::Matrix<T> want(n, dv);
      for (Index i = 0; i < n; i += (i == 0 ? 4 : 1)) {
        const Index len = i == 0 ? std::min<Index>(4, n) : 1;
        want.middleRows(i, len) = a.segment(t, qh.middleRows(i, len), kh.middleRows(i, len), vh.middleRows(i, len));
      }
      REQUIRE(abc::Matrix<T>(pooled.rows(b, h, 0, n)) == want);
      if (layer.memories() == H || h % (H / G) == 0) {  // the cache itself, once per memory
        const auto& cache = pool.states(ids[std::size_t(b)])[std::size_t(layer.memory_of(h))];
        REQUIRE(cache.size() == t.size());
        REQUIRE(cache.position() == t.position());
        for (Index a2 = 0; a2 < t.size(); ++a2) {
          REQUIRE(cache.token_position(a2) == t.token_position(a2));
          REQUIRE(cache.score(a2) == t.score(a2));
          REQUIRE(cache.key(a2) == t.key(a2));
        }
      }
    }
  }
}

}  // namespace

TEMPLATE_TEST_CASE("a cache of one head, or of each query head, is the single-head operator's bit for bit",
                   "[multi_head_cache][h2o][snapkv][trams]", float, double) {
  using T = TestType;
  using H2o = KvCacheAttention<HeavyHitters<T>>;
  using Snap = KvCacheAttention<SnapKv<T>>;
  using Trams = TramsAttention<T>;
  // One cache per key/value head, one query head each.
  check_single_heads(std::vector<H2o>(3, H2o(HeavyHitterConfig{3, 2})), 3, 3);
  check_single_heads(std::vector<Snap>(2, Snap(SnapKvConfig{3, 2, 3, abc::select::Pooling::average, 2})), 2, 2);
  // One cache per query head, each its own budget, under GQA (4 query heads over 2 key/value heads).
  check_single_heads(std::vector<H2o>{H2o(HeavyHitterConfig{3, 2}), H2o(HeavyHitterConfig{1, 1}),
                                      H2o(HeavyHitterConfig{0, 4}), H2o(HeavyHitterConfig{6, 0})},
                     4, 2);
  // TRAMS ranks keys, not reads: under GQA every query head of a group reads as a single head does.
  const Trams trams(TramsConfig{6, 2, 2}, abc::select::KeyScore<T>::norm());
  check_single_heads(std::vector<Trams>{trams}, 1, 1);
  check_single_heads(std::vector<Trams>(2, trams), 6, 2);
}

// Long enough that Eigen, in a program built with OpenMP, would split a product of the read over
// threads by itself when called outside a parallel region (and not inside the layer's), with other
// blocking and so other last bits: the read's products are the library's own, on the calling thread.
TEMPLATE_TEST_CASE("long segments: a cache of one head is the single-head operator's bit for bit on any thread",
                   "[multi_head_cache][h2o][trams][threads]", float, double) {
  using T = TestType;
  using H2o = KvCacheAttention<HeavyHitters<T>>;
  const std::vector<Index> lengths = {1000, 41, 0};
  check_single_heads(std::vector<H2o>(2, H2o(HeavyHitterConfig{40, 24})), 2, 2, lengths, 32, 24);
  const TramsAttention<T> trams(TramsConfig{96, 32, 40}, abc::select::KeyScore<T>::norm());
  check_single_heads(std::vector<TramsAttention<T>>(2, trams), 4, 2, lengths, 32, 24);
}

TEST_CASE("with a budget no smaller than the sequence, every cache is exact causal attention",
          "[multi_head_cache][h2o][sinks][snapkv][trams]") {
  const Index H = 4, G = 2, N = 29, d = 6, dv = 5;
  const std::vector<Index> lengths = {N, 11};
  const Packed<double> q(lengths, H, d, 21, 2.0), k(lengths, G, d, 22, 2.0), v(lengths, G, dv, 23);
  const auto run = [&](const auto& layer) {
    std::vector<double> ob(std::size_t(q.offsets.back() * H * dv));
    layer.forward_causal(q.all(), k.all(), v.all(), HeadTensor<double>::packed(ob.data(), q.offsets, H, dv));
    return ob;
  };
  // The decode loop: a pool stepped one token at a time (sequence 1 ends early).
  const auto decode = [&](const auto& layer) {
    typename std::decay_t<decltype(layer)>::Pool pool;
    layer.add(pool, 0, d, dv);
    layer.add(pool, 1, d, dv);
    std::vector<double> ob(std::size_t(q.offsets.back() * H * dv));
    const auto all = HeadTensor<double>::packed(ob.data(), q.offsets, H, dv);
    for (Index t = 0; t < N; ++t) {
      const std::vector<Index> at{t, t}, one{1, 1};
      std::vector<double> qb, kb, vb;
      const auto qs = q.rows(at, one, qb), ks = k.rows(at, one, kb), vs = v.rows(at, one, vb);
      const Index live = t < lengths[1] ? 2 : 1;
      std::vector<double> o(std::size_t(live * H * dv));
      std::vector<Index> off{0, 1};
      if (live == 2) off.push_back(2);
      const auto step_out = HeadTensor<double>::packed(o.data(), off, H, dv);
      const std::vector<std::uint64_t> ids = live == 2 ? std::vector<std::uint64_t>{0, 1} : std::vector<std::uint64_t>{0};
      const auto slice = [&](const HeadTensor<const double>& x) {
        return HeadTensor<const double>::strided(x.head(0, 0).data(), live, 1, x.heads(), x.dim(), x.heads() * x.dim(),
                                                 x.heads() * x.dim(), x.dim());
      };
      layer.forward_causal(pool, ids, slice(qs), slice(ks), slice(vs), step_out);
      for (Index b = 0; b < live; ++b)
        for (Index h = 0; h < H; ++h) all.rows(b, h, t, 1) = step_out.head(b, h);
    }
    return ob;
  };
  using H2o = KvCacheAttention<HeavyHitters<double>>;
  using Sinks = KvCacheAttention<AttentionSinks<double>>;
  using Snap = KvCacheAttention<SnapKv<double>>;
  using Trams = TramsAttention<double>;
  const MultiHeadCache<H2o> h2o_layer(H2o(HeavyHitterConfig{N - 5, 5}), H, G);
  const MultiHeadCache<Sinks> sinks_layer(Sinks(SinkConfig{1, N}), H, G);
  const MultiHeadCache<Snap> snap_layer(Snap(SnapKvConfig{N, 4, 3, abc::select::Pooling::max, 0}), H, G);
  const MultiHeadCache<Trams> trams_layer(Trams(TramsConfig{N, N, 0}, abc::select::KeyScore<double>::norm()), H, G);
  // Every policy and TRAMS keep everything and read it alike: the same bits, prefill or decode.
  const auto prefill = run(h2o_layer), steps = decode(h2o_layer);
  REQUIRE(run(sinks_layer) == prefill);
  REQUIRE(run(snap_layer) == prefill);
  REQUIRE(run(trams_layer) == prefill);
  REQUIRE(decode(sinks_layer) == steps);
  REQUIRE(decode(snap_layer) == steps);
  REQUIRE(decode(trams_layer) == steps);
  // And that is exact attention: the float64 reference, and the library's exact softmax.
  const abc::SoftmaxAttention<double> exact;
  for (const auto* result : {&prefill, &steps}) {
    const auto out = HeadTensor<const double>::packed(result->data(), q.offsets, H, dv);
    for (Index b = 0; b < 2; ++b)
      for (Index h = 0; h < H; ++h) {
        INFO((result == &prefill ? "prefill" : "decode") << ", sequence " << b << ", head " << h);
        const abc::Matrix<double> got = out.head(b, h), qh = q.head(b, h), kh = k.head(b, h / 2), vh = v.head(b, h / 2);
        ref::require_close(got, ref::attention(ref::from(qh), ref::from(kh), ref::from(vh), 1 / std::sqrt(double(d)), true));
        ref::require_same(got, exact.forward_causal(qh, kh, vh));
      }
  }
}

TEST_CASE("MultiHeadCache errors name the argument and change nothing", "[multi_head_cache][errors]") {
  using Attn = KvCacheAttention<HeavyHitters<float>>;
  using Layer = MultiHeadCache<Attn>;
  const Attn attn(HeavyHitterConfig{2, 2});
  REQUIRE_THROWS_WITH(Layer(attn, 0, 1),
                      ABC_CONTAINS("abc::select::MultiHeadCache: heads is 0, expected at least 1 (at least one head)"));
  REQUIRE_THROWS_WITH(Layer(attn, 4, 0), ABC_CONTAINS("abc::select::MultiHeadCache: kv_heads is 0, expected at least 1 "
                                                      "(at least one key/value head)"));
  REQUIRE_THROWS_WITH(Layer(attn, 6, 4), ABC_CONTAINS("abc::select::MultiHeadCache: heads % kv_heads is 2, expected 0"));
  REQUIRE_THROWS_WITH(Layer(std::vector<Attn>(3, attn), 4, 2),
                      ABC_CONTAINS("attentions.size() is 3, expected 2 (one per key/value head) or 4 (one per query head)"));
  const Layer layer(attn, 4, 2);
  const Index d = 3, dv = 2;
  const std::vector<Index> lengths = {5, 3};
  const Packed<float> q(lengths, 4, d, 1), k(lengths, 2, d, 2), v(lengths, 2, dv, 3);
  Layer::Pool pool;
  layer.add(pool, 1, d, dv);
  layer.add(pool, 2, d, dv);
  REQUIRE_THROWS_WITH(layer.add(pool, 2, d, dv), ABC_CONTAINS("abc::select::MultiHeadCache::add: sequence id 2 is already in the pool"));
  REQUIRE_THROWS_WITH(layer.add(pool, 3, 0, dv), ABC_CONTAINS("abc::select::MultiHeadCache::add: d is 0, expected at least 1"));
  // Per-head attentions are each checked: here only the second turns rotary keys wider than d.
  const Layer mixed(std::vector<Attn>{attn, Attn(HeavyHitterConfig{2, 2}, 0.0, abc::select::Rope<float>(4))}, 4, 2);
  Layer::Pool other;
  REQUIRE_THROWS_WITH(mixed.add(other, 5, d, dv),
                      ABC_CONTAINS("abc::select::MultiHeadCache::add: d is 3, expected at least 4 (the rope's dims()"));
  REQUIRE(other.size() == 0);
  std::vector<float> ob(std::size_t(8 * 4 * dv));
  const auto out = HeadTensor<float>::packed(ob.data(), q.offsets, 4, dv);
  layer.forward_causal(pool, {1, 2}, q.all(), k.all(), v.all(), out);
  const std::size_t bytes = pool.bytes();
  const auto kept = kvref::kept_positions(pool.states(1)[1]);
  std::vector<float> bad = q.data;
  bad[std::size_t((5 * 4 + 1) * d + 1)] = std::numeric_limits<float>::infinity();  // sequence 1, token 0, head 1
  const auto bad_q = HeadTensor<const float>::packed(bad.data(), q.offsets, 4, d);
  const std::vector<float> before = ob;
  const auto refused = [&](auto&& call, const std::string& why) {
    INFO(why);
    REQUIRE_THROWS_WITH(call(), ABC_CONTAINS(why));
    REQUIRE(ob == before);
    REQUIRE(pool.bytes() == bytes);
    REQUIRE(pool.states(1)[0].position() == 5);
    REQUIRE(pool.states(2)[1].position() == 3);
    REQUIRE(kvref::kept_positions(pool.states(1)[1]) == kept);
  };
  const std::string where = "abc::select::MultiHeadCache::forward_causal: ";
  refused([&] { layer.forward_causal(pool, {1, 1}, q.all(), k.all(), v.all(), out); },
          where + "ids holds sequence id 1 twice, expected distinct ids");
  refused([&] { layer.forward_causal(pool, {1, 4}, q.all(), k.all(), v.all(), out); },
          where + "sequence id 4 is not in the pool (add it first)");
  refused([&] { layer.forward_causal(pool, {1}, q.all(), k.all(), v.all(), out); },
          where + "ids.size() is 1, expected 2 (one id per sequence)");
  refused([&] { layer.forward_causal(pool, {1, 2}, k.all(), k.all(), v.all(), out); },
          where + "q.heads() is 2, expected 4 (one per query head)");
  // Every tensor's head count and sequence count against the layer's and the queries'.
  const Packed<float> v4(lengths, 4, dv, 5), k_one({5}, 2, d, 6), v_one({5}, 2, dv, 7);
  std::vector<float> ob2(ob.size());
  const auto out_2h = HeadTensor<float>::packed(ob2.data(), q.offsets, 2, dv);
  const auto out_one = HeadTensor<float>::packed(ob2.data(), std::vector<Index>{0, 5}, 4, dv);
  refused([&] { layer.forward_causal(pool, {1, 2}, q.all(), k.all(), v.all(), out_2h); },
          where + "out.heads() is 2, expected 4 (one per query head)");
  refused([&] { layer.forward_causal(pool, {1, 2}, q.all(), q.all(), v.all(), out); },
          where + "k.heads() is 4, expected 2 (one per key/value head)");
  refused([&] { layer.forward_causal(pool, {1, 2}, q.all(), k.all(), v4.all(), out); },
          where + "v.heads() is 4, expected 2 (one per key/value head)");
  refused([&] { layer.forward_causal(pool, {1, 2}, q.all(), k_one.all(), v.all(), out); },
          where + "k.batch() is 1, expected 2 (one key sequence per query sequence)");
  refused([&] { layer.forward_causal(pool, {1, 2}, q.all(), k.all(), v_one.all(), out); },
          where + "v.batch() is 1, expected 2 (one value sequence per query sequence)");
  refused([&] { layer.forward_causal(pool, {1, 2}, q.all(), k.all(), v.all(), out_one); },
          where + "out.batch() is 1, expected 2 (one output sequence per query sequence)");
  // A head's own checks (the cache's, for that head's rows): a non-finite key, an output of
  // another width.
  std::vector<float> bad_keys = k.data;
  bad_keys[std::size_t((1 * 2 + 0) * d + 2)] = std::numeric_limits<float>::quiet_NaN();  // sequence 0, token 1, head 0
  refused([&] { layer.forward_causal(pool, {1, 2}, q.all(), HeadTensor<const float>::packed(bad_keys.data(), k.offsets, 2, d),
                                     v.all(), out); },
          where + "k holds a non-finite value at row 1, column 2, expected finite values");
  const auto out_narrow = HeadTensor<float>::packed(ob2.data(), q.offsets, 4, dv - 1);
  refused([&] { layer.forward_causal(pool, {1, 2}, q.all(), k.all(), v.all(), out_narrow); },
          where + "out is [5 x 1], expected [5 x 2] (the output buffer holds one row per query)");
  // The second query head of a group is checked as the first is, before any sequence runs.
  refused([&] { layer.forward_causal(pool, {1, 2}, bad_q, k.all(), v.all(), out); },
          where + "q holds a non-finite value at row 0, column 1");
  refused([&] { layer.forward_causal(bad_q, k.all(), v.all(), out); }, where + "q holds a non-finite value");
  const Packed<float> short_out({5, 2}, 4, dv, 9);
  std::vector<float> sb(short_out.data);
  refused([&] { layer.forward_causal(pool, {1, 2}, q.all(), k.all(), v.all(),
                                     HeadTensor<float>::packed(sb.data(), short_out.offsets, 4, dv)); },
          where + "out.length(1) is 2, expected 3 (one output row per query)");
  REQUIRE(layer.validate(pool, {1, 2}, bad_q, k.all(), v.all(), out) == abc::Status::non_finite);
  REQUIRE(layer.validate_causal(q.all(), k.all(), v.all(), out) == abc::Status::ok);
  // A pool of another layer (caches per query head) is refused by its count.
  const Layer per_head(std::vector<Attn>(4, attn), 4, 2);
  refused([&] { per_head.forward_causal(pool, {1, 2}, q.all(), k.all(), v.all(), out); },
          where + "pool sequence 1 holds 2 states, expected 4 (the pool was filled by another MultiHeadCache)");
  REQUIRE_THROWS_WITH(pool.states(8), ABC_CONTAINS("abc::select::MultiHeadCache::Pool: sequence id 8 is not in the pool"));
}

}  // namespace multi_head_cache_test
