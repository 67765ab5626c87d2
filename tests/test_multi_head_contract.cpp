// SPDX-License-Identifier: MIT
// abc tests: the contract of MultiHeadAttention, its Pool and HeadTensor. Nothing changes when a
// call fails (duplicate or unknown sequence ids, a pool filled by another model, bad shapes); no
// exception escapes a parallel region; HeadTensor refuses negative sizes and sizes that overflow
// by name; messages about counts print counts, not shapes.
#include <abc/abc.hpp>
#include <abc/multi_head_attention.hpp>

#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

#include "support/catch.hpp"
#include "support/reference.hpp"

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
