// SPDX-License-Identifier: MIT
// abc fuzz: MultiHeadAttention, its decode Pool and HeadTensor with fuzz-chosen layouts (bshd, bhsd,
// packed; lengths and offsets that may be negative or inconsistent), head counts (GQA), shared or
// per-memory controls (per key/value head: its query heads share one memory; or per query head), a
// control input (none, shared, per memory), and a sequence of pool operations (add empty or from
// states, as another sequence left them or wrongly counted or shaped; continue by one
// or many tokens with ids that may repeat or be unknown, reset, drop, cross memories built and
// read; float sequences held in bfloat16 or in float), and the same for select::MultiHeadCache (H2O, sinks, SnapKV and TRAMS caches, grouped or
// per query head). Built twice: fuzz_pool, and fuzz_pool_omp with
// ABC_WITH_OPENMP (the pairs on threads). Invariants (trap on violation, besides any sanitizer
// report):
//  - only abc::shape_error / abc::config_error escape any call (never from a parallel region);
//  - validate() returns Status::ok exactly when the matching call does not throw;
//  - a call that throws leaves every pool state and the output buffer bit-identical;
//  - a successful call equals the same per-head BoundedAttention calls (step or forward_causal,
//    forward) bit for bit, a zero's sign aside; the states they leave, bit for bit (with a shared
//    control input, projected once for all memories: finite outputs for finite inputs).
#include <abc/abc.hpp>
#include <abc/multi_head_attention.hpp>
#include <abc/select/multi_head_cache.hpp>

#include "fuzz.hpp"

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <algorithm>
#include <cstring>
#include <map>
#include <optional>
#include <type_traits>
#include <vector>

namespace {

using abc::Index;
using abc_fuzz::Reader;
using abc_fuzz::throws;

// Two matrices of one storage order (a State's K̃ is column-major, the rest row-major).
template <class T, int Order>
bool same_bits(const Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Order>& a,
               const Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Order>& b) {
  return a.rows() == b.rows() && a.cols() == b.cols() &&
         (a.size() == 0 || std::memcmp(a.data(), b.data(), sizeof(T) * std::size_t(a.size())) == 0);
}

// Outputs of two paths: bit-identical, except that a zero may carry either sign (a sum that
// starts from +0 and one that starts from its first product differ there, and only there; which
// one runs depends on Eigen's product path for the destination).
template <class T>
bool same_values(const abc::Matrix<T>& a, const abc::Matrix<T>& b) {
  if (a.rows() != b.rows() || a.cols() != b.cols()) return false;
  for (Index i = 0; i < a.size(); ++i) {
    const T x = a.data()[i], y = b.data()[i];
    if (std::memcmp(&x, &y, sizeof(T)) != 0 && !(x == T(0) && y == T(0))) return false;
  }
  return true;
}

template <class T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {  // NaN-safe: bit patterns
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), sizeof(T) * a.size()) == 0);
}

using abc_fuzz::same_bits;  // a state, bit for bit

// A fuzz-shaped buffer and the view of it a call gets (the view may be refused by HeadTensor).
template <class T>
struct Tensor {
  std::vector<T> data;
  std::optional<abc::HeadTensor<const T>> in;
  std::optional<abc::HeadTensor<T>> out;
};

// Layout, batch, lengths: bshd / bhsd with optional lengths, or packed offsets; sizes small and
// mostly consistent, sometimes negative or inconsistent, and now and then a sequence long enough
// (32 tokens and more) for a call to run it on contiguous copies of its heads, or, for
// MultiHeadAttention (`very_long`), one long enough for its finite checks to go by blocks of rows.
// Not for the caches: their read is quadratic in a segment's length, and a 3000-token segment
// checked against the single-head call takes minutes under the fuzzer's instrumentation.
struct Layout {
  int kind = 0;  // 0 bshd, 1 bhsd, 2 packed
  Index batch = 0, seq = 0;
  std::vector<Index> lengths, offsets;
};

Layout draw_layout(Reader& in, Index batch, bool very_long = false) {
  Layout l;
  l.kind = in.byte() % 3;
  l.batch = batch;
  l.seq = in.index(0, 6) - (in.byte() == 255 ? 8 : 0);
  const std::uint8_t longer = in.byte();
  if (longer == 253) l.seq += 34;
  if (longer == 252 && very_long) l.seq += 2900;  // finite checks by blocks of rows, on threads
  if (l.kind == 2) {
    l.offsets.push_back(in.byte() == 255 ? 1 : 0);
    for (Index b = 0; b < batch; ++b)
      l.offsets.push_back(l.offsets.back() + in.index(0, 5) - (in.byte() == 254 ? 7 : 0) + (in.byte() == 253 ? 34 : 0));
  } else if (in.byte() & 1) {
    for (Index b = 0; b < batch; ++b) l.lengths.push_back(in.index(-1, 6));
  }
  return l;
}

