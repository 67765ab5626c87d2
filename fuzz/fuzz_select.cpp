// SPDX-License-Identifier: MIT
// abc fuzz: memory selection and global memory: select::TramsAttention (fuzz-chosen pool, recent and
// top-k sizes including hostile ones, every score kind, W_Q of any width, a pool made by another
// TramsAttention; segments, steps, segments with a position bias, attended(), distances()) and
// GlobalMemoryAttention (every LocalPattern, including windows wider than any sequence; forward and
// forward_main). Values as in fuzz_api (NaN, ±Inf, denormals, ±1e30). Invariants (trap on
// violation, besides any sanitizer report):
//  - only abc::shape_error / abc::config_error escape;
//  - a TRAMS call that throws leaves the pool bit-identical (size, position, every key, value, score);
//  - moderate finite inputs give finite outputs;
//  - TRAMS: a segment equals the same tokens fed one step at a time, to rounding, when every token
//    is kept (recent ≥ pool: the selection is then independent of the scores);
//  - GMAT: forward's main rows equal forward_main's bit for bit;
//  - KV caches (select::KvCacheAttention with H2O, attention sinks or SnapKV, fuzz-chosen sizes
//    including hostile ones): a failed call leaves the cache bit-identical; a segment equals its
//    steps while nothing is evicted; kept positions increase and the newest `recent` are the
//    stream's last; H2O's masses are never negative and grow by at most one per query (exactly one
//    while nothing is evicted); the same with a Rope re-rotating the keys eviction moves.
#include <abc/abc.hpp>

#include "fuzz.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <type_traits>
#include <vector>

