// SPDX-License-Identifier: MIT
// abc tests: the contract of MultiHeadAttention, its Pool and HeadTensor. Nothing changes when a
// call fails (duplicate or unknown sequence ids, a pool filled by another model, bad shapes); no
// exception escapes a parallel region; HeadTensor refuses negative sizes and sizes that overflow
// by name; messages about counts print counts, not shapes.
#include <abc/abc.hpp>
#include <abc/multi_head_attention.hpp>

#include <cstdint>
#include <functional>
#include <string>
#include <limits>
#include <type_traits>
#include <utility>
#include <vector>

#include "support/catch.hpp"
#include "support/reference.hpp"

namespace multi_head_contract_test {

namespace {

using abc::Index;
using Mha = abc::MultiHeadAttention<abc::control::SlidingWindow<float>>;
using HT = abc::HeadTensor<const float>;
using HTO = abc::HeadTensor<float>;

std::vector<float> filled(Index n, std::uint64_t seed) {
  const auto r = ref::random<float>(1, n, seed);
  return std::vector<float>(r.data(), r.data() + n);
}

template <class Pool>
std::vector<std::vector<abc::State<float>>> snapshot(const Pool& pool, const std::vector<std::uint64_t>& ids) {
  std::vector<std::vector<abc::State<float>>> s;
  for (auto id : ids) s.push_back(pool.states(id));
  return s;
}

}  // namespace

TEST_CASE("a pooled call with a sequence id twice is refused before anything changes", "[multi_head][pool][errors]") {
  const Index H = 2, d = 4, S = 3;
  const Mha mha(abc::control::SlidingWindow<float>{4}, H, H);
  Mha::Pool pool;
  mha.add(pool, 7, d, d);
  mha.add(pool, 8, d, d);
  const auto before = snapshot(pool, {7, 8});
  // Two multi-token rows for sequence 7: each row's checks alone pass against position 0.
  auto q = filled(2 * S * H * d, 1), out = std::vector<float>(std::size_t(2 * S * H * d), -1.0f);
  const auto view = HT::bshd(q.data(), 2, S, H, d);
  const auto out_view = HTO::bshd(out.data(), 2, S, H, d);
  const auto out_before = out;
  REQUIRE_THROWS_AS(mha.forward_causal(pool, {7, 7}, view, view, view, out_view), abc::config_error);
  REQUIRE_THROWS_WITH(mha.forward_causal(pool, {7, 7}, view, view, view, out_view),
                      ABC_CONTAINS("abc::MultiHeadAttention::forward_causal: ids holds sequence id 7 twice, expected "
                                   "distinct ids"));
  REQUIRE(snapshot(pool, {7, 8}) == before);
  REQUIRE(out == out_before);
  // One token each (a batched decode step): the same.
  const auto step = HT::bshd(q.data(), 2, 1, H, d);
  REQUIRE_THROWS_WITH(mha.forward_causal(pool, {8, 8}, step, step, step, HTO::bshd(out.data(), 2, 1, H, d)),
                      ABC_CONTAINS("ids holds sequence id 8 twice"));
  REQUIRE(snapshot(pool, {7, 8}) == before);
  // An unknown id, after a valid one: nothing changes either.
  REQUIRE_THROWS_WITH(mha.forward_causal(pool, {7, 9}, step, step, step, HTO::bshd(out.data(), 2, 1, H, d)),
                      ABC_CONTAINS("sequence id 9 is not in the pool"));
  REQUIRE(snapshot(pool, {7, 8}) == before);
  REQUIRE(mha.validate(pool, {7, 7}, view, view, view, out_view) == abc::Status::bad_config);
  REQUIRE(mha.validate(pool, {7, 8}, view, view, view, out_view) == abc::Status::ok);
}

TEST_CASE("a pool filled by another model is refused, not read out of bounds", "[multi_head][pool][errors]") {
  const Index d = 4;
  const Mha two(abc::control::SlidingWindow<float>{4}, 2, 2), four(abc::control::SlidingWindow<float>{4}, 4, 4);
  Mha::Pool pool;
  two.add(pool, 1, d, d);
  const auto before = pool.states(1);
  auto q = filled(4 * d, 2), out = std::vector<float>(std::size_t(4 * d));
  const auto view = HT::bshd(q.data(), 1, 1, 4, d);
  REQUIRE_THROWS_AS(four.forward_causal(pool, {1}, view, view, view, HTO::bshd(out.data(), 1, 1, 4, d)),
                    abc::config_error);
  REQUIRE_THROWS_WITH(four.forward_causal(pool, {1}, view, view, view, HTO::bshd(out.data(), 1, 1, 4, d)),
                      ABC_CONTAINS("pool sequence 1 holds 2 states, expected 4"));
  REQUIRE(pool.states(1) == before);
  // The pool hands out its states read-only: a caller cannot resize or replace them.
  static_assert(std::is_const<std::remove_reference_t<decltype(pool.states(1))>>::value,
                "Pool::states must not be mutable");
}

TEST_CASE("counts are reported as counts", "[multi_head][errors]") {
  const Index d = 4;
  const Mha mha(abc::control::SlidingWindow<float>{4}, 4, 2);
  auto q = filled(3 * d, 3), out = std::vector<float>(std::size_t(3 * d));
  const auto three = HT::bshd(q.data(), 1, 1, 3, d);
  REQUIRE_THROWS_AS(mha.forward(three, three, three, HTO::bshd(out.data(), 1, 1, 3, d)), abc::shape_error);
  REQUIRE_THROWS_WITH(mha.forward(three, three, three, HTO::bshd(out.data(), 1, 1, 3, d)),
                      ABC_CONTAINS("abc::MultiHeadAttention::forward: q.heads() is 3, expected 4 (one per query head)"));
  Mha::Pool pool;
  REQUIRE_THROWS_WITH(pool.states(7), ABC_CONTAINS("abc::MultiHeadAttention::Pool: sequence id 7 is not in the pool"));
  REQUIRE_THROWS_WITH(Mha(abc::control::SlidingWindow<float>{4}, 4, 3),
                      ABC_CONTAINS("heads % kv_heads is 1, expected 0 (kv_heads must divide heads)"));
}

TEST_CASE("a head's error is reported with the head's message, and nothing was written", "[multi_head][errors]") {
  const Index H = 2, d = 4, S = 3;
  const Mha mha(abc::control::SlidingWindow<float>{4}, H, H);
  auto q = filled(S * H * d, 4), out = std::vector<float>(std::size_t(S * H * d), -2.0f);
  q[std::size_t(5 * d + 1)] = std::numeric_limits<float>::quiet_NaN();  // token 2, head 1
  const auto view = HT::bshd(q.data(), 1, S, H, d);
  const auto out_before = out;
  REQUIRE_THROWS_AS(mha.forward_causal(view, view, view, HTO::bshd(out.data(), 1, S, H, d)), abc::config_error);
  REQUIRE_THROWS_WITH(mha.forward_causal(view, view, view, HTO::bshd(out.data(), 1, S, H, d)),
                      ABC_CONTAINS("abc::MultiHeadAttention::forward_causal: q holds a non-finite value at row 2, column 1"));
  REQUIRE(out == out_before);
}

// Long calls check their (sequence, memory) pairs on threads (with ABC_WITH_OPENMP): the error
// reported is still the first in (sequence, memory) order, as a serial loop finds it, however the
// pairs fall to threads, and nothing is written.
TEST_CASE("of several bad pairs, a long call reports the first, and writes nothing", "[multi_head][errors]") {
  const Index B = 5, H = 4, G = 2, d = 16, S = 700;  // S × d × (2 + 2) ≥ 2^14 entries a pair: spread
  const Mha mha(abc::control::SlidingWindow<float>{8}, H, G);
  auto q = filled(B * S * H * d, 11), k = filled(B * S * G * d, 12), out = std::vector<float>(q.size(), -2.0f);
  const auto nan = std::numeric_limits<float>::quiet_NaN();
  const auto at = [&](Index b, Index t, Index h, Index heads, Index j) { return std::size_t(((b * S + t) * heads + h) * d + j); };
  k[at(4, 9, 0, G, 3)] = nan;   // sequence 4, memory 0
  q[at(3, 600, 3, H, 5)] = nan;  // sequence 3, memory 1 (query head 3, the second of its group)
  k[at(1, 13, 1, G, 2)] = nan;   // sequence 1, memory 1
  q[at(1, 400, 1, H, 7)] = nan;  // sequence 1, memory 0 (query head 1 is its second): the first
  const auto qv = HT::bshd(q.data(), B, S, H, d), kv = HT::bshd(k.data(), B, S, G, d);
  const auto out_before = out;
  for (int round = 0; round < 3; ++round) {  // the same answer every time
    REQUIRE_THROWS_WITH(mha.forward_causal(qv, kv, kv, HTO::bshd(out.data(), B, S, H, d)),
                        ABC_CONTAINS("abc::MultiHeadAttention::forward_causal: q holds a non-finite value at row 400, column 7"));
    REQUIRE(mha.validate_causal(qv, kv, kv, HTO::bshd(out.data(), B, S, H, d)) == abc::Status::non_finite);
  }
  q[at(1, 400, 1, H, 7)] = 0;  // now sequence 1's memory 1 comes first
  REQUIRE_THROWS_WITH(mha.forward_causal(qv, kv, kv, HTO::bshd(out.data(), B, S, H, d)),
                      ABC_CONTAINS("abc::MultiHeadAttention::forward_causal: k holds a non-finite value at row 13, column 2"));
  // A long call whose heads' rows lie apart finds its inputs finite a block of rows at a time: a
  // value in a later block, or in the last and partial one, is found as well as one in the first.
  k[at(1, 13, 1, G, 2)] = 0;  // sequence 1 is finite now; sequence 3's value lies in its fifth block
  REQUIRE_THROWS_WITH(mha.forward_causal(qv, kv, kv, HTO::bshd(out.data(), B, S, H, d)),
                      ABC_CONTAINS("abc::MultiHeadAttention::forward_causal: q holds a non-finite value at row 600, column 5"));
  q[at(2, S - 1, 2, H, 0)] = -std::numeric_limits<float>::infinity();  // sequence 2's last row
  REQUIRE_THROWS_WITH(mha.forward_causal(qv, kv, kv, HTO::bshd(out.data(), B, S, H, d)),
                      ABC_CONTAINS("abc::MultiHeadAttention::forward_causal: q holds a non-finite value at row 699, column 0"));
  REQUIRE(mha.validate_causal(qv, kv, kv, HTO::bshd(out.data(), B, S, H, d)) == abc::Status::non_finite);
  REQUIRE(out == out_before);
}

// A batched decode step checks each (sequence, memory) pair's own heads (with ABC_WITH_OPENMP on the
// thread that then runs the pair, in the call's one parallel region): a non-finite entry in any
// later sequence's query heads, keys, values or control input is found, the first pair in
// (sequence, memory) order is the one reported, and no state or output has changed.
TEST_CASE("a batched decode step reports the first bad pair of many, and writes nothing", "[multi_head][pool][errors]") {
  using Mlp = abc::control::Mlp<float>;
  using Layer = abc::MultiHeadAttention<Mlp>;
  const Index B = 6, H = 4, G = 2, d = 8, dx = 5;
  const Layer mha(Mlp(abc::Slots{3}, dx, abc::Seed{3}), H, G);  // memories share x: logits projected once
  Layer::Pool pool;
  std::vector<std::uint64_t> ids;
  for (Index b = 0; b < B; ++b) ids.push_back(std::uint64_t(10 + b)), mha.add(pool, ids.back(), d, d);
  auto q = filled(B * H * d, 31), k = filled(B * G * d, 32), v = filled(B * G * d, 33), x = filled(B * dx, 34);
  auto out = std::vector<float>(q.size(), -4.0f);
  const auto qv = HT::bshd(q.data(), B, 1, H, d), kv = HT::bshd(k.data(), B, 1, G, d), vv = HT::bshd(v.data(), B, 1, G, d);
  const auto xv = HT::bshd(x.data(), B, 1, 1, dx);
  const auto ov = HTO::bshd(out.data(), B, 1, H, d);
  const std::string where = "abc::MultiHeadAttention::forward_causal: ";
  mha.forward_causal(pool, ids, qv, kv, vv, xv, ov);  // a first token, so the states are not empty
  const auto before = snapshot(pool, ids);
  const auto out_before = out;
  const auto nan = std::numeric_limits<float>::quiet_NaN();
  const auto refused = [&](const std::string& message) {
    for (int round = 0; round < 3; ++round) {  // the same answer every time
      REQUIRE_THROWS_WITH(mha.forward_causal(pool, ids, qv, kv, vv, xv, ov), ABC_CONTAINS(where + message));
      REQUIRE(mha.validate(pool, ids, qv, kv, vv, xv, ov) == abc::Status::non_finite);
    }
    REQUIRE(snapshot(pool, ids) == before);
    REQUIRE(out == out_before);
  };
  v[std::size_t((5 * G + 1) * d + 2)] = nan;  // sequence 5, memory 1
  refused("v holds a non-finite value at row 0, column 2");
  q[std::size_t((4 * H + 3) * d + 6)] = nan;  // sequence 4, query head 3: memory 1's second head
  refused("q holds a non-finite value at row 0, column 6");
  x[std::size_t(3 * dx + 4)] = std::numeric_limits<float>::infinity();  // sequence 3, read by both memories
  refused("x holds a non-finite value at row 0, column 4");
  k[std::size_t((2 * G + 1) * d + 7)] = -std::numeric_limits<float>::infinity();  // sequence 2, memory 1
  refused("k holds a non-finite value at row 0, column 7");
  q[std::size_t((2 * H + 1) * d + 0)] = nan;  // sequence 2, query head 1: memory 0, before memory 1
  refused("q holds a non-finite value at row 0, column 0");
  q[std::size_t(0 * H * d + 5)] = nan;  // sequence 0, query head 0: the first pair
  refused("q holds a non-finite value at row 0, column 5");
}

// A batched call checks its first sequence in full and the others by what can differ between
// sequences (lengths, the state's shape and kind, the capacity): a problem in any later sequence
// is still found, with the message the full check gives, and nothing is written.
TEST_CASE("a batched call finds a problem in any sequence, not only the first", "[multi_head][pool][errors]") {
  const Index H = 2, d = 4;
  SECTION("a state of another width") {
    const Mha mha(abc::control::SlidingWindow<float>{4}, H, H);
    Mha::Pool pool;
    mha.add(pool, 1, d, d);
    mha.add(pool, 2, d, d);
    mha.add(pool, 3, 2 * d, d);  // keys twice as wide
    const auto before = snapshot(pool, {1, 2, 3});
    auto q = filled(3 * H * d, 21), out = std::vector<float>(q.size(), -3.0f);
    const auto view = HT::bshd(q.data(), 3, 1, H, d);
    const auto out_before = out;
    REQUIRE_THROWS_WITH(mha.forward_causal(pool, {1, 2, 3}, view, view, view, HTO::bshd(out.data(), 3, 1, H, d)),
                        ABC_CONTAINS("abc::MultiHeadAttention::forward_causal: state.keys() is [4 x 8], expected [4 x 4]"));
    REQUIRE(snapshot(pool, {1, 2, 3}) == before);
    REQUIRE(out == out_before);
    REQUIRE(mha.validate(pool, {1, 2, 3}, view, view, view, HTO::bshd(out.data(), 3, 1, H, d)) ==
            abc::Status::shape_mismatch);
  }
  SECTION("a sequence at the control's capacity") {
    using Lf = abc::control::Linformer<float>;
    const abc::MultiHeadAttention<Lf> mha(Lf(abc::Slots{3}, 5, abc::Seed{2}), H, H);
    abc::MultiHeadAttention<Lf>::Pool pool;
    for (const std::uint64_t id : std::vector<std::uint64_t>{1, 2, 3}) mha.add(pool, id, d, d);
    auto q = filled(5 * H * d, 22), out = std::vector<float>(q.size());
    const auto five = HT::bshd(q.data(), 1, 5, H, d);
    mha.forward_causal(pool, {2}, five, five, five, HTO::bshd(out.data(), 1, 5, H, d));  // sequence 2 is full
    const auto before = snapshot(pool, {1, 2, 3});
    const auto step = HT::bshd(q.data(), 3, 1, H, d);
    REQUIRE_THROWS_WITH(mha.forward_causal(pool, {1, 2, 3}, step, step, step, HTO::bshd(out.data(), 3, 1, H, d)),
                        ABC_CONTAINS("the token count (state position + new tokens) is 6, expected at most 5"));
    REQUIRE(snapshot(pool, {1, 2, 3}) == before);
    REQUIRE_NOTHROW(mha.forward_causal(pool, {1, 3}, HT::bshd(q.data(), 2, 1, H, d), HT::bshd(q.data(), 2, 1, H, d),
                                       HT::bshd(q.data(), 2, 1, H, d), HTO::bshd(out.data(), 2, 1, H, d)));
  }
  SECTION("a sequence whose queries and keys differ in length") {
    const Mha mha(abc::control::SlidingWindow<float>{4}, H, H);
    Mha::Pool pool;
    mha.add(pool, 1, d, d);
    mha.add(pool, 2, d, d);
    const auto before = snapshot(pool, {1, 2});
    auto data = filled(4 * H * d, 23), out = std::vector<float>(data.size(), -3.0f);
    const auto q = HT::packed(data.data(), {0, 1, 3}, H, d);  // lengths 1, 2
    const auto k = HT::packed(data.data(), {0, 1, 4}, H, d);  // lengths 1, 3
    const auto out_before = out;
    REQUIRE_THROWS_WITH(mha.forward_causal(pool, {1, 2}, q, k, k, HTO::packed(out.data(), {0, 1, 3}, H, d)),
                        ABC_CONTAINS("causal attention reads one query per key"));
    REQUIRE(snapshot(pool, {1, 2}) == before);
    REQUIRE(out == out_before);
  }
}

// all_finite() reads exactly the view's elements, in each layout's passes: a NaN or an infinity at
// any element of any sequence and head is found, and one in the padding past a sequence's length,
// or between strided heads, is not read.
TEST_CASE("HeadTensor::all_finite finds any non-finite element of the view, or of a sequence's heads, and reads nothing else", "[head_tensor]") {
  const Index B = 3, S = 5, H = 3, d = 7;
  const std::vector<Index> lengths = {5, 2, 0};
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  auto buf = filled(B * S * (H + 1) * d + 1, 21);
  using View = std::function<HT(const float*)>;
  const std::vector<std::pair<const char*, View>> layouts = {
      {"bshd", [&](const float* p) { return HT::bshd(p, B, S, H, d, lengths); }},
      {"bhsd", [&](const float* p) { return HT::bhsd(p, B, H, S, d, lengths); }},
      {"strided, a gap after each head", [&](const float* p) { return HT::strided(p, B, S, H, d, S * (H + 1) * d, (H + 1) * d, d + 2, lengths); }},
      {"one head", [&](const float* p) { return HT::bshd(p, B, S, 1, d, lengths); }},
      {"packed", [&](const float* p) { return HT::packed(p, {0, 5, 7, 7}, H, d); }},
      {"one token each", [&](const float* p) { return HT::bshd(p, B, 1, H, d); }},
  };
  for (const auto& [name, make] : layouts) {
    INFO(name);
    const HT base = make(buf.data());
    REQUIRE(base.all_finite());
    // Every element the view covers, by its address.
    std::vector<char> covered(buf.size(), 0);
    for (Index b = 0; b < base.batch(); ++b)
      for (Index h = 0; h < base.heads(); ++h) {
        const auto m = base.head(b, h);
        for (Index t = 0; t < m.rows(); ++t)
          for (Index j = 0; j < m.cols(); ++j) covered[std::size_t(m.data() + t * m.outerStride() + j - buf.data())] = 1;
      }
    // The sequence and head of each covered element, for all_finite(b, first, count).
    std::vector<Index> seq_of(buf.size(), -1), head_of(buf.size(), -1);
    for (Index b = 0; b < base.batch(); ++b)
      for (Index h = 0; h < base.heads(); ++h) {
        const auto m = base.head(b, h);
        for (Index t = 0; t < m.rows(); ++t)
          for (Index j = 0; j < m.cols(); ++j) {
            const auto at = std::size_t(m.data() + t * m.outerStride() + j - buf.data());
            seq_of[at] = b, head_of[at] = h;
          }
      }
    for (std::size_t i = 0; i < buf.size(); ++i) {
      auto bad = buf;
      bad[i] = (i % 2) ? nan : -inf;
      INFO("element " << i << (covered[i] ? " (in the view)" : " (outside the view)"));
      const HT view = make(bad.data());
      REQUIRE(view.all_finite() == !covered[i]);
      for (Index b = 0; b < view.batch(); ++b)
        for (Index first = 0; first <= view.heads(); ++first)
          for (Index count = 0; first + count <= view.heads(); ++count) {
            const bool inside = seq_of[i] == b && head_of[i] >= first && head_of[i] < first + count;
            INFO("sequence " << b << ", heads [" << first << ", " << first + count << ")");
            REQUIRE(view.all_finite(b, first, count) == !inside);
          }
    }
  }
}

TEST_CASE("HeadTensor refuses negative and overflowing sizes by name", "[head_tensor][errors]") {
  float x = 0;
  const Index big = Index(1) << 40;
  REQUIRE_THROWS_AS(HT::bshd(&x, -1, 2, 2, 2), abc::shape_error);
  REQUIRE_THROWS_WITH(HT::bshd(&x, -1, 2, 2, 2), ABC_CONTAINS("abc::HeadTensor::bshd: batch is -1, expected at least 0"));
  REQUIRE_THROWS_WITH(HT::bshd(&x, 1, -2, 2, 2), ABC_CONTAINS("abc::HeadTensor::bshd: seq is -2, expected at least 0"));
  REQUIRE_THROWS_WITH(HT::bshd(&x, 1, 2, -3, 2), ABC_CONTAINS("heads is -3, expected at least 0"));
  REQUIRE_THROWS_WITH(HT::bshd(&x, 1, 2, 2, -4), ABC_CONTAINS("dim is -4, expected at least 0"));
  REQUIRE_THROWS_WITH(HT::bhsd(&x, -1, 2, 2, 2), ABC_CONTAINS("abc::HeadTensor::bhsd: batch is -1"));
  REQUIRE_THROWS_WITH(HT::bhsd(&x, 1, 2, 2, -1), ABC_CONTAINS("dim is -1"));
  REQUIRE_THROWS_WITH(HT::strided(&x, 1, 2, 2, 2, 8, -4, 2), ABC_CONTAINS("abc::HeadTensor::strided: seq_stride is -4"));
  REQUIRE_THROWS_WITH(HT::strided(&x, -5, 2, 2, 2, 8, 4, 2), ABC_CONTAINS("batch is -5"));
  REQUIRE_THROWS_WITH(HT::packed(&x, {0, 2}, -1, 2), ABC_CONTAINS("abc::HeadTensor::packed: heads is -1"));
  REQUIRE_THROWS_WITH(HT::packed(&x, {0, 2}, 2, -2), ABC_CONTAINS("dim is -2"));
  REQUIRE_THROWS_WITH(HT::packed(&x, {0, -2}, 2, 2), ABC_CONTAINS("offsets are non-decreasing"));
  REQUIRE_THROWS_WITH(HT::bshd(&x, 1, 2, 2, 2, {3, 1}), ABC_CONTAINS("lengths.size() is 2, expected 1"));
  REQUIRE_THROWS_WITH(HT::bshd(&x, 2, 2, 2, 2, {3, 1}), ABC_CONTAINS("abc::HeadTensor::bshd: lengths[0] is 3, expected at most 2"));
  REQUIRE_THROWS_AS(HT::bshd(&x, big, big, 2, 2), abc::shape_error);
  REQUIRE_THROWS_WITH(HT::bshd(&x, big, big, 2, 2), ABC_CONTAINS("abc::HeadTensor::bshd: the element count overflows"));
  REQUIRE_THROWS_WITH(HT::bhsd(&x, 2, big, big, 2), ABC_CONTAINS("the element count overflows"));
  REQUIRE_THROWS_WITH(HT::packed(&x, {0, big, 2 * big}, big, 2), ABC_CONTAINS("the element count overflows"));
  // Empty tensors are fine, with no buffer at all too: their blocks point nowhere (UBSan saw an
  // offset added to the null pointer).
  REQUIRE(HT::bshd(&x, 0, 0, 0, 0).batch() == 0);
  const auto none = HT::bshd(nullptr, 2, 0, 2, 4);
  REQUIRE(none.head(1, 1).size() == 0);
  REQUIRE(HT::bhsd(nullptr, 2, 2, 0, 4).head(1, 1).rows() == 0);
  REQUIRE(HT::packed(nullptr, {0, 0, 0}, 2, 3).head(1, 1).rows() == 0);
}

TEST_CASE("a decode resumed from saved states continues bit for bit; bad states are refused by name",
          "[multi_head][pool][state_io]") {
  using Mlp = abc::control::Mlp<float>;
  using Layer = abc::MultiHeadAttention<Mlp>;
  const Index H = 4, KV = 2, d = 8, n = 6;
  std::vector<Mlp> controls;
  for (Index m = 0; m < KV; ++m) controls.emplace_back(abc::Slots{n}, d, abc::Seed{std::uint64_t(11 + m)});
  const Layer mha(controls, H, KV);
  Layer::Pool pool;
  mha.add(pool, 3, d, d);
  // A prefill of 5 tokens, then the states as blobs and back, into a second pool.
  const Index S = 5;
  const auto q = filled(S * H * d, 21), kv = filled(S * KV * d, 22);
  std::vector<float> out(std::size_t(S * H * d));
  mha.forward_causal(pool, {3}, HT::bshd(q.data(), 1, S, H, d), HT::bshd(kv.data(), 1, S, KV, d),
                     HT::bshd(kv.data(), 1, S, KV, d), HTO::bshd(out.data(), 1, S, H, d));
  std::vector<abc::State<float>> loaded;
  for (Index m = 0; m < mha.memories(); ++m) {
    auto st = mha.memory(m).make_state(d, d);
    abc::load_state(mha.memory(m), abc::save_state(mha.memory(m), pool.states(3)[std::size_t(m)]), st);
    loaded.push_back(std::move(st));
  }
  Layer::Pool resumed;
  mha.add(resumed, 9, loaded);
  REQUIRE(resumed.states(9) == pool.states(3));
  // Three decode steps in both pools: the same outputs, bit for bit.
  for (std::uint64_t t = 0; t < 3; ++t) {
    const auto qt = filled(H * d, 30 + t), kt = filled(KV * d, 40 + t);
    std::vector<float> a(std::size_t(H * d)), b(std::size_t(H * d));
    mha.forward_causal(pool, {3}, HT::bshd(qt.data(), 1, 1, H, d), HT::bshd(kt.data(), 1, 1, KV, d),
                       HT::bshd(kt.data(), 1, 1, KV, d), HTO::bshd(a.data(), 1, 1, H, d));
    mha.forward_causal(resumed, {9}, HT::bshd(qt.data(), 1, 1, H, d), HT::bshd(kt.data(), 1, 1, KV, d),
                       HT::bshd(kt.data(), 1, 1, KV, d), HTO::bshd(b.data(), 1, 1, H, d));
    REQUIRE(a == b);
  }
  // Refused, and the pool unchanged: an id already there, a wrong count, a state of another shape or
  // of another control type.
  const auto before = snapshot(resumed, {9});
  const std::string where = "abc::MultiHeadAttention::add: ";
  REQUIRE_THROWS_WITH(mha.add(resumed, 9, loaded),
                      where + "sequence id 9 is already in the pool (drop it first)");
  REQUIRE_THROWS_WITH(mha.add(resumed, 10, {loaded[0]}),
                      where + "states.size() is 1, expected 2 (one state per memory, in memory order)");
  std::vector<abc::State<float>> narrow = {mha.memory(0).make_state(d, d), mha.memory(1).make_state(d - 1, d)};
  REQUIRE_THROWS_WITH(mha.add(resumed, 10, narrow),
                      where + "states[1].keys() is [6 x 7], expected [6 x 8] (memory m's slots, and one key width "
                              "for every memory)");
  std::vector<abc::State<float>> thin = {mha.memory(0).make_state(d, d), mha.memory(1).make_state(d, d + 1)};
  REQUIRE_THROWS_WITH(mha.add(resumed, 10, thin),
                      where + "states[1].values() is [6 x 9], expected [6 x 8] (memory m's slots, and one value "
                              "width for every memory)");
  const abc::BoundedAttention<abc::control::SlidingWindow<float>> window(abc::control::SlidingWindow<float>{n});
  std::vector<abc::State<float>> foreign = {mha.memory(0).make_state(d, d), window.make_state(d, d)};
  REQUIRE_THROWS_AS(mha.add(resumed, 10, foreign), abc::config_error);
  REQUIRE_THROWS_WITH(mha.add(resumed, 10, foreign),
                      where + "states[1] comes from abc::control::SlidingWindow, expected abc::control::Mlp (a state "
                              "belongs to the control type whose make_state made it)");
  REQUIRE_FALSE(resumed.contains(10));
  REQUIRE(snapshot(resumed, {9}) == before);
  REQUIRE(resumed.size() == 1);
}

}  // namespace multi_head_contract_test
