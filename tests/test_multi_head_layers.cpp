// SPDX-License-Identifier: MIT
// abc tests: what a transformer layer needs from MultiHeadAttention. The control input x (shared by
// all heads, or one per memory) in every form and layout; grouped-query heads reading one memory per
// key/value head; cross memories built once and read many times. Each result is checked against
// single-head BoundedAttention calls, which the float64 references of the single-head tests cover.
#include <abc/abc.hpp>
#include <abc/multi_head_attention.hpp>
#include <abc/state_io.hpp>

#include <cstdint>
#include <vector>

#include "support/catch.hpp"
#include "support/reference.hpp"

namespace multi_head_layers_test {

namespace {

using abc::Index;

enum class Layout { bshd, bhsd, packed };

// A [batch, seq, heads, dim] tensor filled from a seed, in one of the three layouts; packed
// sequences have the lengths `lengths` (the padded layouts carry them as true lengths).
template <class T>
struct Tensor {
  Layout layout;
  Index batch, seq, heads, dim;
  std::vector<Index> lengths, offsets;
  std::vector<T> data;
  Tensor(Layout l, std::vector<Index> lens, Index h, Index d, std::uint64_t seed)
      : layout(l), batch(Index(lens.size())), seq(0), heads(h), dim(d), lengths(std::move(lens)) {
    offsets.push_back(0);
    for (Index len : lengths) {
      seq = std::max(seq, len);
      offsets.push_back(offsets.back() + len);
    }
    const Index rows = layout == Layout::packed ? offsets.back() : batch * seq;
    const auto r = ref::random<T>(1, std::max<Index>(rows * h * d, 1), seed);
    data.assign(r.data(), r.data() + rows * h * d);
  }
  template <class U>
  abc::HeadTensor<U> make(U* p) const {
    switch (layout) {
      case Layout::bshd: return abc::HeadTensor<U>::bshd(p, batch, seq, heads, dim, lengths);
      case Layout::bhsd: return abc::HeadTensor<U>::bhsd(p, batch, heads, seq, dim, lengths);
      case Layout::packed: break;
    }
    return abc::HeadTensor<U>::packed(p, offsets, heads, dim);
  }
  abc::HeadTensor<const T> view() const { return make<const T>(data.data()); }
  abc::HeadTensor<T> out() { return make<T>(data.data()); }
};

const char* name(Layout l) { return l == Layout::bshd ? "bshd" : l == Layout::bhsd ? "bhsd" : "packed"; }

// Per-head W_φ of width dx: controls for `count` memories.
template <class T>
std::vector<abc::control::Mlp<T>> mlps(Index count, Index dx, Index n) {
  std::vector<abc::control::Mlp<T>> c;
  for (Index m = 0; m < count; ++m) c.emplace_back(abc::Slots{n}, dx, abc::Seed(std::uint64_t(40 + m)));
  return c;
}

// Whether out's head h of sequence b equals `want` bit for bit, or to a few ulps when the control
// logits of all memories were formed as one product (a wider GEMM may round a logit differently).
template <class T, class A, class B>
void require_equal(const A& got, const B& want, bool exact) {
  REQUIRE(got.rows() == want.rows());
  REQUIRE(got.cols() == want.cols());
  if (exact) {
    REQUIRE(abc::Matrix<T>(got) == abc::Matrix<T>(want));
  } else {
    const double tol = std::is_same<T, float>::value ? 1e-5 : 1e-13;
    for (Index i = 0; i < got.rows(); ++i)
      for (Index j = 0; j < got.cols(); ++j) REQUIRE(double(got(i, j)) == Approx(double(want(i, j))).margin(tol).epsilon(tol));
  }
}

}  // namespace

TEMPLATE_TEST_CASE("the control input reaches every multi-head form: shared and per memory, every layout, GQA",
                   "[multi_head][control_input]", float, double) {
  using T = TestType;
  using Mlp = abc::control::Mlp<T>;
  const Index H = 4, d = 6, dv = 5, dx = 7, n = 5;
  // 40 tokens: long enough that a layout with a head's rows apart (bshd, packed) runs on copies.
  const std::vector<Index> lengths = {13, 1, 0, 40};
  for (Layout layout : {Layout::bshd, Layout::bhsd, Layout::packed})
    for (Index kv : {Index(4), Index(2), Index(1)})
      for (bool per_query_head : {false, true})
        for (bool shared_x : {true, false}) {
          const Index memories = per_query_head ? H : kv;
          INFO(name(layout) << ", kv_heads " << kv << ", controls per " << (per_query_head ? "query" : "kv")
                            << " head, x " << (shared_x ? "shared" : "per memory"));
          const auto controls = mlps<T>(memories, dx, n);
          const abc::MultiHeadAttention<Mlp> mha(controls, H, kv);
          REQUIRE(mha.memories() == memories);
          Tensor<T> q(layout, lengths, H, d, 1), k(layout, lengths, kv, d, 2), v(layout, lengths, kv, dv, 3);
          Tensor<T> x(layout, lengths, shared_x ? 1 : memories, dx, 4);
          Tensor<T> out(layout, lengths, H, dv, 5), out_c(layout, lengths, H, dv, 6);
          mha.forward(q.view(), k.view(), v.view(), x.view(), out.out());
          mha.forward_causal(q.view(), k.view(), v.view(), x.view(), out_c.out());
          // Prefill in a pool, then three batched decode steps, each with its own x row.
          typename abc::MultiHeadAttention<Mlp>::Pool pool;
          std::vector<std::uint64_t> ids;
          for (Index b = 0; b < Index(lengths.size()); ++b) {
            ids.push_back(std::uint64_t(100 + b));
            mha.add(pool, ids.back(), d, dv);
          }
          Tensor<T> out_p(layout, lengths, H, dv, 7);
          mha.forward_causal(pool, ids, q.view(), k.view(), v.view(), x.view(), out_p.out());
          // The exact path: a control input of its own per memory is each head's own x. A shared x is
          // projected once for all memories.
          const bool exact = !shared_x;
          for (Index b = 0; b < Index(lengths.size()); ++b)
            for (Index h = 0; h < H; ++h) {
              const Index m = per_query_head ? h : h / (H / kv), g = h / (H / kv);
              const abc::BoundedAttention<Mlp> single{controls[std::size_t(m)]};
              const auto qh = q.view().head(b, h), kh = k.view().head(b, g), vh = v.view().head(b, g);
              const auto xh = x.view().head(b, shared_x ? 0 : m);
              INFO("sequence " << b << ", head " << h);
              {
                INFO("forward");
                require_equal<T>(out.view().head(b, h), single.forward(qh, kh, vh, xh), exact);
              }
              {
                INFO("forward_causal");
                require_equal<T>(out_c.view().head(b, h), single.forward_causal(qh, kh, vh, xh), exact);
              }
              INFO("prefill");  // of one token: the step kernel, as a decoder runs
              if (qh.rows() == 1) {
                auto s = single.make_state(d, dv);
                require_equal<T>(out_p.view().head(b, h), single.step(s, qh.row(0).transpose(), kh.row(0).transpose(),
                                                                      vh.row(0).transpose(), xh.row(0).transpose())
                                                              .transpose(),
                                 exact);
              } else {
                require_equal<T>(out_p.view().head(b, h), single.forward_causal(qh, kh, vh, xh), exact);
              }
            }
          // Decode steps: every sequence one token; the pool matches single-head states advanced alike.
          std::vector<std::vector<abc::State<T>>> solo(lengths.size());
          for (Index b = 0; b < Index(lengths.size()); ++b)
            for (Index h = 0; h < H; ++h) {
              const Index m = per_query_head ? h : h / (H / kv), g = h / (H / kv);
              const abc::BoundedAttention<Mlp> single{controls[std::size_t(m)]};
              solo[std::size_t(b)].push_back(single.make_state(d, dv));
              single.forward_causal(solo[std::size_t(b)].back(), q.view().head(b, h), k.view().head(b, g),
                                    v.view().head(b, g), x.view().head(b, shared_x ? 0 : m));
            }
          const std::vector<Index> ones(lengths.size(), 1);
          for (std::uint64_t t = 0; t < 3; ++t) {
            Tensor<T> qs(layout, ones, H, d, 10 + t), ks(layout, ones, kv, d, 20 + t), vs(layout, ones, kv, dv, 30 + t);
            Tensor<T> xs(layout, ones, shared_x ? 1 : memories, dx, 40 + t), os(layout, ones, H, dv, 0);
            mha.forward_causal(pool, ids, qs.view(), ks.view(), vs.view(), xs.view(), os.out());
            for (Index b = 0; b < Index(lengths.size()); ++b)
              for (Index h = 0; h < H; ++h) {
                const Index m = per_query_head ? h : h / (H / kv), g = h / (H / kv);
                const abc::BoundedAttention<Mlp> single{controls[std::size_t(m)]};
                const abc::Vector<T> want =
                    single.step(solo[std::size_t(b)][std::size_t(h)], qs.view().head(b, h).row(0).transpose(),
                                ks.view().head(b, g).row(0).transpose(), vs.view().head(b, g).row(0).transpose(),
                                xs.view().head(b, shared_x ? 0 : m).row(0).transpose());
                require_equal<T>(os.view().head(b, h), want.transpose(), exact);
              }
          }
          if (exact)
            for (Index b = 0; b < Index(lengths.size()); ++b)
              for (Index h = 0; h < H; ++h)
                REQUIRE(pool.states(ids[std::size_t(b)])[std::size_t(per_query_head ? h : h / (H / kv))] ==
                        solo[std::size_t(b)][std::size_t(h)]);
        }
}

TEST_CASE("a shared control input is checked by name; one of another head count is refused", "[multi_head][control_input][errors]") {
  using Mlp = abc::control::Mlp<float>;
  const Index H = 4, kv = 2, d = 4, dx = 3;
  const abc::MultiHeadAttention<Mlp> mha(mlps<float>(kv, dx, 3), H, kv);
  Tensor<float> q(Layout::bshd, {5}, H, d, 1), k(Layout::bshd, {5}, kv, d, 2), v(Layout::bshd, {5}, kv, d, 3);
  Tensor<float> x3(Layout::bshd, {5}, 3, dx, 4), xw(Layout::bshd, {5}, 1, dx + 1, 5), out(Layout::bshd, {5}, H, d, 6);
  const auto before = out.data;
  REQUIRE_THROWS_WITH(mha.forward(q.view(), k.view(), v.view(), x3.view(), out.out()),
                      ABC_CONTAINS("abc::MultiHeadAttention::forward: x.heads() is 3, expected 1 (one control input "
                                   "shared by all heads) or 2 (one per memory: per key/value head, as the controls are)"));
  REQUIRE_THROWS_WITH(mha.forward_causal(q.view(), k.view(), v.view(), xw.view(), out.out()),
                      ABC_CONTAINS("abc::MultiHeadAttention::forward_causal: x is [5 x 4], expected [5 x 3]"));
  REQUIRE(mha.validate(q.view(), k.view(), v.view(), x3.view(), out.out()) == abc::Status::shape_mismatch);
  REQUIRE(out.data == before);
  // Without x, Mlp reads the keys: their width must be W_φ's.
  REQUIRE_THROWS_WITH(mha.forward(q.view(), k.view(), v.view(), out.out()), ABC_CONTAINS("k is [5 x 4], expected [5 x 3]"));
  REQUIRE_THROWS_WITH(abc::MultiHeadAttention<Mlp>(mlps<float>(3, dx, 3), H, kv),
                      ABC_CONTAINS("abc::MultiHeadAttention: controls.size() is 3, expected 2 (one per key/value head) "
                                   "or 4 (one per query head)"));
}

TEMPLATE_TEST_CASE("grouped-query heads share their key/value head's memory: outputs as per head, state / group size",
                   "[multi_head][gqa]", float, double) {
  using T = TestType;
  using Window = abc::control::SlidingWindow<T>;
  const Index H = 8, kv = 2, d = 16, dv = 16, n = 32, G = H / kv;
  const std::vector<Index> lengths = {40, 7};
  const abc::MultiHeadAttention<Window> shared(Window{n}, H, kv);
  const abc::MultiHeadAttention<Window> per_head(std::vector<Window>(std::size_t(H), Window{n}), kv);
  REQUIRE(shared.memories() == kv);
  REQUIRE(per_head.memories() == H);
  Tensor<T> q(Layout::bshd, lengths, H, d, 1), k(Layout::bshd, lengths, kv, d, 2), v(Layout::bshd, lengths, kv, dv, 3);
  Tensor<T> a(Layout::bshd, lengths, H, dv, 4), b(Layout::bshd, lengths, H, dv, 4);  // equal padding
  typename abc::MultiHeadAttention<Window>::Pool pa, pb;
  const std::vector<std::uint64_t> ids = {1, 2};
  for (auto id : ids) {
    shared.add(pa, id, d, dv);
    per_head.add(pb, id, d, dv);
  }
  shared.forward_causal(pa, ids, q.view(), k.view(), v.view(), a.out());
  per_head.forward_causal(pb, ids, q.view(), k.view(), v.view(), b.out());
  for (Index s = 0; s < 2; ++s)
    for (Index h = 0; h < H; ++h) {
      INFO("sequence " << s << " head " << h);
      const auto want = shared.head(h).forward_causal(q.view().head(s, h), k.view().head(s, h / G), v.view().head(s, h / G));
      REQUIRE(abc::Matrix<T>(b.view().head(s, h)) == want);
      REQUIRE(abc::Matrix<T>(a.view().head(s, h)) == want);
    }
  REQUIRE(a.data == b.data);
  for (std::uint64_t t = 0; t < 4; ++t) {  // decode steps (the step kernel with G reading heads)
    const std::vector<Index> ones = {1, 1};
    Tensor<T> qs(Layout::bhsd, ones, H, d, 10 + t), ks(Layout::bhsd, ones, kv, d, 20 + t), vs(Layout::bhsd, ones, kv, dv, 30 + t);
    Tensor<T> oa(Layout::bhsd, ones, H, dv, 0), ob(Layout::bhsd, ones, H, dv, 0);
    shared.forward_causal(pa, ids, qs.view(), ks.view(), vs.view(), oa.out());
    per_head.forward_causal(pb, ids, qs.view(), ks.view(), vs.view(), ob.out());
    REQUIRE(oa.data == ob.data);
  }
  for (auto id : ids) {
    REQUIRE(pa.states(id).size() == std::size_t(kv));
    for (Index h = 0; h < H; ++h) REQUIRE(pa.states(id)[std::size_t(h / G)] == pb.states(id)[std::size_t(h)]);
  }
  // The memories (K̃, Ṽ, normaliser, positions) shrink by the group size; only each memory's step
  // scratch grows, by one score row per extra reading head.
  const double ratio = double(pb.bytes()) / double(pa.bytes());
  INFO("pool bytes: per query head " << pb.bytes() << ", shared " << pa.bytes());
  REQUIRE(ratio > 0.9 * double(G));
  REQUIRE(ratio <= double(G));
  // The non-causal and causal forms agree too, for a linear-readout control (RFA) as well.
  Tensor<T> c(Layout::bshd, lengths, H, dv, 6), e(Layout::bshd, lengths, H, dv, 6);
  shared.forward(q.view(), k.view(), v.view(), c.out());
  per_head.forward(q.view(), k.view(), v.view(), e.out());
  REQUIRE(c.data == e.data);
  using Rfa = abc::control::RandomFeature<T>;
  const Rfa rfa(abc::feature::RandomFourier<T>(abc::feature::Projection<T>(12, d, abc::Seed{3}).draw()));
  const abc::MultiHeadAttention<Rfa> rs(rfa, H, kv), rp(std::vector<Rfa>(std::size_t(H), rfa), kv);
  rs.forward_causal(q.view(), k.view(), v.view(), c.out());
  rp.forward_causal(q.view(), k.view(), v.view(), e.out());
  REQUIRE(c.data == e.data);
  typename abc::MultiHeadAttention<Rfa>::Pool ra, rb;
  for (auto id : ids) {
    rs.add(ra, id, d, dv);
    rp.add(rb, id, d, dv);
  }
  rs.forward_causal(ra, ids, q.view(), k.view(), v.view(), c.out());
  rp.forward_causal(rb, ids, q.view(), k.view(), v.view(), e.out());
  REQUIRE(c.data == e.data);
  Tensor<T> qs(Layout::bshd, {1, 1}, H, d, 50), ks(Layout::bshd, {1, 1}, kv, d, 51), vs(Layout::bshd, {1, 1}, kv, dv, 52);
  Tensor<T> oa(Layout::bshd, {1, 1}, H, dv, 0), ob(Layout::bshd, {1, 1}, H, dv, 0);
  rs.forward_causal(ra, ids, qs.view(), ks.view(), vs.view(), oa.out());
  rp.forward_causal(rb, ids, qs.view(), ks.view(), vs.view(), ob.out());
  REQUIRE(oa.data == ob.data);
}

TEMPLATE_TEST_CASE("a cross memory is built once and read many times: read equals forward", "[memory]", float, double) {
  using T = TestType;
  const Index M = 11, N = 300, d = 8, dv = 6;
  const auto q = ref::random<T>(M, d, 1), k = ref::random<T>(N, d, 2), v = ref::random<T>(N, dv, 3);
  const auto x = ref::random<T>(N, 5, 4);
  auto same = [&](const auto& attn) {
    const auto mem = attn.memory(k, v);
    REQUIRE(mem.position() == N);
    REQUIRE(attn.read(mem, q) == attn.forward(q, k, v));
    // Reads change nothing, and one query at a time reads what a block of queries does, to rounding
    // (a product of one row is not blocked as one of many).
    const auto copy = mem;
    const abc::Matrix<T> all = attn.forward(q, k, v);
    for (Index i = 0; i < M; ++i) {
      const abc::Matrix<T> one = attn.read(mem, q.row(i));
      for (Index j = 0; j < dv; ++j) REQUIRE(double(one(0, j)) == Approx(double(all(i, j))).margin(1e-5));
    }
    REQUIRE(mem == copy);
    // Saved and loaded, it reads the same.
    abc::State<T> loaded;
    abc::load_state(attn, abc::save_state(attn, mem), loaded);
    REQUIRE(attn.read(loaded, q) == attn.forward(q, k, v));
  };
  same(abc::BoundedAttention<abc::control::SlidingWindow<T>>{abc::control::SlidingWindow<T>{16}});
  same(abc::BoundedAttention<abc::control::Mlp<T>>{abc::control::Mlp<T>(abc::Slots{12}, d, abc::Seed{5})});
  same(abc::BoundedAttention<abc::control::Mlp<T>>{
      abc::control::Mlp<T>(abc::Slots{12}, d, abc::Seed{5}, abc::control::Activation::exp, abc::control::Normalization::per_token)});
  same(abc::BoundedAttention<abc::control::Linformer<T>>{abc::control::Linformer<T>(abc::Slots{8}, 512, abc::Seed{6})});
  same(abc::BoundedAttention<abc::control::RandomFeature<T>>{
      abc::control::RandomFeature<T>(abc::feature::RandomFourier<T>(abc::feature::Projection<T>(16, d, abc::Seed{7}).draw()))});
  same(abc::BoundedAttention<abc::control::Cluster<T>>{abc::control::Cluster<T>(abc::Slots{6}, d, abc::Seed{8})});
  // With a control input.
  const abc::BoundedAttention<abc::control::Mlp<T>> mlp{abc::control::Mlp<T>(abc::Slots{12}, 5, abc::Seed{9})};
  REQUIRE(mlp.read(mlp.memory(k, v, x), q) == mlp.forward(q, k, v, x));
  // A decode state can be read without being advanced: what the next step's read would see of it.
  abc::State<T> s = mlp.make_state(d, dv);
  mlp.forward_causal(s, k, k, v, x);
  // Prefix normalisation: the causal state after N is the memory (to rounding: other chunk sizes).
  const abc::Matrix<T> from_state = mlp.read(s, q), from_memory = mlp.read(mlp.memory(k, v, x), q);
  for (Index i = 0; i < M; ++i)
    for (Index j = 0; j < dv; ++j) REQUIRE(double(from_state(i, j)) == Approx(double(from_memory(i, j))).margin(1e-5));
  REQUIRE(s.position() == N);
}

TEST_CASE("memory and read refuse bad input by name and change nothing", "[memory][errors]") {
  using W = abc::control::SlidingWindow<float>;
  const abc::BoundedAttention<W> attn{W{4}};
  const auto k = ref::random<float>(9, 4, 1), v = ref::random<float>(9, 3, 2);
  REQUIRE_THROWS_WITH(attn.memory(k, ref::random<float>(8, 3, 2)),
                      ABC_CONTAINS("abc::BoundedAttention::memory: v is [8 x 3], expected [9 x 3]"));
  REQUIRE_THROWS_WITH(attn.memory(abc::Matrix<float>(9, 0), v),
                      ABC_CONTAINS("abc::BoundedAttention::memory: k.cols() is 0, expected at least 1"));
  const auto mem = attn.memory(k, v);
  REQUIRE_THROWS_WITH(attn.read(mem, ref::random<float>(2, 5, 3)),
                      ABC_CONTAINS("abc::BoundedAttention::read: memory.keys() is [4 x 4], expected [4 x 5]"));
  abc::Matrix<float> bad = ref::random<float>(2, 4, 3);
  bad(1, 2) = std::numeric_limits<float>::infinity();
  REQUIRE_THROWS_WITH(attn.read(mem, bad),
                      ABC_CONTAINS("q holds a non-finite value at row 1, column 2, expected finite values"));
  abc::Matrix<float> out(3, 3);
  REQUIRE_THROWS_WITH(attn.read_into(mem, ref::random<float>(2, 4, 3), out),
                      ABC_CONTAINS("abc::BoundedAttention::read: out is [3 x 3], expected [2 x 3]"));
  REQUIRE_THROWS_WITH(attn.read(abc::State<float>{}, ref::random<float>(2, 4, 3)),
                      ABC_CONTAINS("memory.keys() is [0 x 0], expected [4 x 4]"));
  const abc::BoundedAttention<abc::control::Identity<float>> other{abc::control::Identity<float>{4}};
  REQUIRE_THROWS_WITH(attn.read(other.make_state(4, 3), ref::random<float>(2, 4, 3)),
                      ABC_CONTAINS("memory comes from abc::control::Identity"));
  REQUIRE(attn.validate_read(mem, ref::random<float>(2, 5, 3)) == abc::Status::shape_mismatch);
}

TEMPLATE_TEST_CASE("multi-head cross memories: add_memory then read equals forward, GQA and the control input",
                   "[multi_head][memory]", float, double) {
  using T = TestType;
  using Mlp = abc::control::Mlp<T>;
  const Index H = 4, kv = 2, d = 6, dv = 5, dx = 7;
  const std::vector<Index> src = {30, 1, 17}, tgt = {4, 9, 1};
  const abc::MultiHeadAttention<Mlp> mha(mlps<T>(kv, dx, 6), H, kv);
  for (Layout layout : {Layout::bshd, Layout::packed}) {
    Tensor<T> k(layout, src, kv, d, 1), v(layout, src, kv, dv, 2), x(layout, src, kv, dx, 3);
    Tensor<T> q(layout, tgt, H, d, 4), out(layout, tgt, H, dv, 5);
    typename abc::MultiHeadAttention<Mlp>::Pool pool;
    const std::vector<std::uint64_t> ids = {3, 1, 2};
    mha.add_memory(pool, ids, k.view(), v.view(), x.view());
    const auto before = pool.states(3);
    mha.read(pool, ids, q.view(), out.out());
    REQUIRE(pool.states(3) == before);
    for (Index b = 0; b < 3; ++b)
      for (Index h = 0; h < H; ++h) {
        const Index g = h / (H / kv);
        const abc::Matrix<T> want =
            mha.memory(g).forward(q.view().head(b, h), k.view().head(b, g), v.view().head(b, g), x.view().head(b, g));
        REQUIRE(abc::Matrix<T>(out.view().head(b, h)) == want);
      }
    REQUIRE_THROWS_WITH(mha.add_memory(pool, {1}, k.view(), v.view(), x.view()),
                        ABC_CONTAINS("abc::MultiHeadAttention::add_memory: ids.size() is 1, expected 3"));
    REQUIRE_THROWS_WITH(mha.add_memory(pool, {9, 1, 8}, k.view(), v.view(), x.view()),
                        ABC_CONTAINS("sequence id 1 is already in the pool (drop it first)"));
    REQUIRE_FALSE(pool.contains(9));
    REQUIRE_THROWS_WITH(mha.read(pool, {3, 1, 7}, q.view(), out.out()),
                        ABC_CONTAINS("abc::MultiHeadAttention::read: sequence id 7 is not in the pool"));
  }
}

TEMPLATE_TEST_CASE("GSA slot gates through the multi-head forms: the shared input projected once, GQA",
                   "[multi_head][control_input][gsa]", float, double) {
  using T = TestType;
  using Gsa = abc::control::SlotGates<T>;
  const Index H = 4, kv = 2, d = 6, dv = 5, dx = 9, n = 7;
  const std::vector<Index> lengths = {70, 1, 12};
  std::vector<Gsa> controls;
  for (Index m = 0; m < kv; ++m) controls.emplace_back(abc::Slots{n}, dx, abc::Seed(std::uint64_t(60 + m)));
  const abc::MultiHeadAttention<Gsa> mha(controls, H, kv);
  for (bool shared_x : {true, false}) {
    INFO("x " << (shared_x ? "shared" : "per memory"));
    Tensor<T> q(Layout::bshd, lengths, H, d, 1), k(Layout::bshd, lengths, kv, d, 2), v(Layout::bshd, lengths, kv, dv, 3);
    Tensor<T> x(Layout::bshd, lengths, shared_x ? 1 : kv, dx, 4), out(Layout::bshd, lengths, H, dv, 5);
    Tensor<T> out_c(Layout::bshd, lengths, H, dv, 6);
    mha.forward(q.view(), k.view(), v.view(), x.view(), out.out());
    mha.forward_causal(q.view(), k.view(), v.view(), x.view(), out_c.out());
    for (Index b = 0; b < 3; ++b)
      for (Index h = 0; h < H; ++h) {
        const Index g = h / (H / kv);
        const abc::BoundedAttention<Gsa> single{controls[std::size_t(g)]};
        const auto qh = q.view().head(b, h), kh = k.view().head(b, g), vh = v.view().head(b, g);
        const auto xh = x.view().head(b, shared_x ? 0 : g);
        require_equal<T>(out.view().head(b, h), single.forward(qh, kh, vh, xh), !shared_x);
        require_equal<T>(out_c.view().head(b, h), single.forward_causal(qh, kh, vh, xh), !shared_x);
      }
  }
}

}  // namespace multi_head_layers_test
