// SPDX-License-Identifier: MIT
// abc tests: MultiHeadAttention equals per-head single calls exactly, in both layouts, with
// grouped-query heads, variable lengths (0 and 1 included) and the decode pool.
#include <abc/abc.hpp>
#include <abc/multi_head_attention.hpp>

#include <vector>

#include "support/catch.hpp"
#include "support/reference.hpp"

namespace multi_head_attention_test {

namespace {

using abc::Index;

// A [batch, seq, heads, dim] tensor filled from a seed, stored in the requested layout.
template <class T>
struct Tensor {
  Index batch, seq, heads, dim;
  bool bhsd;
  std::vector<T> data;
  Tensor(Index b, Index s, Index h, Index d, bool heads_first, std::uint64_t seed)
      : batch(b), seq(s), heads(h), dim(d), bhsd(heads_first), data(std::size_t(b * s * h * d)) {
    const auto r = ref::random<T>(1, b * s * h * d, seed);
    for (Index i = 0; i < r.size(); ++i) data[std::size_t(i)] = r(0, i);
  }
  abc::HeadTensor<const T> view(std::vector<Index> lengths = {}) const {
    return bhsd ? abc::HeadTensor<const T>::bhsd(data.data(), batch, heads, seq, dim, lengths)
                : abc::HeadTensor<const T>::bshd(data.data(), batch, seq, heads, dim, lengths);
  }
  abc::HeadTensor<T> out_view(std::vector<Index> lengths = {}) {
    return bhsd ? abc::HeadTensor<T>::bhsd(data.data(), batch, heads, seq, dim, lengths)
                : abc::HeadTensor<T>::bshd(data.data(), batch, seq, heads, dim, lengths);
  }
};

// [batch, seq, heads, dim + pad], filled from a seed: head h's row of token s at
// s · heads · (dim + pad) + h · (dim + pad), viewed as [batch, seq, heads, dim] (heads `pad` entries apart).
template <class T>
struct SpacedHeads {
  Index heads, dim, pad, seq, batch;
  std::vector<T> data;
  SpacedHeads(Index h, Index w, Index p, Index s, Index b, std::uint64_t seed)
      : heads(h), dim(w), pad(p), seq(s), batch(b), data(std::size_t(b * s * h * (w + p))) {
    const auto r = ref::random<T>(1, Index(data.size()), seed);
    for (Index i = 0; i < r.size(); ++i) data[std::size_t(i)] = r(0, i);
  }
  template <class U>
  abc::HeadTensor<U> view(U* p, const std::vector<Index>& lens) const {
    const Index head = dim + pad;
    return abc::HeadTensor<U>::strided(p, batch, seq, heads, dim, seq * heads * head, heads * head, head, lens);
  }
  abc::HeadTensor<const T> in(const std::vector<Index>& lens) const { return view<const T>(data.data(), lens); }
  abc::HeadTensor<T> out(const std::vector<Index>& lens) { return view<T>(data.data(), lens); }
};

}  // namespace

TEMPLATE_TEST_CASE("multi-head results equal per-head single calls exactly, both layouts and GQA",
                   "[multi_head]", float, double) {
  using T = TestType;
  const Index B = 3, S = 37, H = 4, d = 8, dv = 6;
  for (bool heads_first : {false, true})
    for (Index kv : {Index(4), Index(2), Index(1)}) {
      INFO("bhsd " << heads_first << ", kv_heads " << kv);
      std::vector<abc::control::Mlp<T>> controls;
      for (Index h = 0; h < H; ++h) controls.emplace_back(abc::Slots{5}, d, abc::Seed(std::uint64_t(h)));  // per-head W_φ
      abc::MultiHeadAttention<abc::control::Mlp<T>> mha(controls, kv);
      Tensor<T> q(B, S, H, d, heads_first, 1), k(B, S, kv, d, heads_first, 2), v(B, S, kv, dv, heads_first, 3);
      Tensor<T> out(B, S, H, dv, heads_first, 4), out_c(B, S, H, dv, heads_first, 5);
      mha.forward(q.view(), k.view(), v.view(), out.out_view());
      mha.forward_causal(q.view(), k.view(), v.view(), out_c.out_view());
      for (Index b = 0; b < B; ++b)
        for (Index h = 0; h < H; ++h) {
          const abc::BoundedAttention<abc::control::Mlp<T>> single{controls[std::size_t(h)]};
          const Index g = h / (H / kv);
          const abc::Matrix<T> want = single.forward(q.view().head(b, h), k.view().head(b, g), v.view().head(b, g));
          const abc::Matrix<T> want_c = single.forward_causal(q.view().head(b, h), k.view().head(b, g), v.view().head(b, g));
          REQUIRE(abc::Matrix<T>(out.view().head(b, h)) == want);
          REQUIRE(abc::Matrix<T>(out_c.view().head(b, h)) == want_c);
        }
    }
}

TEMPLATE_TEST_CASE("variable lengths: packed offsets and padded lengths, including 0 and 1", "[multi_head][varlen]",
                   float, double) {
  using T = TestType;
  const Index H = 2, d = 5, dv = 3;
  abc::MultiHeadAttention<abc::control::SlidingWindow<T>> mha(abc::control::SlidingWindow<T>{4}, H, H);
  const std::vector<Index> offsets = {0, 7, 7, 8, 20};  // lengths 7, 0, 1, 12
  const Index total = offsets.back();
  const auto qd = ref::random<T>(1, total * H * d, 1), kd = ref::random<T>(1, total * H * d, 2);
  const auto vd = ref::random<T>(1, total * H * dv, 3);
  std::vector<T> out(std::size_t(total * H * dv), T(-7));
  const auto q = abc::HeadTensor<const T>::packed(qd.data(), offsets, H, d);
  const auto k = abc::HeadTensor<const T>::packed(kd.data(), offsets, H, d);
  const auto v = abc::HeadTensor<const T>::packed(vd.data(), offsets, H, dv);
  mha.forward_causal(q, k, v, abc::HeadTensor<T>::packed(out.data(), offsets, H, dv));
  const auto o = abc::HeadTensor<const T>::packed(out.data(), offsets, H, dv);
  REQUIRE(o.length(1) == 0);
  REQUIRE(o.length(2) == 1);
  for (Index b = 0; b < 4; ++b)
    for (Index h = 0; h < H; ++h)
      REQUIRE(abc::Matrix<T>(o.head(b, h)) == mha.head(h).forward_causal(q.head(b, h), k.head(b, h), v.head(b, h)));
  for (T x : out) REQUIRE(x != T(-7));  // every real row written (and no padding exists)
  // Padded layout with true lengths: the padding rows are neither read nor written.
  const Index B = 3, S = 6;
  Tensor<T> qp(B, S, H, d, false, 4), kp(B, S, H, d, false, 5), vp(B, S, H, dv, false, 6), op(B, S, H, dv, false, 7);
  std::fill(op.data.begin(), op.data.end(), T(-7));
  const std::vector<Index> lengths = {6, 0, 1};
  mha.forward(qp.view(lengths), kp.view(lengths), vp.view(lengths), op.out_view(lengths));
  for (Index b = 0; b < B; ++b)
    for (Index h = 0; h < H; ++h) {
      const auto full = op.view().head(b, h);
      const Index len = lengths[std::size_t(b)];
      if (len > 0)
        REQUIRE(abc::Matrix<T>(full.topRows(len)) ==
                mha.head(h).forward(qp.view(lengths).head(b, h), kp.view(lengths).head(b, h), vp.view(lengths).head(b, h)));
      for (Index s = len; s < S; ++s)
        for (Index j = 0; j < dv; ++j) REQUIRE(full(s, j) == T(-7));
    }
}

TEMPLATE_TEST_CASE("the decode pool gives the same outputs as independent states", "[multi_head][pool]", float, double) {
  using T = TestType;
  const Index H = 2, d = 4, dv = 3, steps = 9;
  using Attn = abc::MultiHeadAttention<abc::control::Mlp<T>>;
  Attn mha(abc::control::Mlp<T>(abc::Slots{3}, d, abc::Seed{11}), H, 1);
  typename Attn::Pool pool;
  mha.add(pool, 10, d, dv);
  mha.add(pool, 20, d, dv);
  mha.add(pool, 30, d, dv);
  REQUIRE(pool.size() == 3);
  REQUIRE_THROWS_AS(mha.add(pool, 20, d, dv), abc::config_error);
  REQUIRE_THROWS_WITH(mha.add(pool, 20, d, dv),
                      ABC_CONTAINS("abc::MultiHeadAttention::add: sequence id 20 is already in the pool"));
  // Independent single-head states, one per (sequence, head).
  std::vector<std::vector<abc::State<T>>> solo(3);
  for (auto& s : solo)
    for (Index h = 0; h < H; ++h) s.push_back(mha.head(h).make_state(d, dv));
  // Prefill sequences 10 and 30 with different lengths, then step all three together.
  const std::vector<std::uint64_t> prefill_ids = {10, 30};
  const std::vector<Index> offsets = {0, 5, 7};
  const auto pq = ref::random<T>(1, 7 * H * d, 1), pk = ref::random<T>(1, 7 * 1 * d, 2), pv = ref::random<T>(1, 7 * 1 * dv, 3);
  std::vector<T> po(std::size_t(7 * H * dv));
  mha.forward_causal(pool, prefill_ids, abc::HeadTensor<const T>::packed(pq.data(), offsets, H, d),
                     abc::HeadTensor<const T>::packed(pk.data(), offsets, 1, d),
                     abc::HeadTensor<const T>::packed(pv.data(), offsets, 1, dv),
                     abc::HeadTensor<T>::packed(po.data(), offsets, H, dv));
  const std::vector<std::size_t> slot_of = {0, 2};
  for (std::size_t i = 0; i < 2; ++i)
    for (Index h = 0; h < H; ++h) {
      const auto qh = abc::HeadTensor<const T>::packed(pq.data(), offsets, H, d).head(Index(i), h);
      const auto kh = abc::HeadTensor<const T>::packed(pk.data(), offsets, 1, d).head(Index(i), 0);
      const auto vh = abc::HeadTensor<const T>::packed(pv.data(), offsets, 1, dv).head(Index(i), 0);
      const abc::Matrix<T> want = mha.head(h).forward_causal(solo[slot_of[i]][std::size_t(h)], qh, kh, vh);
      REQUIRE(abc::Matrix<T>(abc::HeadTensor<const T>::packed(po.data(), offsets, H, dv).head(Index(i), h)) == want);
    }
  const std::vector<std::uint64_t> all = {10, 20, 30};
  for (Index t = 0; t < steps; ++t) {
    Tensor<T> q(3, 1, H, d, false, 100 + std::uint64_t(t)), k(3, 1, 1, d, false, 200 + std::uint64_t(t));
    Tensor<T> v(3, 1, 1, dv, false, 300 + std::uint64_t(t)), out(3, 1, H, dv, false, 0);
    mha.forward_causal(pool, all, q.view(), k.view(), v.view(), out.out_view());
    for (Index b = 0; b < 3; ++b)
      for (Index h = 0; h < H; ++h) {
        const abc::Vector<T> want = mha.head(h).step(solo[std::size_t(b)][std::size_t(h)], q.view().head(b, h).row(0).transpose(),
                                                     k.view().head(b, 0).row(0).transpose(), v.view().head(b, 0).row(0).transpose());
        REQUIRE(abc::Matrix<T>(out.view().head(b, h).row(0).transpose()) == abc::Matrix<T>(want));
      }
  }
  // One shared control over one key/value head: both query heads read one memory, which is what
  // each head's independent state holds.
  REQUIRE(mha.memories() == 1);
  for (std::size_t b = 0; b < 3; ++b) {
    REQUIRE(pool.states(all[b]).size() == 1);
    for (Index h = 0; h < H; ++h) REQUIRE(pool.states(all[b])[0] == solo[b][std::size_t(h)]);
  }
  // A failed batched call (one sequence's keys too narrow) changes no sequence.
  const auto before = pool.states(10);
  Tensor<T> q(2, 1, H, d, false, 1), kbad(2, 1, 1, d - 1, false, 2), v(2, 1, 1, dv, false, 3), out(2, 1, H, dv, false, 0);
  REQUIRE_THROWS_AS(mha.forward_causal(pool, {10, 20}, q.view(), kbad.view(), v.view(), out.out_view()), abc::shape_error);
  REQUIRE_THROWS_WITH(mha.forward_causal(pool, {10, 20}, q.view(), kbad.view(), v.view(), out.out_view()),
                      ABC_CONTAINS("abc::MultiHeadAttention::forward_causal: k is [1 x 3], expected [1 x 4] (k.cols() "
                                   "must equal q.cols())"));
  REQUIRE(pool.states(10) == before);
  REQUIRE_THROWS_AS(mha.forward_causal(pool, {10, 99}, q.view(), kbad.view(), v.view(), out.out_view()), abc::config_error);
  REQUIRE_THROWS_WITH(mha.forward_causal(pool, {10, 99}, q.view(), kbad.view(), v.view(), out.out_view()),
                      ABC_CONTAINS("abc::MultiHeadAttention::forward_causal: sequence id 99 is not in the pool (add it "
                                   "first)"));
  pool.reset(20);
  REQUIRE(pool.states(20)[0].position() == 0);
  pool.drop(20);
  REQUIRE_FALSE(pool.contains(20));
  REQUIRE(pool.size() == 2);
  REQUIRE_THROWS_AS(abc::MultiHeadAttention<abc::control::SlidingWindow<T>>(abc::control::SlidingWindow<T>{2}, 4, 3),
                    abc::config_error);
  REQUIRE_THROWS_WITH(abc::MultiHeadAttention<abc::control::SlidingWindow<T>>(abc::control::SlidingWindow<T>{2}, 4, 3),
                      ABC_CONTAINS("abc::MultiHeadAttention: heads % kv_heads is 1, expected 0 (kv_heads must divide "
                                   "heads)"));
}

TEMPLATE_TEST_CASE("strided views: q, k, v sliced out of a fused QKV buffer", "[multi_head][strided]", float, double) {
  using T = TestType;
  const Index B = 2, S = 9, H = 2, d = 4;
  // [batch, seq, 3, heads, dim]: q, k, v interleaved per token.
  const auto fused = ref::random<T>(1, B * S * 3 * H * d, 7);
  const Index seq_stride = 3 * H * d, batch_stride = S * seq_stride;
  auto view = [&](Index which) {
    return abc::HeadTensor<const T>::strided(fused.data() + which * H * d, B, S, H, d, batch_stride, seq_stride, d);
  };
  abc::MultiHeadAttention<abc::control::SlidingWindow<T>> mha(abc::control::SlidingWindow<T>{3}, H, H);
  Tensor<T> out(B, S, H, d, false, 0);
  mha.forward_causal(view(0), view(1), view(2), out.out_view());
  for (Index b = 0; b < B; ++b)
    for (Index h = 0; h < H; ++h) {
      // The same rows copied out by hand: token s of head h starts at b·batch_stride + s·seq_stride.
      abc::Matrix<T> q(S, d), k(S, d), v(S, d);
      for (Index s = 0; s < S; ++s)
        for (Index j = 0; j < d; ++j) {
          const Index at = b * batch_stride + s * seq_stride + h * d + j;
          q(s, j) = fused(0, at);
          k(s, j) = fused(0, at + H * d);
          v(s, j) = fused(0, at + 2 * H * d);
        }
      REQUIRE(abc::Matrix<T>(out.view().head(b, h)) == mha.head(h).forward_causal(q, k, v));
    }
}

// A long call whose heads' rows lie apart runs on contiguous copies of a pair's heads and copies
// the outputs back: sequences of 130, 65, 64 and 33 tokens (copied), 31 (just too short to be
// copied) and 0, heads adjacent or padded apart, every form, against single-head calls on the views
// bit for bit; no entry outside the views' rows is written.
TEMPLATE_TEST_CASE("long calls on spaced heads, adjacent or padded apart: every form, bit for bit",
                   "[multi_head][strided]", float, double) {
  using T = TestType;
  using Mlp = abc::control::Mlp<T>;
  const Index H = 4, kv = 2, d = 6, dv = 5, dx = 3;
  const std::vector<Index> lengths = {130, 0, 64, 65, 33, 31};
  const Index B = Index(lengths.size()), S = 130;
  const std::vector<Mlp> controls = {Mlp(abc::Slots{4}, dx, abc::Seed{1}), Mlp(abc::Slots{4}, dx, abc::Seed{2})};
  const abc::MultiHeadAttention<Mlp> mha(controls, H, kv);
  for (const Index pad : {Index(0), Index(3)}) {
    INFO("entries between heads " << pad);
    using Spaced = SpacedHeads<T>;
    const Spaced q(H, d, pad, S, B, 1), k(kv, d, pad, S, B, 2), v(kv, dv, pad, S, B, 3), x(kv, dx, pad, S, B, 4);
    const T mark = T(-7);
    const auto blank = [&] {
      Spaced o(H, dv, pad, S, B, 5);
      std::fill(o.data.begin(), o.data.end(), mark);
      return o;
    };
    // Every entry of a view's rows written, every other entry left as it was.
    const auto only_rows_written = [&](const Spaced& o) {
      std::vector<char> inside(o.data.size(), 0);
      const auto view = o.in(lengths);
      for (Index b = 0; b < B; ++b)
        for (Index h = 0; h < H; ++h) {
          const auto m = view.head(b, h);
          for (Index s = 0; s < m.rows(); ++s)
            for (Index j = 0; j < dv; ++j) inside[std::size_t(m.data() + s * m.outerStride() + j - o.data.data())] = 1;
        }
      for (std::size_t i = 0; i < o.data.size(); ++i) REQUIRE((o.data[i] != mark) == bool(inside[i]));
    };
    Spaced out = blank(), out_c = blank(), out_p = blank(), out_r = blank();
    mha.forward(q.in(lengths), k.in(lengths), v.in(lengths), x.in(lengths), out.out(lengths));
    mha.forward_causal(q.in(lengths), k.in(lengths), v.in(lengths), x.in(lengths), out_c.out(lengths));
    typename abc::MultiHeadAttention<Mlp>::Pool pool, sources;
    std::vector<std::uint64_t> ids;
    for (Index b = 0; b < B; ++b) {
      ids.push_back(std::uint64_t(b));
      mha.add(pool, ids.back(), d, dv);
    }
    mha.forward_causal(pool, ids, q.in(lengths), k.in(lengths), v.in(lengths), x.in(lengths), out_p.out(lengths));
    mha.add_memory(sources, ids, k.in(lengths), v.in(lengths), x.in(lengths));
    mha.read(sources, ids, q.in(lengths), out_r.out(lengths));
    for (const Spaced* o : {&out, &out_c, &out_p, &out_r}) only_rows_written(*o);
    for (Index b = 0; b < B; ++b)
      for (Index h = 0; h < H; ++h) {
        INFO("sequence " << b << ", head " << h);
        const Index g = h / (H / kv);
        const abc::BoundedAttention<Mlp>& single = mha.memory(g);
        const auto qh = q.in(lengths).head(b, h), kh = k.in(lengths).head(b, g), vh = v.in(lengths).head(b, g);
        const auto xh = x.in(lengths).head(b, g);
        const abc::Matrix<T> want = single.forward(qh, kh, vh, xh);
        REQUIRE(abc::Matrix<T>(out.in(lengths).head(b, h)) == want);
        REQUIRE(abc::Matrix<T>(out_r.in(lengths).head(b, h)) == want);
        auto s = single.make_state(d, dv);
        const abc::Matrix<T> want_c = lengths[std::size_t(b)] == 0 ? abc::Matrix<T>(0, dv) : single.forward_causal(s, qh, kh, vh, xh);
        REQUIRE(abc::Matrix<T>(out_c.in(lengths).head(b, h)) == want_c);
        REQUIRE(abc::Matrix<T>(out_p.in(lengths).head(b, h)) == want_c);
        REQUIRE(pool.states(ids[std::size_t(b)])[std::size_t(g)] == s);
        const auto built = single.memory(kh, vh, xh);
        REQUIRE(sources.states(ids[std::size_t(b)])[std::size_t(g)].keys() == built.keys());
        REQUIRE(sources.states(ids[std::size_t(b)])[std::size_t(g)].values() == built.values());
      }
  }
}

TEST_CASE("a pool of bfloat16 states decodes as a float pool whose memories are rounded after each step",
          "[multi_head][bf16]") {
  using T = float;
  const Index B = 2, d = 8, steps = 12;
  const std::vector<abc::MultiHeadAttention<abc::control::Mlp<T>>::SeqId> ids{3, 7};
  // One to four query heads per memory take the bfloat16 rows in place, in one pass per matrix
  // (every head reading the entries before they are rounded); five unpack the memory. The sizes
  // give SIMD blocks of every width the passes use and entries past the last full batch (the
  // scalar path), with 4-, 8- and 16-float batches.
  struct Heads {
    Index heads, kv;
  };
  struct Size {
    Index n, dv;
  };
  for (const Heads hk : {Heads{4, 4}, Heads{4, 2}, Heads{6, 2}, Heads{4, 1}, Heads{5, 1}})
    for (const Size size : {Size{16, 6}, Size{19, 21}, Size{67, 70}}) {
      const Index H = hk.heads, kv = hk.kv, n = size.n, dv = size.dv;
      INFO("heads " << H << ", kv_heads " << kv << ", slots " << n << ", dv " << dv);
      abc::MultiHeadAttention<abc::control::Mlp<T>> mha(abc::control::Mlp<T>(abc::Slots{n}, d, abc::Seed{9}), H, kv);
      decltype(mha)::Pool packed, wide;
      for (auto id : ids) {
        mha.add(packed, id, d, dv, abc::StateStorage::bfloat16);
        mha.add(wide, id, d, dv);
      }
      REQUIRE(wide.bytes() - packed.bytes() == std::size_t(B * kv * n * (d + dv)) * 2);
      for (Index t = 0; t < steps; ++t) {
        INFO("step " << t);
        const Tensor<T> q(B, 1, H, d, false, 100 + std::uint64_t(t)), k(B, 1, kv, d, false, 200 + std::uint64_t(t)),
            v(B, 1, kv, dv, false, 300 + std::uint64_t(t));
        Tensor<T> got(B, 1, H, dv, false, 0), want(B, 1, H, dv, false, 0);
        mha.forward_causal(packed, ids, q.view(), k.view(), v.view(), got.out_view());
        mha.forward_causal(wide, ids, q.view(), k.view(), v.view(), want.out_view());
        REQUIRE(got.data == want.data);
        for (auto id : ids) {  // the float pool's memories rounded (a blob into a bfloat16 state) and widened
          std::vector<decltype(mha)::state_type> round_trip;
          for (Index m = 0; m < mha.memories(); ++m) {
            const auto& attn = mha.memory(m);
            auto r = attn.make_state(d, dv, abc::StateStorage::bfloat16);
            abc::load_state(attn, abc::save_state(attn, wide.states(id)[std::size_t(m)]), r);
            REQUIRE(r == packed.states(id)[std::size_t(m)]);
            decltype(mha)::state_type back;
            abc::load_state(attn, abc::save_state(attn, r), back);
            round_trip.push_back(std::move(back));
          }
          wide.drop(id);
          mha.add(wide, id, std::move(round_trip));
        }
      }
    }
  abc::MultiHeadAttention<abc::control::Mlp<double>> mhd(abc::control::Mlp<double>(abc::Slots{4}, d, abc::Seed{9}), 2, 2);
  decltype(mhd)::Pool pool;
  REQUIRE_THROWS_WITH(mhd.add(pool, 1, d, 6, abc::StateStorage::bfloat16),
                      "abc::MultiHeadAttention::add: storage is StateStorage::bfloat16, expected StateStorage::native "
                      "for a double state (bfloat16 storage holds float memories)");
  REQUIRE(pool.size() == 0);
}

}  // namespace multi_head_attention_test
