// SPDX-License-Identifier: MIT
// abc tests: a State whose memory is held in bfloat16 (StateStorage::bfloat16). Every call on it
// equals the same call on the memory widened to float, its K̃ and Ṽ then rounded to bfloat16, bit
// for bit: a step (one rounding per token), a prefill (one rounding per call), grouped-query heads,
// every kind of control (dense, one-hot, the linear readout). The reference rounds a float state
// with save_state / load_state into a bfloat16 destination (the codec itself is checked against
// rounding in double in kernel/test_bf16.cpp).
#include <abc/abc.hpp>
#include <abc/state_io.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "support/catch.hpp"
#include "support/reference.hpp"

namespace state_storage_test {

namespace {

using abc::Index;
using abc::StateStorage;

// A float state's memory rounded to bfloat16 (then widened again when `widen`), through the public
// blob round trip: a blob holds T, and a bfloat16 destination rounds it.
template <class Attn>
typename Attn::state_type rounded(const Attn& attn, const typename Attn::state_type& s, bool widen) {
  typename Attn::state_type packed = attn.make_state(std::max<Index>(s.key_dim(), 1), s.value_dim(), StateStorage::bfloat16);
  abc::load_state(attn, abc::save_state(attn, s), packed);
  if (!widen) return packed;
  typename Attn::state_type back;
  abc::load_state(attn, abc::save_state(attn, packed), back);
  return back;
}

// N steps on a bfloat16 state against N steps on a float state rounded after each, bit for bit.
template <class Attn>
void check_steps(const Attn& attn, Index d, Index dv, Index steps, std::uint64_t seed) {
  const auto q = ref::random<float>(steps, d, seed), k = ref::random<float>(steps, d, seed + 1),
             v = ref::random<float>(steps, dv, seed + 2);
  auto packed = attn.make_state(d, dv, StateStorage::bfloat16);
  auto wide = attn.make_state(d, dv);
  REQUIRE(packed.storage() == StateStorage::bfloat16);
  for (Index t = 0; t < steps; ++t) {
    INFO("token " << t);
    const abc::Vector<float> got = attn.step(packed, q.row(t).transpose(), k.row(t).transpose(), v.row(t).transpose());
    const abc::Vector<float> want = attn.step(wide, q.row(t).transpose(), k.row(t).transpose(), v.row(t).transpose());
    REQUIRE(got == want);
    wide = rounded(attn, wide, true);
    REQUIRE(packed == rounded(attn, wide, false));
  }
  // And the rounding did something: the float path without rounding drifts away from it.
  auto free_running = attn.make_state(d, dv);
  attn.forward_causal(free_running, q, k, v);
  REQUIRE(free_running.values() != packed.values());
}

// A prefill of N tokens rounds once, at the end of the call.
template <class Attn>
void check_prefill(const Attn& attn, Index d, Index dv, std::uint64_t seed) {
  const auto q = ref::random<float>(37, d, seed), k = ref::random<float>(37, d, seed + 1),
             v = ref::random<float>(37, dv, seed + 2);
  auto packed = attn.make_state(d, dv, StateStorage::bfloat16);
  auto wide = attn.make_state(d, dv);
  for (Index t0 : {Index(0), Index(20)}) {  // two calls: the second continues a rounded memory
    const Index c = t0 == 0 ? 20 : 17;
    const abc::Matrix<float> got = attn.forward_causal(packed, q.middleRows(t0, c), k.middleRows(t0, c), v.middleRows(t0, c));
    const abc::Matrix<float> want = attn.forward_causal(wide, q.middleRows(t0, c), k.middleRows(t0, c), v.middleRows(t0, c));
    REQUIRE(got == want);
    wide = rounded(attn, wide, true);
    REQUIRE(packed == rounded(attn, wide, false));
  }
  // A bfloat16 memory read by many queries reads the widened memory.
  const abc::Matrix<float> read = attn.read(packed, q);
  REQUIRE(read == attn.read(wide, q));
}

}  // namespace

TEST_CASE("a bfloat16 state's step equals the float step with the memory rounded after each token",
          "[state][bf16]") {
  using namespace abc::control;
  // Dense schedules read by one head take the fused bfloat16 pass; slot counts and widths off the
  // SIMD width exercise its scalar tails.
  for (Index n : {Index(16), Index(19)})
    for (Index d : {Index(8), Index(13)}) {
      INFO("n = " << n << ", d = " << d);
      check_steps(abc::BoundedAttention{Mlp<float>(abc::Slots{n}, d, abc::Seed{1})}, d, d + 3, 40, 10);
      check_steps(abc::BoundedAttention{Linformer<float>(abc::Slots{n}, 64, abc::Seed{2})}, d, d, 40, 20);
      check_steps(abc::BoundedAttention{SlotGates<float>(abc::Slots{n}, d, abc::Seed{3})}, d, 5, 40, 30);
    }
  // One-hot writes and the linear readout unpack the memory for the call.
  check_steps(abc::BoundedAttention{SlidingWindow<float>{6}}, 8, 8, 30, 40);
  check_steps(abc::BoundedAttention{GlobalTokens<float>(std::vector<Index>{0, 2, 5})}, 8, 8, 10, 50);
  check_steps(abc::BoundedAttention{RandomFeature<float>(abc::feature::RandomFourier<float>(ref::random<float>(8, 8, 6)))}, 8, 8, 30, 60);
}

TEST_CASE("a bfloat16 state's prefill and read equal the float ones, the memory rounded once per call",
          "[state][bf16]") {
  using namespace abc::control;
  check_prefill(abc::BoundedAttention{Mlp<float>(abc::Slots{16}, 8, abc::Seed{1})}, 8, 8, 70);
  check_prefill(abc::BoundedAttention{SlidingWindow<float>{6}}, 8, 8, 80);
  check_prefill(abc::BoundedAttention{RandomFeature<float>(abc::feature::RandomFourier<float>(ref::random<float>(8, 8, 6)))}, 8, 8, 90);
}

TEST_CASE("a bfloat16 state holds half the memory's bytes and keeps its storage through a blob", "[state][bf16]") {
  const Index n = 32, d = 16, dv = 24;
  abc::BoundedAttention attn{abc::control::Mlp<float>(abc::Slots{n}, d, abc::Seed{1})};
  auto wide = attn.make_state(d, dv), packed = attn.make_state(d, dv, StateStorage::bfloat16);
  REQUIRE(wide.bytes() - packed.bytes() == std::size_t(n * (d + dv)) * 2);
  const auto q = ref::random<float>(9, d, 1), k = ref::random<float>(9, d, 2), v = ref::random<float>(9, dv, 3);
  attn.forward_causal(packed, q, k, v);
  REQUIRE(packed.keys().rows() == n);
  REQUIRE(packed.keys().cols() == d);
  REQUIRE(packed.values().cols() == dv);
  REQUIRE(packed.position() == 9);
  // The blob holds the widened memory; a bfloat16 destination gets the same bits back, a float one
  // the widened values, and a float state loaded into a bfloat16 one is rounded.
  const auto blob = abc::save_state(attn, packed);
  auto again = attn.make_state(d, dv, StateStorage::bfloat16);
  abc::load_state(attn, blob, again);
  REQUIRE(again == packed);
  abc::BoundedAttention<abc::control::Mlp<float>>::state_type widened;
  abc::load_state(attn, blob, widened);
  REQUIRE(widened.storage() == StateStorage::native);
  REQUIRE(widened.keys() == packed.keys());
  REQUIRE(widened.values() == packed.values());
  REQUIRE(widened != packed);  // same values, another storage
  // reset() empties a bfloat16 memory like a float one.
  packed.reset();
  REQUIRE(packed == attn.make_state(d, dv, StateStorage::bfloat16));
}

TEST_CASE("backward from a bfloat16 start state differentiates the call on the widened memory", "[state][bf16]") {
  const Index n = 8, d = 5, dv = 4;
  abc::BoundedAttention attn{abc::control::Mlp<float>(abc::Slots{n}, d, abc::Seed{4})};
  auto packed = attn.make_state(d, dv, StateStorage::bfloat16);
  const auto q = ref::random<float>(12, d, 1), k = ref::random<float>(12, d, 2), v = ref::random<float>(12, dv, 3),
             g = ref::random<float>(6, dv, 4);
  attn.forward_causal(packed, q.topRows(6), k.topRows(6), v.topRows(6));
  abc::BoundedAttention<abc::control::Mlp<float>>::state_type wide;
  abc::load_state(attn, abc::save_state(attn, packed), wide);
  const auto got = attn.backward_causal(packed, q.bottomRows(6), k.bottomRows(6), v.bottomRows(6), g, {});
  const auto want = attn.backward_causal(wide, q.bottomRows(6), k.bottomRows(6), v.bottomRows(6), g, {});
  REQUIRE(got.q == want.q);
  REQUIRE(got.k == want.k);
  REQUIRE(got.v == want.v);
  REQUIRE(got.state.keys == want.state.keys);
  REQUIRE(got.control.w_phi == want.control.w_phi);
}

TEST_CASE("bfloat16 storage is refused for double states and unknown storages, naming the argument",
          "[state][bf16][errors]") {
  abc::BoundedAttention attn{abc::control::Mlp<double>(abc::Slots{4}, 3, abc::Seed{1})};
  REQUIRE_THROWS_AS(attn.make_state(3, 3, StateStorage::bfloat16), abc::config_error);
  REQUIRE_THROWS_WITH(attn.make_state(3, 3, StateStorage::bfloat16),
                      "abc::BoundedAttention::make_state: storage is StateStorage::bfloat16, expected "
                      "StateStorage::native for a double state (bfloat16 storage holds float memories)");
  abc::BoundedAttention fattn{abc::control::Mlp<float>(abc::Slots{4}, 3, abc::Seed{1})};
  REQUIRE_THROWS_WITH(fattn.make_state(3, 3, static_cast<StateStorage>(7)),
                      "abc::BoundedAttention::make_state: storage is 7, expected StateStorage::native or "
                      "StateStorage::bfloat16");
}

}  // namespace state_storage_test