template <class T>
Tensor<T> make_tensor(Reader& in, const Layout& l, Index heads, Index dim) {
  Tensor<T> t;
  Index rows = l.kind == 2 ? (l.offsets.empty() ? 0 : std::max<Index>(l.offsets.back(), 0)) : std::max<Index>(l.batch, 0) * std::max<Index>(l.seq, 0);
  const Index n = rows * std::max<Index>(heads, 0) * std::max<Index>(dim, 0);
  t.data.resize(std::size_t(std::min<Index>(n, 1 << 16)));
  if (Index(t.data.size()) != n) return t;  // absurd: never viewed
  for (auto& e : t.data) e = in.value<T>();
  const bool ok = !throws([&] {
    switch (l.kind) {
      case 0:
        t.in.emplace(abc::HeadTensor<const T>::bshd(t.data.data(), l.batch, l.seq, heads, dim, l.lengths));
        t.out.emplace(abc::HeadTensor<T>::bshd(t.data.data(), l.batch, l.seq, heads, dim, l.lengths));
        break;
      case 1:
        t.in.emplace(abc::HeadTensor<const T>::bhsd(t.data.data(), l.batch, heads, l.seq, dim, l.lengths));
        t.out.emplace(abc::HeadTensor<T>::bhsd(t.data.data(), l.batch, heads, l.seq, dim, l.lengths));
        break;
      default:
        t.in.emplace(abc::HeadTensor<const T>::packed(t.data.data(), l.offsets, heads, dim));
        t.out.emplace(abc::HeadTensor<T>::packed(t.data.data(), l.offsets, heads, dim));
    }
  });
  if (!ok) {
    t.in.reset();
    t.out.reset();
  }
  return t;
}

// The single-head reference of memory m for sequence b: its control input (x's head m, the
// shared x, or none).
template <class A, class T>
abc::Matrix<T> want_forward(const A& a, bool causal, const abc::HeadTensor<const T>& q, Index h,
                            const abc::HeadTensor<const T>& k, const abc::HeadTensor<const T>& v, Index g,
                            const std::optional<abc::HeadTensor<const T>>& x, Index xm, Index b) {
  if (x)
    return causal ? a.forward_causal(q.head(b, h), k.head(b, g), v.head(b, g), x->head(b, xm))
                  : a.forward(q.head(b, h), k.head(b, g), v.head(b, g), x->head(b, xm));
  return causal ? a.forward_causal(q.head(b, h), k.head(b, g), v.head(b, g)) : a.forward(q.head(b, h), k.head(b, g), v.head(b, g));
}