namespace {

using abc::Index;
using abc_fuzz::max_abs;
using abc_fuzz::Reader;
using abc_fuzz::throws;

template <class State>
bool same_pool(const State& a, const State& b) {
  if (a.size() != b.size() || a.position() != b.position() || a.capacity() != b.capacity()) return false;
  for (Index i = 0; i < a.size(); ++i) {
    const auto ka = a.key(i), kb = b.key(i), va = a.value(i), vb = b.value(i);
    const auto bits_differ = [](auto x, auto y) { return std::memcmp(&x, &y, sizeof(x)) != 0; };
    for (Index j = 0; j < ka.size(); ++j)
      if (bits_differ(ka(j), kb(j))) return false;
    for (Index j = 0; j < va.size(); ++j)
      if (bits_differ(va(j), vb(j))) return false;
    if (a.score(i) != b.score(i) || a.token_position(i) != b.token_position(i)) return false;  // never NaN
  }
  return true;
}

// The largest |entry| the pool holds: what an output is an average of, besides this call's tokens.
template <class State>
double pool_max_abs(const State& s) {
  double r = 0;
  const auto take = [&r](const auto& row) {
    for (Index j = 0; j < row.size(); ++j) {
      const double a = std::abs(double(row(j)));
      r = std::isnan(a) ? std::numeric_limits<double>::infinity() : std::max(r, a);
    }
  };
  for (Index i = 0; i < s.size(); ++i) {
    take(s.key(i));
    take(s.value(i));
  }
  return r;
}

Index hostile_size(Reader& in) {  // usually small, sometimes negative or absurd
  const std::uint8_t b = in.byte();
  if (b == 255) return std::numeric_limits<Index>::max();
  if (b == 254) return Index(1) << 62;
  if (b == 253) return -1;
  return Index(b % 12);
}

template <class T>
abc::select::KeyScore<T> draw_score(Reader& in, Index d) {
  const std::uint8_t how = in.byte();
  if (how % 4 == 0) return abc::select::KeyScore<T>::norm();
  const Index rows = (how & 0x10) ? in.index(0, 6) : d;  // usually the key width
  const abc::Matrix<T> w = in.matrix<T>(rows, in.index(0, 6));
  std::optional<abc::select::KeyScore<T>> s;
  if (throws([&] { s.emplace(w, static_cast<abc::select::ScoreKind>(how % 4 - 1)); }))
    return abc::select::KeyScore<T>::norm();
  return *s;
}

template <class T>
void trams(Reader& in) {
  using Trams = abc::select::TramsAttention<T>;
  const Index d = in.index(1, 6), dv = in.index(1, 6);
  abc::select::TramsConfig cfg;
  cfg.pool = hostile_size(in);
  cfg.recent = hostile_size(in);
  cfg.topk = hostile_size(in);
  cfg.positions = (in.byte() & 1) ? abc::select::PositionMode::original : abc::select::PositionMode::compacted;
  std::optional<Trams> made, other;
  if (throws([&] { made.emplace(cfg, draw_score<T>(in, d)); })) return;
  // A pool too large to allocate but whose size is an Index is the allocator's to refuse (under
  // ASan: an abort, not std::bad_alloc); one whose size overflows is refused by make_state.
  if (cfg.pool > (Index(1) << 20) && cfg.pool < std::numeric_limits<Index>::max() / 32) return;
  const Trams& attn = *made;
  // The pool: this attention's, or one made by another TramsAttention (its score of another width).
  typename Trams::State s;
  if (in.byte() & 1) {
    if (throws([&] { s = attn.make_state(d, dv); })) return;
  } else {
    abc::select::TramsConfig c2 = cfg;
    c2.pool = in.index(1, 12);
    c2.recent = c2.topk = 0;
    if (throws([&] { other.emplace(c2, draw_score<T>(in, in.index(1, 6))); })) return;
    if (throws([&] { s = other->make_state(in.index(1, 6), dv); })) return;
  }
  const bool keeps_all = cfg.recent >= cfg.pool;  // every pool token is read: no selection
  const int calls = in.byte() % 6;
  for (int c = 0; c < calls; ++c) {
    const Index n = in.index(0, 5);
    const abc::Matrix<T> q = in.matrix<T>(n, (in.byte() == 255) ? d + 1 : s.key_dim()), k = in.matrix<T>(n, s.key_dim()),
                         v = in.matrix<T>(n, s.value_dim());
    // The pool's tokens from earlier calls count too: the output averages them (values) and their
    // logits decide the weights (keys).
    const double bound = std::max({max_abs(q), max_abs(k), max_abs(v), pool_max_abs(s)});
    const typename Trams::State before = s;
    const std::uint8_t form = in.byte() % 4;
    abc::Matrix<T> out;
    bool t = false;
    if (form == 0) {
      t = throws([&] { out = attn.segment(s, q, k, v); });
      // The same tokens one step at a time, while none leaves the pool (a segment reads the pool as
      // it was before it, a step the pool after the previous step).
      if (!t && keeps_all && bound <= 100 && n > 0 && before.size() + n <= before.capacity()) {
        typename Trams::State r = before;
        for (Index i = 0; i < n; ++i) {
          const abc::Vector<T> o = attn.step(r, q.row(i).transpose(), k.row(i).transpose(), v.row(i).transpose());
          const double tol = (std::is_same<T, float>::value ? 1e-3 : 1e-9) * (1 + bound);
          for (Index j = 0; j < o.size(); ++j) ABC_FUZZ_REQUIRE(std::abs(double(o(j)) - double(out(i, j))) <= tol);
        }
      }
    } else if (form == 1 && n > 0) {
      abc::Vector<T> o;
      t = throws([&] { o = attn.step(s, q.row(0).transpose(), k.row(0).transpose(), v.row(0).transpose()); });
      if (!t) out = o.transpose();
    } else if (form == 2) {
      const T slope = T(int(in.byte()) - 128) / T(64);
      t = throws([&] { out = attn.segment(s, q, k, v, [slope](Index, std::int64_t dist) { return slope * T(dist); }); });
    } else {
      std::vector<Index> a;
      ABC_FUZZ_REQUIRE(!throws([&] { a = attn.attended(s); }));
      for (std::size_t i = 1; i < a.size(); ++i) ABC_FUZZ_REQUIRE(a[i - 1] < a[i]);
      ABC_FUZZ_REQUIRE(Index(a.size()) <= s.size());
      const auto dist = attn.distances(s, n);
      ABC_FUZZ_REQUIRE(dist.rows() == n && dist.cols() == Index(a.size()) + n);
      continue;
    }
    if (t) {
      ABC_FUZZ_REQUIRE(same_pool(s, before));
      continue;
    }
    const double cap = std::is_same<T, float>::value ? 1e6 : 1e30;
    if (form != 2 && bound <= cap) ABC_FUZZ_REQUIRE(max_abs(out) < std::numeric_limits<double>::infinity());
  }
}

// Everything a KV cache holds, compared bit for bit (scores too: a failed call changes none).
template <class State>
bool same_cache(const State& a, const State& b) {
  if (a.size() != b.size() || a.position() != b.position() || a.capacity() != b.capacity()) return false;
  for (Index i = 0; i < a.size(); ++i) {
    if (a.key(i) != b.key(i) || a.value(i) != b.value(i)) return false;  // finite: == is bitwise up to ±0
    if (a.score(i) != b.score(i) || a.token_position(i) != b.token_position(i)) return false;  // never NaN
  }
  return true;
}

// A KvCacheAttention with `policy`, driven by segments and steps, on its own cache or on one made
// with `other` (another budget); `masses`: H2O's scores are attention masses, whose totals are
// checked.
template <class Policy>
void kv_cache(Reader& in, const Policy& policy, const Policy& other, bool masses) {
  using T = typename Policy::scalar_type;
  using Cache = abc::select::KvCacheAttention<Policy>;
  const Index d = in.index(1, 6), dv = in.index(1, 6);
  std::optional<Cache> made, made_other;
  // Sometimes with rotary keys at compacted positions (a rope of 2 to 6 entries; keys narrower than
  // it are refused by make_state): eviction then turns the keys it moves.
  const std::uint8_t rope = in.byte();
  if (throws([&] {
        if (rope & 1)
          made.emplace(policy, 0.0, abc::select::Rope<T>(2 * (1 + Index(rope >> 1) % 3)));
        else
          made.emplace(policy);
      }))
    return;
  if (made->budget() > (Index(1) << 20)) return;  // too large to allocate: the allocator's to refuse
  const Cache& attn = *made;
  typename Cache::State s;
  if (in.byte() & 1) {
    if (throws([&] { s = attn.make_state(d, dv); })) return;
  } else {
    if (throws([&] { made_other.emplace(other); })) return;
    if (throws([&] { s = made_other->make_state(in.index(1, 6), dv); })) return;
  }
  const Index recent = policy.recent();
  const int calls = in.byte() % 6;
  for (int c = 0; c < calls; ++c) {
    const Index n = in.index(0, 5);
    const abc::Matrix<T> q = in.matrix<T>(n, (in.byte() == 255) ? d + 1 : s.key_dim()), k = in.matrix<T>(n, s.key_dim()),
                         v = in.matrix<T>(n, s.value_dim());
    double bound = std::max({max_abs(q), max_abs(k), max_abs(v)});
    double mass_before = 0;
    for (Index i = 0; i < s.size(); ++i) {
      bound = std::max({bound, max_abs(abc::Matrix<T>(s.key(i))), max_abs(abc::Matrix<T>(s.value(i)))});
      mass_before += s.score(i);
    }
    const typename Cache::State before = s;
    abc::Matrix<T> out;
    bool t = false;
    if (in.byte() & 1) {
      t = throws([&] { out = attn.segment(s, q, k, v); });
      // Nothing evicted: a segment reads what n steps read.
      if (!t && bound <= 100 && n > 0 && before.size() + n <= before.capacity()) {
        typename Cache::State r = before;
        for (Index i = 0; i < n; ++i) {
          const abc::Vector<T> o = attn.step(r, q.row(i).transpose(), k.row(i).transpose(), v.row(i).transpose());
          const double tol = (std::is_same<T, float>::value ? 1e-3 : 1e-9) * (1 + bound);
          for (Index j = 0; j < o.size(); ++j) ABC_FUZZ_REQUIRE(std::abs(double(o(j)) - double(out(i, j))) <= tol);
        }
      }
    } else if (n > 0) {
      abc::Vector<T> o;
      t = throws([&] { o = attn.step(s, q.row(0).transpose(), k.row(0).transpose(), v.row(0).transpose()); });
      if (!t) out = o.transpose();
    } else {
      continue;
    }
    if (t) {
      ABC_FUZZ_REQUIRE(same_cache(s, before));
      continue;
    }
    // Positions stay in order with the newest `recent` tokens last, and the cache holds what it may.
    const Index queries = out.rows();
    for (Index i = 1; i < s.size(); ++i) ABC_FUZZ_REQUIRE(s.token_position(i - 1) < s.token_position(i));
    const Index newest = std::min(recent, s.size());
    for (Index i = s.size() - newest; i < s.size(); ++i)
      ABC_FUZZ_REQUIRE(s.token_position(i) == s.position() - (s.size() - i));
    ABC_FUZZ_REQUIRE(s.size() == std::min(before.size() + queries, s.capacity()));
    const double cap = std::is_same<T, float>::value ? 1e6 : 1e30;
    if (bound <= cap) ABC_FUZZ_REQUIRE(max_abs(out) < std::numeric_limits<double>::infinity());
    if (!masses) continue;
    // H2O: each query hands out a mass of 1 over what it reads: the kept masses grow by at most the
    // queries (exactly, when nothing left) and are never negative.
    double mass_after = 0;
    for (Index i = 0; i < s.size(); ++i) {
      ABC_FUZZ_REQUIRE(s.score(i) >= 0);
      mass_after += s.score(i);
    }
    ABC_FUZZ_REQUIRE(mass_after <= mass_before + double(queries) + 1e-4 * (1 + mass_before));
    // (A query whose every logit overflowed reads nothing and hands out no mass: moderate inputs only.)
    if (bound <= cap && before.size() + queries <= s.capacity())
      ABC_FUZZ_REQUIRE(std::abs(mass_after - mass_before - double(queries)) <= 1e-4 * (1 + mass_before));
  }
}

template <class T>
void kv_cache(Reader& in) {
  using namespace abc::select;
  const std::uint8_t which = in.byte() % 3;
  const Index a = hostile_size(in), b = hostile_size(in), a2 = in.index(0, 4), b2 = in.index(1, 4);
  if (which == 0) {
    std::optional<HeavyHitters<T>> p;
    if (!throws([&] { p.emplace(HeavyHitterConfig{a, b}); }))
      kv_cache(in, *p, HeavyHitters<T>(HeavyHitterConfig{a2, b2}), true);
  } else if (which == 1) {
    std::optional<AttentionSinks<T>> p;
    if (!throws([&] { p.emplace(SinkConfig{a, b}); })) kv_cache(in, *p, AttentionSinks<T>(SinkConfig{a2, b2}), false);
  } else {
    const SnapKvConfig cfg{a, b, hostile_size(in), (in.byte() & 1) ? Pooling::max : Pooling::average, hostile_size(in)};
    std::optional<SnapKv<T>> p;
    if (!throws([&] { p.emplace(cfg); }))
      kv_cache(in, *p, SnapKv<T>(SnapKvConfig{b2 + 1, b2, 1, Pooling::max, a2}), false);
  }
}

template <class T>
void gmat(Reader& in) {
  std::optional<abc::LocalPattern> pattern;
  switch (in.byte() % 4) {
    case 0: pattern = abc::LocalPattern::full(); break;
    case 1: {
      const Index c = hostile_size(in);
      if (throws([&] { pattern = abc::LocalPattern::chunked(c); })) return;
      break;
    }
    default: {
      const Index l = hostile_size(in), r = hostile_size(in);
      if (throws([&] { pattern = abc::LocalPattern::window(l, r); })) return;
    }
  }
  const Index L = in.index(0, 12), M = in.index(0, 4), d = in.index(0, 5), dv = in.index(0, 5);
  const std::uint8_t skew = in.byte();
  const auto off = [&](int which) { return (skew % 8) == which ? Index(1) : Index(0); };
  const abc::Matrix<T> qx = in.matrix<T>(L + off(1), d), kx = in.matrix<T>(L, d), vx = in.matrix<T>(L, dv);
  const abc::Matrix<T> qm = in.matrix<T>(M, d + off(2)), km = in.matrix<T>(M, d), vm = in.matrix<T>(M + off(3), dv);
  const double bound = std::max({max_abs(qx), max_abs(kx), max_abs(vx), max_abs(qm), max_abs(km), max_abs(vm)});
  const double scale = (skew & 0x80) ? -1.0 : 0.0;
  std::optional<abc::GlobalMemoryAttention<T>> made;
  if (throws([&] { made.emplace(*pattern, scale); })) {
    ABC_FUZZ_REQUIRE(scale < 0);
    return;
  }
  typename abc::GlobalMemoryAttention<T>::Output o;
  abc::Matrix<T> main;
  const bool t1 = throws([&] { o = made->forward(qx, kx, vx, qm, km, vm); });
  const bool t2 = throws([&] { main = made->forward_main(qx, kx, vx, km, vm); });
  if (!t1) ABC_FUZZ_REQUIRE(!t2);  // forward_main checks a subset of forward's arguments
  if (t1 || t2) return;
  ABC_FUZZ_REQUIRE(o.main.rows() == main.rows() && o.main.cols() == main.cols());
  ABC_FUZZ_REQUIRE(main.size() == 0 || std::memcmp(o.main.data(), main.data(), sizeof(T) * std::size_t(main.size())) == 0);
  const double cap = std::is_same<T, float>::value ? 1e6 : 1e30;
  if (bound <= cap) {
    ABC_FUZZ_REQUIRE(max_abs(o.main) < std::numeric_limits<double>::infinity());
    ABC_FUZZ_REQUIRE(max_abs(o.memory) < std::numeric_limits<double>::infinity());
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  Reader in(data, size);
  const std::uint8_t what = in.byte();
  try {
    switch (what % 6) {
      case 0: trams<float>(in); break;
      case 1: trams<double>(in); break;
      case 2: gmat<float>(in); break;
      case 3: gmat<double>(in); break;
      case 4: kv_cache<float>(in); break;
      default: kv_cache<double>(in);
    }
  } catch (...) {
    __builtin_trap();  // only the harness's own calls may throw, and they are caught
  }
  return 0;
}
