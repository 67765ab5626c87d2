// SPDX-License-Identifier: MIT
// abc tests: the error-message table (docs/design.md §5). One bad call for every public surface,
// each with the exception type and the whole message it must produce: the message is the
// interface a caller debugs with, so a wrong or unclear one is a bug even when the type is right.
// Counts and sizes must read as counts: no message prints a value as a shape such as "[3 x 0]".
#include <abc/abc.hpp>
#include <abc/multi_head_attention.hpp>
#include <abc/state_io.hpp>
#include <abc/weights.hpp>

#include <cstdint>
#include <exception>
#include <functional>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "support/blob.hpp"
#include "support/catch.hpp"
#include "support/reference.hpp"
#include "support/weights_file.hpp"

namespace error_messages_test {

namespace {

using abc::Index;
using M = abc::Matrix<float>;
using V = abc::Vector<float>;
using HT = abc::HeadTensor<const float>;
using HTO = abc::HeadTensor<float>;
using SW = abc::control::SlidingWindow<float>;
using Mha = abc::MultiHeadAttention<SW>;
constexpr Index kMax = std::numeric_limits<Index>::max();

enum class Throws { shape_error, config_error };

struct Row {
  const char* call;           // the call, as the report names it
  std::function<void()> run;  // makes the bad call
  Throws type;
  std::string message;        // the whole message
  // A matrix that really has a zero dimension, printed as its shape ("k is [5 x 0], ..."): the only
  // rows whose message may contain "x 0]".
  bool zero_dimension_shape = false;
};

const char* name(Throws t) { return t == Throws::shape_error ? "shape_error" : "config_error"; }

// The type and message `row.run` throws: "none" when it returns, "other" for another exception.
std::pair<std::string, std::string> outcome(const Row& row) {
  try {
    row.run();
  } catch (const abc::shape_error& e) {
    return {name(Throws::shape_error), e.what()};
  } catch (const abc::config_error& e) {
    return {name(Throws::config_error), e.what()};
  } catch (const std::exception& e) {
    return {"other", e.what()};
  }
  return {"none", ""};
}

}  // namespace

TEST_CASE("every public call's errors: the exception type and the whole message", "[errors][messages]") {
  using namespace abc::control;
  using abc::select::KeyScore;
  using abc::select::TramsAttention;
  const float nan = std::numeric_limits<float>::quiet_NaN();

  // ---- fixtures: every call below is made against these, and none of them succeeds --------------
  const M q = ref::random<float>(5, 4, 1), k = ref::random<float>(5, 4, 2), v = ref::random<float>(5, 3, 3);
  const M k3 = ref::random<float>(5, 3, 4), q6 = ref::random<float>(6, 4, 5), v4 = ref::random<float>(4, 3, 6);
  const M z(5, 0);
  M k_nan = k, v_nan = v;
  k_nan(2, 1) = nan;
  v_nan(4, 2) = nan;
  const V q1 = q.row(0).transpose(), k1 = k.row(0).transpose(), v1 = v.row(0).transpose(), z1(0);
  const V k1_3 = k3.row(0).transpose(), x1_4 = q1;
  const abc::BoundedAttention<SW> attn{SW{4}};
  auto state = attn.make_state(4, 3);
  auto narrow_state = attn.make_state(4, 2);
  const auto memory = attn.memory(k, v);
  const abc::BoundedAttention<RandomSlot<float>> hashed{RandomSlot<float>(abc::Slots{4}, abc::Seed{9})};
  const abc::BoundedAttention<Mlp<float>> mlp{Mlp<float>(abc::Slots{4}, 5, abc::Seed{1})};  // input width 5
  auto mlp_state = mlp.make_state(4, 3);
  const abc::BoundedAttention<Identity<float>> identity{Identity<float>{8}};
  auto full = identity.make_state(4, 3);
  identity.forward_causal(full, ref::random<float>(8, 4, 7), ref::random<float>(8, 4, 8), ref::random<float>(8, 3, 9));
  const abc::BoundedAttention<Cluster<float>> fitted_later{Cluster<float>(abc::Slots{4}, 4, abc::Seed{1})};
  abc::Options bad_scale, bad_chunk, bad_block;
  bad_scale.scale = -1;
  bad_chunk.chunk = 0;
  bad_block.backward_block = -2;
  M out52(5, 2), out43(4, 3);
  V out2(2);
  M dout_nan = v;
  dout_nan(2, 1) = nan;
  const abc::StateGradient<float> short_end{M::Zero(3, 4), M::Zero(4, 3), M::Zero(2, 4)};
  const abc::StateGradient<float> nan_end{M::Zero(4, 4), dout_nan.topRows(4), M::Zero(2, 4)};
  const abc::StateGradient<float> narrow_end{M::Zero(4, 4), M::Zero(4, 2), M::Zero(2, 4)};
  const abc::StateGradient<float> wide_end{M::Zero(4, 4), M::Zero(4, 3), M::Zero(2, 5)};
  M nan_keys = M::Zero(4, 4), nan_norm = M::Zero(2, 4);
  nan_keys(2, 1) = nan;
  nan_norm(1, 1) = nan;
  const abc::StateGradient<float> nan_key_end{nan_keys, M::Zero(4, 3), M::Zero(2, 4)};
  const abc::StateGradient<float> nan_norm_end{M::Zero(4, 4), M::Zero(4, 3), nan_norm};
  // RFA (a linear readout, n = 6 slots): its state keeps no K̃, so d_end.keys has no column.
  const abc::BoundedAttention<RandomFeature<float>> rfa{
      RandomFeature<float>(abc::feature::RandomFourier<float>(M::Ones(3, 4)))};
  const auto rfa_state = rfa.make_state(4, 3);
  const abc::StateGradient<float> keyed_end{M::Zero(6, 4), M::Zero(6, 3), M::Zero(2, 6)};

  // Multi-head: 4 query heads over 2 key/value heads; batches of 2 sequences of 3 tokens.
  std::vector<float> buf(512, 0.5f), obuf(512, 0.0f);
  const Mha mha(SW{4}, 4, 2);
  const auto q_mh = HT::bshd(buf.data(), 2, 3, 4, 4), q_3h = HT::bshd(buf.data(), 2, 3, 3, 4);
  const auto q_w5 = HT::bshd(buf.data(), 2, 3, 4, 5);
  const auto k_mh = HT::bshd(buf.data(), 2, 3, 2, 4), k_3h = HT::bshd(buf.data(), 2, 3, 3, 4);
  const auto v_mh = HT::bshd(buf.data(), 2, 3, 2, 3), v_3h = HT::bshd(buf.data(), 2, 3, 3, 3);
  const auto k_one = HT::bshd(buf.data(), 1, 3, 2, 4), v_one = HT::bshd(buf.data(), 1, 3, 2, 3);
  const auto x_3h = HT::bshd(buf.data(), 2, 3, 3, 4), x_one = HT::bshd(buf.data(), 1, 3, 1, 4);
  const auto out_mh = HTO::bshd(obuf.data(), 2, 3, 4, 3), out_d2 = HTO::bshd(obuf.data(), 2, 3, 4, 2);
  const auto out_short = HTO::bshd(obuf.data(), 2, 3, 4, 3, {3, 2});
  const auto out_3h = HTO::bshd(obuf.data(), 2, 3, 3, 3);
  Mha::Pool pool;
  mha.add(pool, 7, 4, 3);
  mha.add(pool, 8, 4, 3);
  const Mha three_heads(SW{4}, 3, 3);  // 3 memories per sequence, where mha has 2
  Mha::Pool other_pool;
  three_heads.add(other_pool, 1, 4, 3);
  const auto q_one = HT::bshd(buf.data(), 1, 3, 4, 4);
  const auto out_one = HTO::bshd(obuf.data(), 1, 3, 4, 3);
  const Index big = Index(1) << 40;

  // State blobs: a good one, and every way one can be wrong.
  const abc::BoundedAttention<SW> five{SW{5}};
  auto saved = five.make_state(4, 3);
  five.forward_causal(saved, ref::random<float>(9, 4, 10), ref::random<float>(9, 4, 11), ref::random<float>(9, 3, 12));
  const std::vector<std::uint8_t> good = abc::save_state(five, saved);
  auto dst = five.make_state(4, 3);
  const std::vector<std::uint8_t> no_magic(20, 0), truncated(good.begin(), good.end() - 1);
  auto corrupt = good, future = good;
  corrupt[good.size() / 2] ^= 0x10;
  future[8] = 3;
  blob::reseal(future);
  // d = 2^40: the u64 after the tag and n (magic, version, scalar size, tag length, tag, n).
  auto wide = good;
  const std::size_t tag_length = good[16], d_at = 8 + 4 + 4 + 4 + tag_length + 8;
  wide[d_at + 5] = 1;
  blob::reseal(wide);
  abc::State<float> blank;
  const abc::BoundedAttention<Dilated<float>> dilated{Dilated<float>{abc::Slots{5}, 1}};
  const abc::BoundedAttention<SW> six{SW{6}};
  const abc::BoundedAttention<abc::control::SlidingWindow<double>> five_double{abc::control::SlidingWindow<double>{5}};

  // Weights files: a good one (an integer "slots" and a float32 "w_phi" [4 x 5]), and every way one
  // can be wrong. Byte offsets: magic 8, version 4, metadata count 4, "slots" 4 + 5, its kind 4 and
  // value 8, tensor count 4, "w_phi" 4 + 5, dtype and rank 8, two dims 16: the data starts at 74.
  abc::Weights wts;
  wts.set_int("slots", 4);
  wts.add<float>("w_phi", {4, 5}, std::vector<float>(20, 0.5f));
  const std::vector<std::uint8_t> wgood = wts.to_bytes();
  abc::Weights wts_more = wts;
  auto wflipped = wgood, wcut = wgood, wtrailing = wgood;
  wflipped[80] ^= 0x01;
  wcut.erase(wcut.end() - 12, wcut.end() - 4);
  weights_file::reseal(wcut);
  wtrailing.insert(wtrailing.end() - 4, 3, std::uint8_t{0});
  weights_file::reseal(wtrailing);
  using RT = weights_file::RawTensor;
  const std::vector<std::uint8_t> f32_one = {0, 0, 128, 63};  // 1.0f
  const auto wfuture = weights_file::file({}, {}, 2);
  const auto wdtype = weights_file::file({}, {RT{"w", 7, {1}, f32_one}});
  const auto wrank = weights_file::file({}, {RT{"w", 1, std::vector<std::uint64_t>(9, 1), f32_one}});
  const std::uint64_t two40 = std::uint64_t(1) << 40;
  const auto whuge = weights_file::file({}, {RT{"w", 1, {two40, 0, two40}, {}}});  // empty, yet refused
  const auto wwide = weights_file::file({}, {RT{"w", 2, {2 * two40}, {}}});
  const auto wtwice = weights_file::file({}, {RT{"w", 1, {1}, f32_one}, RT{"w", 1, {1}, f32_one}});
  const auto wunnamed = weights_file::file({}, {RT{"", 1, {1}, f32_one}});
  const auto wkind = weights_file::file({{"slots", 9, {}}}, {});
  const auto wkey_twice = weights_file::file({{"n", 3, {0, 0, 0, 0}}, {"n", 3, {0, 0, 0, 0}}}, {});

  // TRAMS and its score: W_Q [4 × 8], a pool of 8.
  const M w_q = M::Ones(4, 8);
  const KeyScore<float> score(w_q);
  const TramsAttention<float> trams({8, 2, 2}, score);
  const TramsAttention<float> trams10({10, 2, 2}, score);
  auto pool8 = trams.make_state(4, 3);
  auto pool10 = trams10.make_state(4, 3);
  abc::select::TramsConfig trams_bad_scale{8, 2, 2};
  trams_bad_scale.scale = -1;
  const M q2 = M::Ones(2, 4), v2 = M::Ones(2, 3), q8 = ref::random<float>(5, 8, 13);
  const abc::BoundedAttention<TopKEviction<float>> top_k{TopKEviction<float>(abc::Slots{4}, 2, score)};

  const abc::GlobalMemoryAttention<float> gmat(abc::LocalPattern::chunked(4));
  const M gx = M::Ones(8, 3), gm = M::Ones(2, 3), gm4 = M::Ones(2, 4), gx0(8, 0);
  M gout_x(8, 3), gout_m(3, 3);
  const abc::SoftmaxAttention<float> softmax;

  const std::vector<Row> rows = {
      // ---- BoundedAttention -------------------------------------------------------------------
      {"BoundedAttention(control, options.scale = -1)", [&] { abc::BoundedAttention<SW>(SW{2}, bad_scale); },
       Throws::config_error,
       "abc::BoundedAttention: options.scale is -1.000000, expected a finite value > 0, or 0 for 1/sqrt(d)"},
      {"BoundedAttention(control, options.chunk = 0)", [&] { abc::BoundedAttention<SW>(SW{2}, bad_chunk); },
       Throws::config_error, "abc::BoundedAttention: options.chunk is 0, expected at least 1 (a chunk holds a token)"},
      {"BoundedAttention(control, options.backward_block = -2)", [&] { abc::BoundedAttention<SW>(SW{2}, bad_block); },
       Throws::config_error,
       "abc::BoundedAttention: options.backward_block is -2, expected at least 1 (a block holds a token)"},
      {"forward: keys narrower than the queries", [&] { attn.forward(q, k3, v); }, Throws::shape_error,
       "abc::BoundedAttention::forward: k is [5 x 3], expected [5 x 4] (k.cols() must equal q.cols())"},
      {"forward: zero-width queries", [&] { attn.forward(z, z, v); }, Throws::shape_error,
       "abc::BoundedAttention::forward: q.cols() is 0, expected at least 1 (queries and keys need a column)"},
      {"forward: zero-width keys", [&] { attn.forward(q, z, v); }, Throws::shape_error,
       "abc::BoundedAttention::forward: k is [5 x 0], expected [5 x 4] (k.cols() must equal q.cols())", true},
      {"forward: a non-finite key", [&] { attn.forward(q, k_nan, v); }, Throws::config_error,
       "abc::BoundedAttention::forward: k holds a non-finite value at row 2, column 1, expected finite values"},
      {"forward_into: an output of the wrong width", [&] { attn.forward_into(q, k, v, out52); }, Throws::shape_error,
       "abc::BoundedAttention::forward: out is [5 x 2], expected [5 x 3] (the output buffer holds one row per query)"},
      {"forward with x: keys are not the control's input width", [&] { mlp.forward(q, k, v); }, Throws::shape_error,
       "abc::BoundedAttention::forward: k is [5 x 4], expected [5 x 5] (the control reads the keys as its input, so "
       "their width must be the control's input_dim(); pass x to give it another input)"},
      {"forward_causal: more queries than keys", [&] { attn.forward_causal(q6, k, v); }, Throws::shape_error,
       "abc::BoundedAttention::forward_causal: q is [6 x 4], expected [5 x 4] (causal attention reads one query per "
       "key)"},
      {"forward_causal: fewer values than keys", [&] { attn.forward_causal(q, k, v4); }, Throws::shape_error,
       "abc::BoundedAttention::forward_causal: v is [4 x 3], expected [5 x 3] (v.rows() must equal k.rows(): one value "
       "per key)"},
      {"forward_causal(state): a state of other value width", [&] { attn.forward_causal(narrow_state, q, k, v); },
       Throws::shape_error,
       "abc::BoundedAttention::forward_causal: state.values() is [4 x 2], expected [4 x 3] (the state must come from "
       "make_state(d, dv) of this attention)"},
      {"forward_causal(state): a state of another control", [&] { hashed.forward_causal(state, q, k, v); },
       Throws::config_error,
       "abc::BoundedAttention::forward_causal: state comes from abc::control::SlidingWindow, expected "
       "abc::control::RandomSlot (a state belongs to the control type whose make_state made it)"},
      {"forward_causal: a Cluster without centroids", [&] { fitted_later.forward_causal(q, k, v); },
       Throws::config_error,
       "abc::BoundedAttention::forward_causal: centroids.rows() is 0, expected at least 4 (a Cluster(Slots{n}, d_x, seed, "
       "max_iter) fits its centroids only in non-causal forward; build it from centroids, e.g. "
       "Cluster::kmeans(...).centroids, for causal attention and step)"},
      {"backward: keys narrower than the queries", [&] { attn.backward(q, k3, v, v); }, Throws::shape_error,
       "abc::BoundedAttention::backward: k is [5 x 3], expected [5 x 4] (k.cols() must equal q.cols())"},
      {"backward: d_out of the wrong width", [&] { attn.backward(q, k, v, out52); }, Throws::shape_error,
       "abc::BoundedAttention::backward: d_out is [5 x 2], expected [5 x 3] (the gradient of the output holds one row "
       "per query)"},
      {"backward: a non-finite d_out", [&] { attn.backward(q, k, v, dout_nan); }, Throws::config_error,
       "abc::BoundedAttention::backward: d_out holds a non-finite value at row 2, column 1, expected finite values"},
      {"backward_causal: more queries than keys", [&] { attn.backward_causal(q6, k, v, v); }, Throws::shape_error,
       "abc::BoundedAttention::backward_causal: q is [6 x 4], expected [5 x 4] (causal attention reads one query per "
       "key)"},
      {"backward_causal(state): d_end of fewer slots", [&] { attn.backward_causal(state, q, k, v, v, short_end); },
       Throws::shape_error,
       "abc::BoundedAttention::backward_causal: d_end.keys is [3 x 4], expected [4 x 4] (d_end holds the gradient of "
       "the state the call leaves, shaped as the state)"},
      {"backward_causal(state): a non-finite d_end", [&] { attn.backward_causal(state, q, k, v, v, nan_end); },
       Throws::config_error,
       "abc::BoundedAttention::backward_causal: d_end.values holds a non-finite value at row 2, column 1, expected "
       "finite values"},
      {"backward_causal(state): d_end with values of another width",
       [&] { attn.backward_causal(state, q, k, v, v, narrow_end); }, Throws::shape_error,
       "abc::BoundedAttention::backward_causal: d_end.values is [4 x 2], expected [4 x 3] (d_end holds the gradient of "
       "the state the call leaves, shaped as the state)"},
      {"backward_causal(state): d_end with a per-slot row too long",
       [&] { attn.backward_causal(state, q, k, v, v, wide_end); }, Throws::shape_error,
       "abc::BoundedAttention::backward_causal: d_end.slot_state is [2 x 5], expected [2 x 4] (d_end holds the "
       "gradient of the state the call leaves, shaped as the state)"},
      {"backward_causal(state): a non-finite d_end.keys", [&] { attn.backward_causal(state, q, k, v, v, nan_key_end); },
       Throws::config_error,
       "abc::BoundedAttention::backward_causal: d_end.keys holds a non-finite value at row 2, column 1, expected "
       "finite values"},
      {"backward_causal(state): a non-finite d_end.slot_state",
       [&] { attn.backward_causal(state, q, k, v, v, nan_norm_end); }, Throws::config_error,
       "abc::BoundedAttention::backward_causal: d_end.slot_state holds a non-finite value at row 1, column 1, "
       "expected finite values"},
      {"backward (RFA): d_out of the wrong width", [&] { rfa.backward(q, k, v, out52); }, Throws::shape_error,
       "abc::BoundedAttention::backward: d_out is [5 x 2], expected [5 x 3] (the gradient of the output holds one row "
       "per query)"},
      {"backward_causal (RFA): d_out of fewer rows", [&] { rfa.backward_causal(q, k, v, out43); }, Throws::shape_error,
       "abc::BoundedAttention::backward_causal: d_out is [4 x 3], expected [5 x 3] (the gradient of the output holds "
       "one row per query)"},
      {"backward_causal(state) (RFA): d_end with a K̃ gradient", [&] { rfa.backward_causal(rfa_state, q, k, v, v, keyed_end); },
       Throws::shape_error,
       "abc::BoundedAttention::backward_causal: d_end.keys is [6 x 4], expected [6 x 0] (d_end holds the gradient of "
       "the state the call leaves, shaped as the state)",
       true},
      {"step: a key of another width than the query", [&] { attn.step(state, q1, k1_3, v1); }, Throws::shape_error,
       "abc::BoundedAttention::step: k_t.size() is 3, expected 4 (k_t.size() must equal q_t.size())"},
      {"step: an empty query", [&] { attn.step(state, z1, k1, v1); }, Throws::shape_error,
       "abc::BoundedAttention::step: q_t.size() is 0, expected at least 1 (queries and keys need a column)"},
      {"step: an empty key", [&] { attn.step(state, q1, z1, v1); }, Throws::shape_error,
       "abc::BoundedAttention::step: k_t.size() is 0, expected 4 (k_t.size() must equal q_t.size())"},
      {"step_into: an output of the wrong size", [&] { attn.step_into(state, q1, k1, v1, out2); }, Throws::shape_error,
       "abc::BoundedAttention::step: out.size() is 2, expected 3 (the output holds one entry per value)"},
      {"step with x_t: a control input of the wrong size", [&] { mlp.step(mlp_state, q1, k1, v1, x1_4); },
       Throws::shape_error, "abc::BoundedAttention::step: x_t.size() is 4, expected 5 (the control's input_dim())"},
      {"step: past the control's capacity", [&] { identity.step(full, q1, k1, v1); }, Throws::config_error,
       "abc::BoundedAttention::step: the token count (state position + new tokens) is 9, expected at most 8 (the "
       "control's capacity, max_tokens())"},
      {"memory: fewer values than keys", [&] { attn.memory(k, v4); }, Throws::shape_error,
       "abc::BoundedAttention::memory: v is [4 x 3], expected [5 x 3] (v.rows() must equal k.rows(): one value per "
       "key)"},
      {"memory: zero-width keys", [&] { attn.memory(z, v); }, Throws::shape_error,
       "abc::BoundedAttention::memory: k.cols() is 0, expected at least 1 (queries and keys need a column)"},
      {"read: queries of another width than the memory's keys", [&] { attn.read(memory, k3); }, Throws::shape_error,
       "abc::BoundedAttention::read: memory.keys() is [4 x 4], expected [4 x 3] (the memory must come from this "
       "attention, for queries of this width)"},
      {"read: a memory of another control", [&] { hashed.read(memory, q); }, Throws::config_error,
       "abc::BoundedAttention::read: memory comes from abc::control::SlidingWindow, expected abc::control::RandomSlot "
       "(a state belongs to the control type whose make_state made it)"},
      {"read_into: an output of the wrong shape", [&] { attn.read_into(memory, q.topRows(3), out43); },
       Throws::shape_error,
       "abc::BoundedAttention::read: out is [4 x 3], expected [3 x 3] (the output buffer holds one row per query)"},
      {"make_state(0, 3)", [&] { attn.make_state(0, 3); }, Throws::config_error,
       "abc::BoundedAttention::make_state: d is 0, expected at least 1 (keys need a column)"},
      {"make_state(4, -1)", [&] { attn.make_state(4, -1); }, Throws::config_error,
       "abc::BoundedAttention::make_state: dv is -1, expected at least 1 (values need a column)"},

      // ---- the built-in controls ------------------------------------------------------------------
      {"Identity(-3)", [] { Identity<float>{-3}; }, Throws::config_error,
       "abc::control::Identity: n is -3, expected at least 1 (at least one slot)"},
      {"SlidingWindow(0)", [] { SW{0}; }, Throws::config_error,
       "abc::control::SlidingWindow: n is 0, expected at least 1 (the window holds at least one token)"},
      {"Mlp(W_phi [0 x 3])", [] { Mlp<float>(M(0, 3)); }, Throws::config_error,
       "abc::control::Mlp: W_phi.rows() (slots) is 0, expected at least 1 (at least one slot)"},
      {"Mlp(W_phi with a NaN)", [&] { M w = M::Ones(2, 2); w(1, 1) = nan; Mlp<float>{w}; }, Throws::config_error,
       "abc::control::Mlp: W_phi holds a non-finite value at row 1, column 1, expected finite values"},
      {"Mlp(Slots{4}, d_x = 0, seed)", [] { Mlp<float>(abc::Slots{4}, 0, abc::Seed{1}); }, Throws::config_error,
       "abc::control::Mlp: d_x is 0, expected at least 1 (at least one input column)"},
      {"SlotGates(W_f, b_f of another size)", [] { SlotGates<float>(M::Ones(2, 3), V::Zero(3)); },
       Throws::config_error,
       "abc::control::SlotGates: b_f.size() is 3, expected 2 (one bias per slot: the rows of W_f)"},
      {"SlotGates(W_f, tau = 0)", [] { SlotGates<float>(M::Ones(2, 3), 0.0f); }, Throws::config_error,
       "abc::control::SlotGates: tau is 0.000000, expected a finite value > 0 (the gate normaliser, f = "
       "sigmoid(s)^(1/tau))"},
      {"Linformer(W_LF [0 x 5])", [] { Linformer<float>(M(0, 5)); }, Throws::config_error,
       "abc::control::Linformer: W_LF.rows() (slots) is 0, expected at least 1 (at least one slot)"},
      {"Linformer(Slots{3}, n_max = 0, seed)", [] { Linformer<float>(abc::Slots{3}, 0, abc::Seed{1}); }, Throws::config_error,
       "abc::control::Linformer: n_max is 0, expected at least 1 (at least one position)"},
      {"Dilated(Slots{4}, r = 0)", [] { Dilated<float>(abc::Slots{4}, 0); }, Throws::config_error,
       "abc::control::Dilated: r is 0, expected at least 1 (the dilation is at least 1)"},
      {"Dilated(Slots{2^32}, r = 2^32)", [] { Dilated<float>(abc::Slots{Index(1) << 32}, Index(1) << 32); }, Throws::config_error,
       "abc::control::Dilated: n × r (the slot count) overflows (4294967296 × 4294967296)"},
      {"Cluster(centroids [0 x 3])", [] { Cluster<float>(M(0, 3)); }, Throws::config_error,
       "abc::control::Cluster: centroids.rows() (slots) is 0, expected at least 1 (at least one cluster)"},
      {"Cluster(Slots{4}, d_x, seed, max_iter = 0)", [] { Cluster<float>(abc::Slots{4}, 3, abc::Seed{1}, 0); }, Throws::config_error,
       "abc::control::Cluster: max_iter is 0, expected at least 1 (k-means needs at least one update)"},
      {"Cluster::kmeans(x, Slots{0}, ...)", [&] { Cluster<float>::kmeans(q, abc::Slots{0}, abc::Seed{1}, 5); }, Throws::config_error,
       "abc::control::Cluster::kmeans: n is 0, expected at least 1 (at least one cluster)"},
      {"RandomSlot(Slots{0}, seed)", [] { RandomSlot<float>(abc::Slots{0}, abc::Seed{1}); }, Throws::config_error,
       "abc::control::RandomSlot: n is 0, expected at least 1 (at least one slot)"},
      {"Compressive(Slots{3}, ratio = 0)", [] { Compressive<float>(abc::Slots{3}, 0); }, Throws::config_error,
       "abc::control::Compressive: ratio is 0, expected at least 1 (a block holds at least one token)"},
      {"Compressive: past its capacity",
       [&] { abc::BoundedAttention<Compressive<float>>{Compressive<float>(abc::Slots{2}, 2)}.forward(q, k, v); },
       Throws::config_error,
       "abc::BoundedAttention::forward: the token count (state position + new tokens) is 5, expected at most 4 (the "
       "control's capacity, max_tokens())"},
      {"GlobalTokens({})", [] { GlobalTokens<float>(std::vector<Index>{}); }, Throws::config_error,
       "abc::control::GlobalTokens: positions.size() is 0, expected at least 1 (at least one global token)"},
      {"GlobalTokens({3, -1})", [] { GlobalTokens<float>(std::vector<Index>{3, -1}); }, Throws::config_error,
       "abc::control::GlobalTokens: positions[1] is -1, expected at least 0 (a token position)"},
      {"GlobalTokens({5, 2, 9, 2})", [] { GlobalTokens<float>(std::vector<Index>{5, 2, 9, 2}); }, Throws::config_error,
       "abc::control::GlobalTokens: positions[3] is 2, expected a position not listed before (positions[1] is also 2; "
       "one slot per global token)"},
      {"Gated(Mlp of input width 4, w_g of 3)", [] { Gated<Mlp<float>>(Mlp<float>(abc::Slots{2}, 4, abc::Seed{1}), V::Ones(3), 0.0f); },
       Throws::config_error,
       "abc::control::Gated: w_g.size() is 3, expected 4 (the inner control's input_dim(): both read the same control "
       "input)"},
      {"Gated(inner, w_g, b_g = inf)",
       [] { Gated<SW>(SW{2}, V::Ones(3), std::numeric_limits<float>::infinity()); }, Throws::config_error,
       "abc::control::Gated: b_g is not finite, expected a finite bias"},
      {"Gated(inner, gates with 1.5)", [] { V g(2); g << 0.5f, 1.5f; Gated<SW>(SW{2}, g); }, Throws::config_error,
       "abc::control::Gated: gates(1) is 1.500000, expected a value in [0, 1]"},
      {"Concat(Mlp of input width 4, Mlp of 5)",
       [] { Concat<Mlp<float>, Mlp<float>>(Mlp<float>(abc::Slots{2}, 4, abc::Seed{1}), Mlp<float>(abc::Slots{2}, 5, abc::Seed{1})); },
       Throws::config_error,
       "abc::control::Concat: b.input_dim() is 5, expected 4 (a.input_dim(): both parts read the same control input)"},
      {"Concat(SlidingWindow(max), SlidingWindow(1))", [] { Concat<SW, SW>(SW(kMax), SW(1)); }, Throws::config_error,
       "abc::control::Concat: a.num_slots() + b.num_slots() (the slot count) overflows (9223372036854775807 + 1)"},
      {"TopKEviction(Slots{3}, recent = -1, ...)", [&] { TopKEviction<float>(abc::Slots{3}, -1, score); }, Throws::config_error,
       "abc::control::TopKEviction: recent is -1, expected at least 0 (a token count)"},
      {"TopKEviction(Slots{0}, 0, ...)", [&] { TopKEviction<float>(abc::Slots{0}, 0, score); }, Throws::config_error,
       "abc::control::TopKEviction: n is 0, expected at least 1 (the cache holds at least one token)"},
      {"TopKEviction(Slots{4}, recent = 5, ...)", [&] { TopKEviction<float>(abc::Slots{4}, 5, score); },
       Throws::config_error,
       "abc::control::TopKEviction: recent is 5, expected at most 4 (the newest tokens kept are among the n slots)"},
      {"TopKEviction: keys of another width than W_Q's rows", [&] { top_k.forward_causal(q8, q8, v); },
       Throws::shape_error,
       "abc::BoundedAttention::forward_causal: k is [5 x 8], expected [5 x 4] (the control reads the keys as its "
       "input, so their width must be the control's input_dim(); pass x to give it another input)"},
      {"RandomFeature(phi, floor = -1)",
       [] { RandomFeature<float>(abc::feature::RandomFourier<float>(M::Ones(3, 4)), -1.0f); },
       Throws::config_error,
       "abc::control::RandomFeature: floor is -1.000000, expected a finite value ≥ 0 (0 turns the denominator floor "
       "off)"},
      {"RandomFeature(phi, gates with 1.5)",
       [] {
         RandomFeature<float>(abc::feature::RandomFourier<float>(M::Ones(3, 4)),
                                                           std::vector<float>{0.5f, 1.5f});
       },
       Throws::config_error, "abc::control::RandomFeature: gates[1] is 1.500000, expected a gate in [0, 1]"},
      {"RandomFeature(phi, empty gate weights, bias)",
       [] { RandomFeature<float>(abc::feature::RandomFourier<float>(M::Ones(3, 4)), V(), 0.0f); },
       Throws::config_error,
       "abc::control::RandomFeature: gate_weights.size() is 0, expected at least 1 (the gate reads at least one input "
       "column)"},
      {"feature::RandomFourier(W [0 x 4])", [] { abc::feature::RandomFourier<float>(M(0, 4)); }, Throws::config_error,
       "abc::feature::RandomFourier: W.rows() (D) is 0, expected at least 1 (at least one feature)"},
      {"feature::ArcCosine(W [3 x 0])", [] { abc::feature::ArcCosine<float>(M(3, 0)); }, Throws::config_error,
       "abc::feature::ArcCosine: W.cols() (d) is 0, expected at least 1 (inputs need a column)"},
      {"feature::Projection(D = 0, d, Seed)", [] { abc::feature::Projection<float>(0, 4, abc::Seed{1}); }, Throws::config_error,
       "abc::feature::Projection: D is 0, expected at least 1 (at least one random feature)"},
      {"feature::Projection(D, d = 3, Seed, sigma of 2)", [] { abc::feature::Projection<float>(4, 3, abc::Seed{1}, V::Ones(2)); },
       Throws::shape_error, "abc::feature::Projection: sigma.size() is 2, expected 3 (one σ per input dimension)"},
      {"LocalPattern::chunked(0)", [] { abc::LocalPattern::chunked(0); }, Throws::config_error,
       "abc::LocalPattern::chunked: size is 0, expected at least 1 (a chunk holds a token)"},

      // ---- MultiHeadAttention, its Pool, HeadTensor ---------------------------------------------
      {"MultiHeadAttention(control, heads = 0, kv_heads)", [] { Mha(SW{4}, 0, 1); }, Throws::config_error,
       "abc::MultiHeadAttention: heads is 0, expected at least 1 (at least one head)"},
      {"MultiHeadAttention(control, 4, kv_heads = 3)", [] { Mha(SW{4}, 4, 3); }, Throws::config_error,
       "abc::MultiHeadAttention: heads % kv_heads is 1, expected 0 (kv_heads must divide heads)"},
      {"MultiHeadAttention(3 controls, 4, 2)", [] { Mha(std::vector<SW>(3, SW{4}), 4, 2); }, Throws::config_error,
       "abc::MultiHeadAttention: controls.size() is 3, expected 2 (one per key/value head) or 4 (one per query head)"},
      {"MultiHeadAttention::forward: q of 3 heads", [&] { mha.forward(q_3h, k_mh, v_mh, out_mh); }, Throws::shape_error,
       "abc::MultiHeadAttention::forward: q.heads() is 3, expected 4 (one per query head)"},
      {"MultiHeadAttention::forward: k of 3 heads", [&] { mha.forward(q_mh, k_3h, v_mh, out_mh); }, Throws::shape_error,
       "abc::MultiHeadAttention::forward: k.heads() is 3, expected 2 (one per key/value head)"},
      {"MultiHeadAttention::forward: v of 3 heads", [&] { mha.forward(q_mh, k_mh, v_3h, out_mh); }, Throws::shape_error,
       "abc::MultiHeadAttention::forward: v.heads() is 3, expected 2 (one per key/value head)"},
      {"MultiHeadAttention::forward: one value sequence for two key sequences",
       [&] { mha.forward(q_mh, k_mh, v_one, out_mh); }, Throws::shape_error,
       "abc::MultiHeadAttention::forward: v.batch() is 1, expected 2 (one value sequence per key sequence)"},
      {"MultiHeadAttention::forward: one key sequence for two query sequences",
       [&] { mha.forward(q_mh, k_one, v_one, out_mh); }, Throws::shape_error,
       "abc::MultiHeadAttention::forward: k.batch() is 1, expected 2 (one key sequence per query sequence)"},
      {"MultiHeadAttention::forward: one output sequence for two query sequences",
       [&] { mha.forward(q_mh, k_mh, v_mh, out_one); }, Throws::shape_error,
       "abc::MultiHeadAttention::forward: out.batch() is 1, expected 2 (one output sequence per query sequence)"},
      {"MultiHeadAttention::forward: out of 3 heads", [&] { mha.forward(q_mh, k_mh, v_mh, out_3h); },
       Throws::shape_error, "abc::MultiHeadAttention::forward: out.heads() is 3, expected 4 (one per query head)"},
      {"MultiHeadAttention::forward: out of width 2",
       [&] { mha.forward(q_mh, k_mh, v_mh, out_d2); }, Throws::shape_error,
       "abc::MultiHeadAttention::forward: out.dim() is 2, expected 3 (outputs have the values' width)"},
      {"MultiHeadAttention::forward: one control input sequence for two key sequences",
       [&] { mha.forward(q_mh, k_mh, v_mh, x_one, out_mh); }, Throws::shape_error,
       "abc::MultiHeadAttention::forward: x.batch() is 1, expected 2 (one control input sequence per key sequence)"},
      {"MultiHeadAttention::forward: a sequence's output shorter than its queries",
       [&] { mha.forward(q_mh, k_mh, v_mh, out_short); }, Throws::shape_error,
       "abc::MultiHeadAttention::forward: out.length(1) is 2, expected 3 (one output row per query)"},
      {"MultiHeadAttention::forward: x of 3 heads", [&] { mha.forward(q_mh, k_mh, v_mh, x_3h, out_mh); },
       Throws::shape_error,
       "abc::MultiHeadAttention::forward: x.heads() is 3, expected 1 (one control input shared by all heads) or 2 "
       "(one per memory: per key/value head, as the controls are)"},
      {"MultiHeadAttention::forward_causal: a head's keys of another width",
       [&] { mha.forward_causal(q_w5, k_mh, v_mh, out_mh); }, Throws::shape_error,
       "abc::MultiHeadAttention::forward_causal: k is [3 x 4], expected [3 x 5] (k.cols() must equal q.cols())"},
      {"MultiHeadAttention::forward_causal(pool): an id twice",
       [&] { mha.forward_causal(pool, {7, 7}, q_mh, k_mh, v_mh, out_mh); }, Throws::config_error,
       "abc::MultiHeadAttention::forward_causal: ids holds sequence id 7 twice, expected distinct ids (each sequence "
       "advances once per call)"},
      {"MultiHeadAttention::forward_causal(pool): an unknown id",
       [&] { mha.forward_causal(pool, {7, 9}, q_mh, k_mh, v_mh, out_mh); }, Throws::config_error,
       "abc::MultiHeadAttention::forward_causal: sequence id 9 is not in the pool (add it first)"},
      {"MultiHeadAttention::forward_causal(pool): one id for two sequences",
       [&] { mha.forward_causal(pool, {7}, q_mh, k_mh, v_mh, out_mh); }, Throws::shape_error,
       "abc::MultiHeadAttention::forward_causal: ids.size() is 1, expected 2 (one id per sequence)"},
      {"MultiHeadAttention::forward_causal(pool): a pool filled by another model",
       [&] { mha.forward_causal(other_pool, {1}, q_one, k_one, v_one, out_one); }, Throws::config_error,
       "abc::MultiHeadAttention::forward_causal: pool sequence 1 holds 3 states, expected 2 (the pool was filled by "
       "another MultiHeadAttention)"},
      {"MultiHeadAttention::add: an id already in the pool", [&] { mha.add(pool, 7, 4, 3); }, Throws::config_error,
       "abc::MultiHeadAttention::add: sequence id 7 is already in the pool (drop it first)"},
      {"MultiHeadAttention::add_memory: an id already in the pool",
       [&] { mha.add_memory(pool, {9, 8}, k_mh, v_mh); }, Throws::config_error,
       "abc::MultiHeadAttention::add_memory: sequence id 8 is already in the pool (drop it first)"},
      {"MultiHeadAttention::add_memory: one id for two sources", [&] { mha.add_memory(pool, {9}, k_mh, v_mh); },
       Throws::shape_error, "abc::MultiHeadAttention::add_memory: ids.size() is 1, expected 2 (one id per sequence)"},
      {"MultiHeadAttention::read: an unknown id", [&] { mha.read(pool, {7, 9}, q_mh, out_mh); }, Throws::config_error,
       "abc::MultiHeadAttention::read: sequence id 9 is not in the pool (add it first)"},
      {"MultiHeadAttention::read: out of another width than the memories' values",
       [&] { mha.read(pool, {7, 8}, q_mh, out_d2); }, Throws::shape_error,
       "abc::MultiHeadAttention::read: out.dim() is 2, expected 3 (outputs have the memory's value width)"},
      {"MultiHeadAttention::read: q of 3 heads", [&] { mha.read(pool, {7, 8}, q_3h, out_mh); }, Throws::shape_error,
       "abc::MultiHeadAttention::read: q.heads() is 3, expected 4 (one per query head)"},
      {"MultiHeadAttention::read: out of 3 heads", [&] { mha.read(pool, {7, 8}, q_mh, out_3h); }, Throws::shape_error,
       "abc::MultiHeadAttention::read: out.heads() is 3, expected 4 (one per query head)"},
      {"MultiHeadAttention::read: one output sequence for two query sequences",
       [&] { mha.read(pool, {7, 8}, q_mh, out_one); }, Throws::shape_error,
       "abc::MultiHeadAttention::read: out.batch() is 1, expected 2 (one output sequence per query sequence)"},
      {"MultiHeadAttention::read: a sequence's output shorter than its queries",
       [&] { mha.read(pool, {7, 8}, q_mh, out_short); }, Throws::shape_error,
       "abc::MultiHeadAttention::read: out.length(1) is 2, expected 3 (one output row per query)"},
      {"Pool::states: an unknown id", [&] { pool.states(9); }, Throws::config_error,
       "abc::MultiHeadAttention::Pool: sequence id 9 is not in the pool (add it first)"},
      {"Pool::reset: an unknown id", [&] { pool.reset(9); }, Throws::config_error,
       "abc::MultiHeadAttention::Pool: sequence id 9 is not in the pool (add it first)"},
      {"HeadTensor::bshd: batch = -1", [&] { HT::bshd(buf.data(), -1, 2, 2, 2); }, Throws::shape_error,
       "abc::HeadTensor::bshd: batch is -1, expected at least 0 (a count)"},
      {"HeadTensor::bhsd: dim = -1", [&] { HT::bhsd(buf.data(), 1, 2, 2, -1); }, Throws::shape_error,
       "abc::HeadTensor::bhsd: dim is -1, expected at least 0 (a count)"},
      {"HeadTensor::strided: seq_stride = -4", [&] { HT::strided(buf.data(), 1, 2, 2, 2, 8, -4, 2); },
       Throws::shape_error, "abc::HeadTensor::strided: seq_stride is -4, expected at least 0 (a count)"},
      {"HeadTensor::packed: heads = -1", [&] { HT::packed(buf.data(), {0, 2}, -1, 2); }, Throws::shape_error,
       "abc::HeadTensor::packed: heads is -1, expected at least 0 (a count)"},
      {"HeadTensor::packed: no offsets", [&] { HT::packed(buf.data(), {}, 2, 2); }, Throws::shape_error,
       "abc::HeadTensor::packed: offsets.size() is 0, expected at least 1 (offsets have batch + 1 entries, from 0)"},
      {"HeadTensor::packed: offsets from 2", [&] { HT::packed(buf.data(), {2, 4}, 2, 2); }, Throws::shape_error,
       "abc::HeadTensor::packed: offsets.front() is 2, expected 0 (sequence 0 starts at row 0)"},
      {"HeadTensor::packed: decreasing offsets", [&] { HT::packed(buf.data(), {0, 4, 3}, 2, 2); }, Throws::shape_error,
       "abc::HeadTensor::packed: offsets[2] is 3, expected at least 4 (offsets[1]: offsets are non-decreasing)"},
      {"HeadTensor::bshd: two lengths for one sequence", [&] { HT::bshd(buf.data(), 1, 2, 2, 2, {2, 1}); },
       Throws::shape_error, "abc::HeadTensor::bshd: lengths.size() is 2, expected 1 (one length per sequence)"},
      {"HeadTensor::bshd: a length past seq", [&] { HT::bshd(buf.data(), 2, 2, 2, 2, {3, 1}); }, Throws::shape_error,
       "abc::HeadTensor::bshd: lengths[0] is 3, expected at most 2 (seq: lengths are within the padded length)"},
      {"HeadTensor::strided: a negative length", [&] { HT::strided(buf.data(), 2, 2, 2, 2, 8, 4, 2, {1, -1}); },
       Throws::shape_error, "abc::HeadTensor::strided: lengths[1] is -1, expected at least 0 (a sequence length)"},
      {"HeadTensor::bshd: an element count past Index", [&] { HT::bshd(buf.data(), big, big, 2, 2); },
       Throws::shape_error, "abc::HeadTensor::bshd: the element count overflows Index (the sizes are not a buffer's)"},
      {"HeadTensor::strided: a farthest element past Index",
       [&] { HT::strided(buf.data(), 3, 2, 2, 2, kMax / 2, 4, 2); },
       Throws::shape_error,
       "abc::HeadTensor::strided: the element count overflows Index (the sizes are not a buffer's)"},

      // ---- load_state ---------------------------------------------------------------------------
      {"load_state: no magic", [&] { abc::load_state(five, no_magic, dst); }, Throws::config_error,
       "abc::load_state: not a state blob (magic \"ABCSTATE\" missing, 20 bytes)"},
      {"load_state: truncated by a byte", [&] { abc::load_state(five, truncated, dst); }, Throws::config_error,
       "abc::load_state: checksum mismatch: the blob is truncated or corrupt"},
      {"load_state: a flipped bit", [&] { abc::load_state(five, corrupt, dst); }, Throws::config_error,
       "abc::load_state: checksum mismatch: the blob is truncated or corrupt"},
      {"load_state: a future version", [&] { abc::load_state(five, future, dst); }, Throws::config_error,
       "abc::load_state: version is 3, expected 2"},
      {"load_state: another control's blob",
       [&] { abc::load_state(five, abc::save_state(dilated, dilated.make_state(4, 3)), dst); }, Throws::config_error,
       "abc::load_state: control kind is abc::control::Dilated, expected abc::control::SlidingWindow"},
      {"load_state: another slot count",
       [&] { abc::load_state(five, abc::save_state(six, six.make_state(4, 3)), dst); },
       Throws::config_error, "abc::load_state: n is 6, expected 5 (the attention's num_slots())"},
      {"load_state: other widths than the destination's",
       [&] { abc::load_state(five, abc::save_state(five, five.make_state(5, 3)), dst); }, Throws::config_error,
       "abc::load_state: widths are d = 5, dv = 3, expected d = 4, dv = 3 (the destination's)"},
      {"load_state: absurd widths, into a blank state", [&] { abc::load_state(five, wide, blank); },
       Throws::config_error,
       "abc::load_state: widths are d = 1099511627780, dv = 3, expected each less than 2^40 (no state is that wide)"},
      {"load_state: the other scalar type",
       [&] { abc::load_state(five, abc::save_state(five_double, five_double.make_state(4, 3)), dst); },
       Throws::config_error, "abc::load_state: scalar size is 8 bytes, expected 4"},

      // ---- Weights: from_bytes, lookups, add, files -----------------------------------------------
      {"Weights::from_bytes: no magic", [&] { abc::Weights::from_bytes(no_magic); }, Throws::config_error,
       "abc::Weights::from_bytes: not a weights file (magic \"ABCWGHTS\" missing, 20 bytes)"},
      {"Weights::from_bytes: a state blob", [&] { abc::Weights::from_bytes(good); }, Throws::config_error,
       "abc::Weights::from_bytes: not a weights file (magic \"ABCWGHTS\" missing, " + std::to_string(good.size()) +
           " bytes)"},
      {"Weights::from_bytes: a future version", [&] { abc::Weights::from_bytes(wfuture); }, Throws::config_error,
       "abc::Weights::from_bytes: version is 2, expected 1"},
      {"Weights::from_bytes: a flipped bit", [&] { abc::Weights::from_bytes(wflipped); }, Throws::config_error,
       "abc::Weights::from_bytes: checksum mismatch: the file is truncated or corrupt"},
      {"Weights::from_bytes: truncated by a byte",
       [&] { abc::Weights::from_bytes(wgood.data(), wgood.size() - 1); }, Throws::config_error,
       "abc::Weights::from_bytes: checksum mismatch: the file is truncated or corrupt"},
      {"Weights::from_bytes: data cut short, checksum redone", [&] { abc::Weights::from_bytes(wcut); },
       Throws::config_error,
       "abc::Weights::from_bytes: truncated: the data of tensor 'w_phi' ([4 x 5] float32) needs 80 bytes at byte 74, "
       "expected at most the 72 before the checksum"},
      {"Weights::from_bytes: trailing bytes", [&] { abc::Weights::from_bytes(wtrailing); }, Throws::config_error,
       "abc::Weights::from_bytes: length is 161 bytes, expected 158 (the checksum follows the last tensor)"},
      {"Weights::from_bytes: an unknown dtype", [&] { abc::Weights::from_bytes(wdtype); }, Throws::config_error,
       "abc::Weights::from_bytes: tensor 'w' has dtype 7, expected 1 (float32) or 2 (float64)"},
      {"Weights::from_bytes: rank 9", [&] { abc::Weights::from_bytes(wrank); }, Throws::config_error,
       "abc::Weights::from_bytes: tensor 'w' has rank 9, expected at most 8"},
      {"Weights::from_bytes: a shape whose byte count, zeros left out, overflows", [&] { abc::Weights::from_bytes(whuge); },
       Throws::config_error,
       "abc::Weights::from_bytes: tensor 'w' is [1099511627776 x 0 x 1099511627776], expected dimensions from 0 to "
       "2^40 and, zeros left out, at most 2^62 bytes"},
      {"Weights::from_bytes: a dimension above 2^40", [&] { abc::Weights::from_bytes(wwide); }, Throws::config_error,
       "abc::Weights::from_bytes: tensor 'w' is [2199023255552], expected dimensions from 0 to 2^40 and, zeros left "
       "out, at most 2^62 bytes"},
      {"Weights::from_bytes: a name twice", [&] { abc::Weights::from_bytes(wtwice); }, Throws::config_error,
       "abc::Weights::from_bytes: tensor 'w' appears twice, expected unique names"},
      {"Weights::from_bytes: an empty name", [&] { abc::Weights::from_bytes(wunnamed); }, Throws::config_error,
       "abc::Weights::from_bytes: tensor name 0 is empty, expected at least one character"},
      {"Weights::from_bytes: an unknown metadata kind", [&] { abc::Weights::from_bytes(wkind); },
       Throws::config_error,
       "abc::Weights::from_bytes: metadata 'slots' has kind 9, expected 1 (integer), 2 (float) or 3 (string)"},
      {"Weights::from_bytes: a metadata key twice", [&] { abc::Weights::from_bytes(wkey_twice); },
       Throws::config_error, "abc::Weights::from_bytes: metadata 'n' appears twice, expected unique keys"},
      {"Weights::matrix: a missing tensor", [&] { wts.matrix<float>("w_q"); }, Throws::config_error,
       "abc::Weights::matrix: no tensor 'w_q' (the tensors are: w_phi)"},
      {"Weights::matrix: float64 asked of a float32 tensor", [&] { wts.matrix<double>("w_phi"); },
       Throws::config_error,
       "abc::Weights::matrix: tensor 'w_phi' is float32, expected float64 (the scalar type asked for)"},
      {"Weights::matrix: another shape", [&] { wts.matrix<float>("w_phi", 4, 6); }, Throws::shape_error,
       "abc::Weights::matrix: tensor 'w_phi' is [4 x 5], expected [4 x 6]"},
      {"Weights::vector: a matrix", [&] { wts.vector<float>("w_phi"); }, Throws::shape_error,
       "abc::Weights::vector: tensor 'w_phi' is [4 x 5], expected 1 dimension"},
      {"Weights::values: a missing tensor, none held", [] { abc::Weights().values<float>("w"); },
       Throws::config_error, "abc::Weights::values: no tensor 'w' (the tensors are: none)"},
      {"Weights::get_int: a missing key", [&] { wts.get_int("heads"); }, Throws::config_error,
       "abc::Weights::get_int: no metadata 'heads' (the keys are: slots)"},
      {"Weights::get_string: an integer", [&] { wts.get_string("slots"); }, Throws::config_error,
       "abc::Weights::get_string: metadata 'slots' is an integer, expected a string"},
      {"Weights::add: a name taken", [&] { wts_more.add<float>("w_phi", {1}, {1.0f}); }, Throws::config_error,
       "abc::Weights::add: tensor 'w_phi' exists already, expected a new name"},
      {"Weights::add: an empty name", [&] { wts_more.add<float>("", {1}, {1.0f}); }, Throws::config_error,
       "abc::Weights::add: a tensor name is empty, expected at least one character"},
      {"Weights::add: fewer values than the shape holds", [&] { wts_more.add<float>("b", {2, 3}, {1.0f}); },
       Throws::shape_error,
       "abc::Weights::add: tensor 'b' is [2 x 3], which holds 6 values, but 1 were given (expected exactly the "
       "product of the shape)"},
      {"Weights::add: a negative dimension", [&] { wts_more.add<float>("b", {2, -1}, {}); }, Throws::config_error,
       "abc::Weights::add: tensor 'b' is [2 x -1], expected dimensions from 0 to 2^40 and, zeros left out, at most "
       "2^62 bytes"},
      {"Weights::add: rank 9", [&] { wts_more.add<float>("b", std::vector<Index>(9, 1), {1.0f}); },
       Throws::config_error, "abc::Weights::add: tensor 'b' has rank 9, expected at most 8"},
      {"Weights::set_int: an empty key", [&] { wts_more.set_int("", 1); }, Throws::config_error,
       "abc::Weights::set_int: a metadata key is empty, expected at least one character"},
      {"control::activation_from_name(\"tanh\")", [] { abc::control::activation_from_name("tanh"); },
       Throws::config_error,
       "abc::control::activation_from_name: activation is 'tanh', expected 'exp', 'sigmoid' or 'relu'"},
      {"control::normalization_from_name(\"\")", [] { abc::control::normalization_from_name(""); },
       Throws::config_error,
       "abc::control::normalization_from_name: normalization is '', expected 'prefix' or 'per_token'"},
      {"load_weights: a missing file", [] { abc::load_weights("/nonexistent/abc/w.abcw"); }, Throws::config_error,
       "abc::load_weights: /nonexistent/abc/w.abcw: cannot read the file"},
      {"load_weights: a directory (it opens, but its reads fail)", [] { abc::load_weights(ABC_TEST_DATA_DIR); },
       Throws::config_error, std::string("abc::load_weights: ") + ABC_TEST_DATA_DIR + ": cannot read the file"},
      {"save_weights: a missing directory", [&] { abc::save_weights(wts, "/nonexistent/abc/w.abcw"); },
       Throws::config_error, "abc::save_weights: /nonexistent/abc/w.abcw: cannot write the file"},

      // ---- TramsAttention, KeyScore -------------------------------------------------------------
      {"TramsAttention({10, 6, 5}, score)", [&] { TramsAttention<float>({10, 6, 5}, score); }, Throws::config_error,
       "abc::select::TramsAttention: config.recent + config.topk is 11, expected at most 10 (config.pool: the attended "
       "tokens are chosen from the pool)"},
      {"TramsAttention({0, 0, 0}, score)", [&] { TramsAttention<float>({0, 0, 0}, score); }, Throws::config_error,
       "abc::select::TramsAttention: config.pool is 0, expected at least 1 (the pool holds at least one token)"},
      {"TramsAttention(config.scale = -1, score)", [&] { TramsAttention<float>(trams_bad_scale, score); },
       Throws::config_error,
       "abc::select::TramsAttention: config.scale is -1.000000, expected a finite value > 0, or 0 for 1/sqrt(d)"},
      {"TramsAttention::make_state: d other than W_Q's rows", [&] { trams.make_state(5, 3); }, Throws::shape_error,
       "abc::select::TramsAttention::make_state: d is 5, expected exactly 4 (the key width must be the rows of the "
       "score's W_Q)"},
      {"TramsAttention::make_state(4, 0)", [&] { trams.make_state(4, 0); }, Throws::config_error,
       "abc::select::TramsAttention::make_state: dv is 0, expected at least 1 (values need a column)"},
      {"TramsAttention::segment: values of another width", [&] { trams.segment(pool8, q2, q2, M::Ones(2, 2)); },
       Throws::shape_error,
       "abc::select::TramsAttention: v is [2 x 2], expected [2 x 3] (one value per query, of the state's value width)"},
      {"TramsAttention::segment: a pool of another TramsAttention", [&] { trams.segment(pool10, q2, q2, v2); },
       Throws::shape_error,
       "abc::select::TramsAttention: state.capacity() is 10, expected 8 (config.pool: the state must come from "
       "make_state(d, dv) of this attention)"},
      {"TramsAttention::step: an empty query", [&] { trams.step(pool8, z1, k1, v1); }, Throws::shape_error,
       "abc::select::TramsAttention: q.size() is 0, expected 4 (the state's key width)"},
      {"TramsAttention::step_into: an output of the wrong size", [&] { trams.step_into(pool8, q1, k1, v1, out2); },
       Throws::shape_error, "abc::select::TramsAttention: out.size() is 2, expected 3 (the state's value width)"},
      {"TramsAttention::distances(state, -1)", [&] { trams.distances(pool8, -1); }, Throws::config_error,
       "abc::select::TramsAttention::distances: n is -1, expected at least 0 (a token count)"},
      {"KeyScore(W_Q, key_norm)", [&] { KeyScore<float>(w_q, abc::select::ScoreKind::key_norm); }, Throws::config_error,
       "abc::select::KeyScore: kind is key_norm, expected a score of W_Q (KeyScore::norm() needs no W_Q)"},
      {"KeyScore(W_Q [3 x 0])", [] { KeyScore<float>(M(3, 0)); }, Throws::config_error,
       "abc::select::KeyScore: w_q is [3 x 0], expected [d x d_model] with d, d_model >= 1", true},
      {"KeyScore: a key of another width", [&] { score(V::Ones(2)); }, Throws::shape_error,
       "abc::select::KeyScore: k.size() is 2, expected 4 (the key width W_Q was made for: its rows)"},

      // ---- GlobalMemoryAttention, SoftmaxAttention ----------------------------------------------
      {"GlobalMemoryAttention(pattern, scale = -1)",
       [] { abc::GlobalMemoryAttention<float>(abc::LocalPattern::full(), -1.0); },
       Throws::config_error,
       "abc::GlobalMemoryAttention: scale is -1.000000, expected a finite value > 0, or 0 for 1/sqrt(d)"},
      {"GlobalMemoryAttention::forward: memory keys of another width", [&] { gmat.forward(gx, gx, gx, gm, gm4, gm); },
       Throws::shape_error,
       "abc::GlobalMemoryAttention: k_m is [2 x 4], expected [2 x 3] (memory keys have the main keys' width)"},
      {"GlobalMemoryAttention::forward_main: zero-width main keys", [&] { gmat.forward_main(gx, gx0, gx, gm, gm); },
       Throws::shape_error,
       "abc::GlobalMemoryAttention: k_x.cols() is 0, expected at least 1 (keys need a column)"},
      {"GlobalMemoryAttention::forward_into: out_m of 3 rows",
       [&] { gmat.forward_into(gx, gx, gx, gm, gm, gm, gout_x, gout_m); }, Throws::shape_error,
       "abc::GlobalMemoryAttention: out_m is [3 x 3], expected [2 x 3] (the output holds one row per memory token)"},
      {"SoftmaxAttention(scale = -2)", [] { abc::SoftmaxAttention<float>{-2.0}; }, Throws::config_error,
       "abc::SoftmaxAttention: scale is -2.000000, expected a finite value > 0, or 0 for 1/sqrt(d)"},
      {"SoftmaxAttention::forward: keys narrower than the queries", [&] { softmax.forward(q, k3, v); },
       Throws::shape_error,
       "abc::SoftmaxAttention::forward: k is [5 x 3], expected [5 x 4] (k.cols() must equal q.cols())"},
      {"SoftmaxAttention::forward_causal: more queries than keys", [&] { softmax.forward_causal(q6, k, v); },
       Throws::shape_error,
       "abc::SoftmaxAttention::forward_causal: q is [6 x 4], expected [5 x 4] (causal attention reads one query per "
       "key)"},
      {"SoftmaxAttention::forward_into: an output of the wrong width", [&] { softmax.forward_into(q, k, v, out52); },
       Throws::shape_error,
       "abc::SoftmaxAttention::forward: out is [5 x 2], expected [5 x 3] (the output buffer holds one row per query)"},
      {"SoftmaxAttention::forward: a non-finite key", [&] { softmax.forward(q, k_nan, v); }, Throws::config_error,
       "abc::SoftmaxAttention::forward: k holds a non-finite value at row 2, column 1, expected finite values"},
      {"SoftmaxAttention::forward: a non-finite query", [&] { softmax.forward(k_nan, k, v); }, Throws::config_error,
       "abc::SoftmaxAttention::forward: q holds a non-finite value at row 2, column 1, expected finite values"},
      {"SoftmaxAttention::forward_causal: a non-finite value", [&] { softmax.forward_causal(q, k, v_nan); },
       Throws::config_error,
       "abc::SoftmaxAttention::forward_causal: v holds a non-finite value at row 4, column 2, expected finite values"},
      {"SoftmaxAttention::forward_causal: fewer values than keys", [&] { softmax.forward_causal(q, k, v4); },
       Throws::shape_error,
       "abc::SoftmaxAttention::forward_causal: v is [4 x 3], expected [5 x 3] (v.rows() must equal k.rows(): one "
       "value per key)"},
      {"SoftmaxAttention::forward: zero-width values", [&] { softmax.forward(q, k, z); },
       Throws::shape_error, "abc::SoftmaxAttention::forward: v.cols() is 0, expected at least 1 (values need a column)"},
  };

  std::vector<std::string> messages;
  for (const Row& row : rows) {
    INFO("call: " << row.call);
    const auto got = outcome(row);
    CHECK(got.first == name(row.type));
    CHECK(got.second == row.message);
    messages.push_back(got.second);
  }
  // No count or size is printed as a shape: "x 0]" appears only where a matrix has a zero dimension.
  for (std::size_t i = 0; i < rows.size(); ++i) {
    INFO("call: " << rows[i].call << "\nmessage: " << messages[i]);
    const bool zero_shape = messages[i].find("x 0]") != std::string::npos;
    CHECK(zero_shape == rows[i].zero_dimension_shape);  // a flagged row keeps its zero dimension too
  }
}

}  // namespace error_messages_test