template <class Control>
void run(Reader& in, const std::vector<Control>& controls, Index heads, Index kv_heads, Index d, Index dv, bool reads_x) {
  using T = typename Control::scalar_type;
  using Mha = abc::MultiHeadAttention<Control>;
  std::optional<Mha> made;
  if (throws([&] { made.emplace(controls, heads, kv_heads); })) return;
  const Mha& mha = *made;
  const Index H = mha.heads(), M = mha.memories();
  typename Mha::Pool pool;
  std::map<std::uint64_t, bool> known;
  const int ops = in.byte() % 12;
  for (int op = 0; op < ops; ++op) {
    const std::uint8_t what = in.byte();
    const std::uint64_t id = in.byte() % 6;
    switch (what % 7) {
      case 0: {  // add (twice is an error): empty, or resumed from states
        if (what & 0x10) {
          // Another sequence's states (or fresh ones), as they are, one short, one extra, or with
          // memory 0's keys one column wider.
          const std::uint64_t src = in.byte() % 6;
          std::vector<abc::State<T>> states;
          if (known.count(src))
            states = pool.states(src);
          else
            for (Index m = 0; m < M; ++m) states.push_back(mha.memory(m).make_state(d, dv));
          const int change = in.byte() % 4;
          if (change == 1) states.pop_back();
          if (change == 2) states.push_back(states.back());
          if (change == 3) states[0] = mha.memory(0).make_state(states[0].key_dim() + 1, dv);
          const bool bad = known.count(id) != 0 || change == 1 || change == 2 || (change == 3 && M > 1);
          const std::size_t size_before = pool.size();
          const bool t = throws([&] { mha.add(pool, id, states); });
          ABC_FUZZ_REQUIRE(t == bad);
          if (t) {
            ABC_FUZZ_REQUIRE(pool.size() == size_before);
            break;
          }
          for (Index m = 0; m < M; ++m)
            ABC_FUZZ_REQUIRE(same_bits(pool.states(id)[std::size_t(m)], states[std::size_t(m)]));
          known[id] = states[0].key_dim() == d;
          break;
        }
        const Index dd = (what & 0x40) ? d + 1 : d;
        // Float pools hold some sequences in bfloat16: the per-head calls compared with below
        // continue copies of the same states, so they round the same way.
        const abc::StateStorage storage = std::is_same<T, float>::value && (what & 0x80) ? abc::StateStorage::bfloat16
                                                                                        : abc::StateStorage::native;
        const bool t = throws([&] { mha.add(pool, id, dd, dv, storage); });
        ABC_FUZZ_REQUIRE(t == (known.count(id) != 0));
        if (!t) known[id] = dd == d;
        break;
      }
      case 1: pool.drop(id), known.erase(id); break;
      case 2: {
        const bool t = throws([&] { pool.reset(id); });
        ABC_FUZZ_REQUIRE(t == (known.count(id) == 0));
        break;
      }
      default: {  // continue a batch of sequences (ids may repeat or be unknown), a stateless call, or a cross memory
        const Index batch = in.index(0, 3);
        std::vector<std::uint64_t> ids;
        for (Index b = 0; b < batch; ++b) ids.push_back(in.byte() % 6);
        const Layout lq = draw_layout(in, batch, true);
        const bool same = in.byte() & 1;  // k, v laid out as q (usually) or on their own
        const Layout lk = same ? lq : draw_layout(in, batch, true);
        const Index hq = (what & 0x80) ? H + 1 : H;
        auto q = make_tensor<T>(in, lq, hq, d), k = make_tensor<T>(in, lk, kv_heads, d);
        auto v = make_tensor<T>(in, lk, kv_heads, dv), out = make_tensor<T>(in, lq, H, dv);
        // The control input: none, shared by all memories, or one per memory (a wrong count sometimes).
        const int x_mode = reads_x ? in.byte() % 3 : 0;
        const Index xh = x_mode == 1 ? 1 : M + ((what & 0x20) ? 1 : 0);
        auto x = x_mode ? make_tensor<T>(in, lk, xh, d) : Tensor<T>{};
        if (!q.in || !k.in || !v.in || !out.out || (x_mode && !x.in)) break;
        const abc::HeadTensor<const T>* xp = x_mode ? &*x.in : nullptr;
        // A shared x is projected once for all memories: equal to the per-memory calls to rounding
        // only, so those results are checked for finiteness, not bits.
        const bool exact = x_mode != 1;
        const auto x_of = [&](Index m) { return x_mode == 1 ? Index(0) : m; };
        const std::vector<T> out_before = out.data;
        const int form = what % 7 - 3;  // 0: pooled, 1: forward, 2: forward_causal, 3: cross memory
        std::map<std::uint64_t, std::vector<abc::State<T>>> before;
        for (const auto& kv : known) before[kv.first] = pool.states(kv.first);
        const auto unchanged = [&] {
          ABC_FUZZ_REQUIRE(same_bits(out.data, out_before));
          ABC_FUZZ_REQUIRE(pool.size() == before.size());
          for (const auto& kv : before)
            for (Index m = 0; m < M; ++m)
              ABC_FUZZ_REQUIRE(same_bits(pool.states(kv.first)[std::size_t(m)], kv.second[std::size_t(m)]));
        };
        // Every head's output against its memory's single-head forward or forward_causal.
        const auto equals_per_head = [&](bool causal) {
          for (Index b = 0; b < batch; ++b)
            for (Index h = 0; h < H; ++h) {
              const abc::Matrix<T> want = want_forward(mha.head(h), causal, *q.in, h, *k.in, *v.in, mha.kv_head(h),
                                                       x.in, x_of(mha.memory_of(h)), b);
              ABC_FUZZ_REQUIRE(same_values(abc::Matrix<T>(out.out->head(b, h)), want));
            }
        };
        const auto finite = [&] {  // the call succeeded, so every input was finite
          for (Index b = 0; b < batch; ++b)
            for (Index h = 0; h < H; ++h) ABC_FUZZ_REQUIRE(abc::Matrix<T>(out.out->head(b, h)).allFinite());
        };
        if (form == 0) {
          const abc::Status st = xp ? mha.validate(pool, ids, *q.in, *k.in, *v.in, *xp, *out.out)
                                    : mha.validate(pool, ids, *q.in, *k.in, *v.in, *out.out);
          const bool t = throws([&] {
            xp ? mha.forward_causal(pool, ids, *q.in, *k.in, *v.in, *xp, *out.out)
               : mha.forward_causal(pool, ids, *q.in, *k.in, *v.in, *out.out);
          });
          ABC_FUZZ_REQUIRE((st == abc::Status::ok) == !t);
          if (t) {
            unchanged();
            break;
          }
          if (!exact) break;
          // Each sequence and head equals its own single-head call from the state it had; each
          // memory ends as that call leaves it.
          for (Index b = 0; b < batch; ++b)
            for (Index h = 0; h < H; ++h) {
              const Index m = mha.memory_of(h), g = mha.kv_head(h);
              abc::State<T> s = before[ids[std::size_t(b)]][std::size_t(m)];
              const auto& a = mha.head(h);
              abc::Matrix<T> want(q.in->length(b), dv);
              if (q.in->length(b) == 1) {
                if (xp)
                  want.row(0) = a.step(s, q.in->head(b, h).row(0).transpose(), k.in->head(b, g).row(0).transpose(),
                                       v.in->head(b, g).row(0).transpose(), xp->head(b, x_of(m)).row(0).transpose())
                                    .transpose();
                else
                  want.row(0) = a.step(s, q.in->head(b, h).row(0).transpose(), k.in->head(b, g).row(0).transpose(),
                                       v.in->head(b, g).row(0).transpose())
                                    .transpose();
              } else {
                want = xp ? a.forward_causal(s, q.in->head(b, h), k.in->head(b, g), v.in->head(b, g), xp->head(b, x_of(m)))
                          : a.forward_causal(s, q.in->head(b, h), k.in->head(b, g), v.in->head(b, g));
              }
              ABC_FUZZ_REQUIRE(same_values(abc::Matrix<T>(out.out->head(b, h)), want));
              ABC_FUZZ_REQUIRE(same_bits(pool.states(ids[std::size_t(b)])[std::size_t(m)], s));
            }
        } else if (form == 3) {  // a cross memory per sequence, then the queries read it
          const bool t = throws([&] {
            xp ? mha.add_memory(pool, ids, *k.in, *v.in, *xp) : mha.add_memory(pool, ids, *k.in, *v.in);
          });
          if (t) {
            unchanged();
            break;
          }
          for (auto i : ids) known[i] = true;
          const bool r = throws([&] { mha.read(pool, ids, *q.in, *out.out); });
          if (r) {
            ABC_FUZZ_REQUIRE(same_bits(out.data, out_before));
            break;
          }
          if (!exact) {
            finite();
            break;
          }
          equals_per_head(false);
        } else {
          const bool causal = form == 2;
          const abc::Status st = xp ? (causal ? mha.validate_causal(*q.in, *k.in, *v.in, *xp, *out.out)
                                              : mha.validate(*q.in, *k.in, *v.in, *xp, *out.out))
                                    : (causal ? mha.validate_causal(*q.in, *k.in, *v.in, *out.out)
                                              : mha.validate(*q.in, *k.in, *v.in, *out.out));
          const bool t = throws([&] {
            if (xp)
              causal ? mha.forward_causal(*q.in, *k.in, *v.in, *xp, *out.out) : mha.forward(*q.in, *k.in, *v.in, *xp, *out.out);
            else
              causal ? mha.forward_causal(*q.in, *k.in, *v.in, *out.out) : mha.forward(*q.in, *k.in, *v.in, *out.out);
          });
          ABC_FUZZ_REQUIRE((st == abc::Status::ok) == !t);
          if (t) {
            unchanged();
            break;
          }
          if (!exact) {
            finite();
            break;
          }
          equals_per_head(causal);
        }
      }
    }
  }
}

// Every token a KV cache keeps, bit for bit (TRAMS pools and KvCacheAttention caches alike).
template <class State>
bool same_cache(const State& a, const State& b) {
  if (a.size() != b.size() || a.position() != b.position() || a.capacity() != b.capacity()) return false;
  for (Index i = 0; i < a.size(); ++i) {
    const abc::Matrix<typename std::decay_t<decltype(a.key(0))>::Scalar> ka = a.key(i), kb = b.key(i), va = a.value(i),
                                                                         vb = b.value(i);
    if (!same_bits(ka, kb) || !same_bits(va, vb) || a.token_position(i) != b.token_position(i)) return false;
    const auto sa = a.score(i), sb = b.score(i);
    if (std::memcmp(&sa, &sb, sizeof(sa)) != 0) return false;
  }
  return true;
}

// select::MultiHeadCache over the same layouts and pool operations. A head that reads a cache of
// its own (one query head per group, or one cache per query head), and every TRAMS head (its
// selection ranks keys, not reads), equals the single-head segment from the cache it had, bit for
// bit, and leaves the cache as that segment does; the heads of a group sharing an H2O, sinks or
// SnapKV cache give finite outputs for moderate inputs.
template <class Attention>
void run_cache(Reader& in, const std::vector<Attention>& per_memory, Index heads, Index kv_heads, Index d, Index dv) {
  using T = typename Attention::scalar_type;
  using Layer = abc::select::MultiHeadCache<Attention>;
  std::optional<Layer> made;
  if (throws([&] { made.emplace(per_memory, heads, kv_heads); })) return;
  const Layer& layer = *made;
  const Index H = layer.heads(), M = layer.memories();
  const bool exact = M == H || H == kv_heads || std::is_same<Attention, abc::select::TramsAttention<T>>::value;
  typename Layer::Pool pool;
  std::map<std::uint64_t, bool> known;
  const int ops = in.byte() % 12;
  for (int op = 0; op < ops; ++op) {
    const std::uint8_t what = in.byte();
    const std::uint64_t id = in.byte() % 6;
    switch (what % 5) {
      case 0: {
        const Index dd = (what & 0x40) ? d + 1 : d;
        const bool t = throws([&] { layer.add(pool, id, dd, dv); });
        ABC_FUZZ_REQUIRE(t == (known.count(id) != 0));
        if (!t) known[id] = dd == d;
        break;
      }
      case 1: pool.drop(id), known.erase(id); break;
      case 2: {
        const bool t = throws([&] { pool.reset(id); });
        ABC_FUZZ_REQUIRE(t == (known.count(id) == 0));
        break;
      }
      default: {  // continue sequences of the pool (3), or a call from empty caches (4)
        const Index batch = in.index(0, 3);
        std::vector<std::uint64_t> ids;
        for (Index b = 0; b < batch; ++b) ids.push_back(in.byte() % 6);
        const Layout lq = draw_layout(in, batch);
        const Layout lk = (in.byte() & 1) ? lq : draw_layout(in, batch);
        const Index hq = (what & 0x80) ? H + 1 : H;
        auto q = make_tensor<T>(in, lq, hq, d), k = make_tensor<T>(in, lk, kv_heads, d);
        auto v = make_tensor<T>(in, lk, kv_heads, dv), out = make_tensor<T>(in, lq, H, dv);
        if (!q.in || !k.in || !v.in || !out.out) break;
        const bool pooled = what % 5 == 3;
        const std::vector<T> out_before = out.data;
        std::map<std::uint64_t, std::vector<typename Attention::State>> before;
        for (const auto& kv : known) before[kv.first] = pool.states(kv.first);
        const abc::Status st = pooled ? layer.validate(pool, ids, *q.in, *k.in, *v.in, *out.out)
                                      : layer.validate_causal(*q.in, *k.in, *v.in, *out.out);
        const bool t = throws([&] {
          pooled ? layer.forward_causal(pool, ids, *q.in, *k.in, *v.in, *out.out)
                 : layer.forward_causal(*q.in, *k.in, *v.in, *out.out);
        });
        ABC_FUZZ_REQUIRE((st == abc::Status::ok) == !t);
        if (t) {  // nothing changed
          ABC_FUZZ_REQUIRE(same_bits(out.data, out_before));
          ABC_FUZZ_REQUIRE(pool.size() == before.size());
          for (const auto& kv : before)
            for (Index m = 0; m < M; ++m)
              ABC_FUZZ_REQUIRE(same_cache(pool.states(kv.first)[std::size_t(m)], kv.second[std::size_t(m)]));
          break;
        }
        for (Index b = 0; b < batch; ++b) {
          for (Index h = 0; h < H; ++h) {
            const abc::Matrix<T> got = out.out->head(b, h);
            if (!exact) {
              double bound = 0;
              for (const auto* x : {&q.data, &k.data, &v.data})
                for (T e : *x) bound = std::max(bound, std::abs(double(e)));
              if (bound <= 1e6) ABC_FUZZ_REQUIRE(got.allFinite());
              continue;
            }
            const Index m = layer.memory_of(h), g = layer.kv_head(h);
            const Attention& a = layer.memory(m);
            typename Attention::State s = pooled ? before[ids[std::size_t(b)]][std::size_t(m)] : a.make_state(d, dv);
            const abc::Matrix<T> want = a.segment(s, q.in->head(b, h), k.in->head(b, g), v.in->head(b, g));
            ABC_FUZZ_REQUIRE(same_values(got, want));
            if (pooled) ABC_FUZZ_REQUIRE(same_cache(pool.states(ids[std::size_t(b)])[std::size_t(m)], s));
          }
        }
      }
    }
  }
}

template <class T>
void fuzz_cache(Reader& in, std::uint8_t kind, Index heads, Index kv, Index d, Index dv) {
  using namespace abc::select;
  const Index count = (kind & 2) ? kv : heads, a = in.index(0, 5), b = in.index(0, 5);
  switch ((kind >> 3) % 4) {
    case 0: {
      std::optional<KvCacheAttention<HeavyHitters<T>>> c;
      if (throws([&] { c.emplace(HeavyHitterConfig{a, b}); })) return;
      run_cache(in, std::vector<KvCacheAttention<HeavyHitters<T>>>(std::size_t(std::max<Index>(count, 0)), *c), heads, kv, d, dv);
      break;
    }
    case 1: {
      std::optional<KvCacheAttention<AttentionSinks<T>>> c;
      if (throws([&] { c.emplace(SinkConfig{a, b}); })) return;
      run_cache(in, std::vector<KvCacheAttention<AttentionSinks<T>>>(std::size_t(std::max<Index>(count, 0)), *c), heads, kv, d, dv);
      break;
    }
    case 2: {
      std::optional<KvCacheAttention<SnapKv<T>>> c;
      const SnapKvConfig cfg{a, in.index(0, 4), 2 * in.index(0, 2) + 1, (kind & 0x40) ? Pooling::max : Pooling::average, b};
      if (throws([&] { c.emplace(cfg); })) return;
      run_cache(in, std::vector<KvCacheAttention<SnapKv<T>>>(std::size_t(std::max<Index>(count, 0)), *c), heads, kv, d, dv);
      break;
    }
    default: {
      std::optional<TramsAttention<T>> c;
      if (throws([&] { c.emplace(TramsConfig{a + b, a, in.index(0, b)}, KeyScore<T>::norm()); })) return;
      run_cache(in, std::vector<TramsAttention<T>>(std::size_t(std::max<Index>(count, 0)), *c), heads, kv, d, dv);
    }
  }
}

template <class T>
void fuzz(Reader& in) {
  const Index heads = in.index(0, 4), kv = in.index(0, 4), n = in.index(1, 6), d = in.index(1, 5), dv = in.index(1, 5);
  const std::uint8_t kind = in.byte();
  // Controls per key/value head (their query heads share a memory) or per query head.
  if (kind & 4) return fuzz_cache<T>(in, kind, heads, kv, d, dv);
  const Index count = (kind & 2) ? kv : heads;
  if (kind & 1) {  // one window shared by all heads
    run(in, std::vector<abc::control::SlidingWindow<T>>(std::size_t(std::max<Index>(count, 0)), abc::control::SlidingWindow<T>{n}),
        heads, kv, d, dv, false);
  } else {  // ABC-MLP with W_φ [n × d] per memory, reading the keys or a control input of width d
    std::vector<abc::control::Mlp<T>> c;
    for (Index h = 0; h < count; ++h) {
      const abc::Matrix<T> w = in.matrix<T>(n, d);
      if (throws([&] { c.emplace_back(w); })) return;  // a non-finite weight: refused by name
    }
    run(in, c, heads, kv, d, dv, true);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  Reader in(data, size);
  try {
    if (in.byte() & 1)
      fuzz<double>(in);
    else
      fuzz<float>(in);
  } catch (...) {
    __builtin_trap();  // only the harness's own calls may throw, and they are caught
  }
  return 0;
}
