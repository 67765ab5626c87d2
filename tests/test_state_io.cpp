// SPDX-License-Identifier: MIT
// abc tests: save_state / load_state: bit-exact round trips for every control, and every way a
// blob can be wrong (corrupt, truncated, wrong version, wrong control, wrong shape) reported with
// the destination left untouched.
#include <abc/abc.hpp>
#include <abc/state_io.hpp>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "support/blob.hpp"
#include "support/catch.hpp"
#include "support/reference.hpp"

namespace state_io_test {

namespace {

using abc::Index;

// Runs a prefix through `attn`, round-trips the state, and continues both: identical results.
template <class Attn, class T = typename Attn::scalar_type>
void round_trip(const Attn& attn, Index d, Index dv, Index tokens, const abc::Matrix<T>* x = nullptr) {
  auto q = ref::random<T>(tokens, d, 1), k = ref::random<T>(tokens, d, 2), v = ref::random<T>(tokens, dv, 3);
  const Index half = tokens / 2, rest = tokens - half;
  auto state = attn.make_state(d, dv);
  if (x)
    attn.forward_causal(state, q.topRows(half), k.topRows(half), v.topRows(half), x->topRows(half));
  else
    attn.forward_causal(state, q.topRows(half), k.topRows(half), v.topRows(half));
  const std::vector<std::uint8_t> blob = abc::save_state(attn, state);
  typename Attn::state_type restored;
  abc::load_state(attn, blob, restored);
  REQUIRE(restored == state);  // bit-exact: keys, values, normaliser, flags, position
  REQUIRE(abc::save_state(attn, restored) == blob);
  const abc::Matrix<T> a = x ? attn.forward_causal(state, q.bottomRows(rest), k.bottomRows(rest), v.bottomRows(rest), x->bottomRows(rest))
                             : attn.forward_causal(state, q.bottomRows(rest), k.bottomRows(rest), v.bottomRows(rest));
  const abc::Matrix<T> b = x ? attn.forward_causal(restored, q.bottomRows(rest), k.bottomRows(rest), v.bottomRows(rest), x->bottomRows(rest))
                             : attn.forward_causal(restored, q.bottomRows(rest), k.bottomRows(rest), v.bottomRows(rest));
  REQUIRE(a == b);
}

}  // namespace

TEMPLATE_TEST_CASE("a state round-trips bit-exactly for every control", "[state_io]", float, double) {
  using T = TestType;
  using namespace abc::control;
  const Index d = 6, dv = 5, N = 40;
  round_trip(abc::BoundedAttention{Identity<T>{N}}, d, dv, N);
  round_trip(abc::BoundedAttention{SlidingWindow<T>{7}}, d, dv, N);
  round_trip(abc::BoundedAttention{Mlp<T>(abc::Slots{8}, d, abc::Seed{3})}, d, dv, N);
  round_trip(abc::BoundedAttention{Mlp<T>(abc::Slots{8}, d, abc::Seed{3}, Activation::relu, Normalization::per_token)}, d, dv, N);
  round_trip(abc::BoundedAttention{SlotGates<T>(abc::Slots{8}, d, abc::Seed{3})}, d, dv, N);
  round_trip(abc::BoundedAttention{Linformer<T>(abc::Slots{6}, N, abc::Seed{2})}, d, dv, N);
  round_trip(abc::BoundedAttention{RandomSlot<T>(abc::Slots{5}, abc::Seed{9})}, d, dv, N);
  round_trip(abc::BoundedAttention{Compressive<T>(abc::Slots{10}, 4)}, d, dv, N);
  round_trip(abc::BoundedAttention{GlobalTokens<T>(std::vector<Index>{0, 3, 17, 30})}, d, dv, N);
  round_trip(abc::BoundedAttention{Dilated<T>(abc::Slots{4}, 2)}, d, dv, N);
  round_trip(abc::BoundedAttention{Cluster<T>(ref::random<T>(4, d, 7))}, d, dv, N);
  round_trip(abc::BoundedAttention{Gated<SlidingWindow<T>>(SlidingWindow<T>(6), abc::Vector<T>::Constant(d, T(0.2)), T(0.5))}, d, dv, N);
  round_trip(abc::BoundedAttention{Concat<GlobalTokens<T>, SlidingWindow<T>>(GlobalTokens<T>(std::vector<Index>{1, 2}), SlidingWindow<T>(5))}, d, dv, N);
  round_trip(abc::BoundedAttention{RandomFeature<T>{abc::feature::RandomFourier<T>(abc::feature::Projection<T>(8, d, abc::Seed{4}).draw())}}, d, dv, N);
}

TEMPLATE_TEST_CASE("bad blobs are refused by name and leave the destination untouched", "[state_io][errors]", float, double) {
  using T = TestType;
  const Index d = 4, dv = 3;
  abc::BoundedAttention attn{abc::control::SlidingWindow<T>{5}};
  auto state = attn.make_state(d, dv);
  auto q = ref::random<T>(9, d, 1), v = ref::random<T>(9, dv, 2);
  attn.forward_causal(state, q, q, v);
  const std::vector<std::uint8_t> good = abc::save_state(attn, state);
  auto dst = attn.make_state(d, dv);
  attn.forward_causal(dst, q.topRows(3), q.topRows(3), v.topRows(3));
  const auto before = dst;
  auto refused = [&](std::vector<std::uint8_t> blob, const char* why) {
    INFO(why);
    REQUIRE_THROWS_AS(abc::load_state(attn, blob, dst), abc::config_error);
    REQUIRE_THROWS_WITH(abc::load_state(attn, blob, dst), ABC_CONTAINS(why));
    REQUIRE(dst == before);
  };
  // Truncated anywhere: the checksum no longer matches (or the magic is gone).
  for (std::size_t cut : {std::size_t(0), std::size_t(5), std::size_t(20), good.size() / 2, good.size() - 1})
    refused(std::vector<std::uint8_t>(good.begin(), good.begin() + long(cut)), cut < 16 ? "not a state blob" : "checksum mismatch");
  // One flipped bit in the payload.
  auto corrupt = good;
  corrupt[good.size() / 2] ^= 0x10;
  refused(corrupt, "checksum mismatch");
  // A future version, and version 1 (compiler-spelled control names, no slot positions), resealed
  // so only the version is wrong.
  for (std::uint8_t version : {std::uint8_t(3), std::uint8_t(1)}) {
    auto other_version = good;
    other_version[8] = version;
    blob::reseal(other_version);
    refused(other_version, version == 3 ? "version is 3, expected 2" : "version is 1, expected 2");
  }
  // A valid blob of another control.
  abc::BoundedAttention other{abc::control::Dilated<T>{abc::Slots{5}, 1}};
  auto ostate = other.make_state(d, dv);
  refused(abc::save_state(other, ostate), "control kind is abc::control::Dilated");
  // Same control, other shapes.
  abc::BoundedAttention wider{abc::control::SlidingWindow<T>{6}};
  refused(abc::save_state(wider, wider.make_state(d, dv)), "n is 6, expected 5");
  refused(abc::save_state(attn, attn.make_state(d + 1, dv)), "widths are d = 5, dv = 3, expected d = 4, dv = 3");
  // The other scalar type.
  using U = std::conditional_t<std::is_same<T, float>::value, double, float>;
  abc::BoundedAttention other_type{abc::control::SlidingWindow<U>{5}};
  refused(abc::save_state(other_type, other_type.make_state(d, dv)), "scalar size is");
  // A resealed blob with a non-finite memory value is still refused.
  auto nan_blob = good;
  // From the end: checksum, 5 written flags, 5 slot positions of 8 bytes, normaliser, Ṽ, K̃.
  const std::size_t first_key = good.size() - 8 - 5 - 5 * 8 - sizeof(T) * (2 * 5 + 5 * dv + 5 * d);
  std::memset(&nan_blob[first_key], 0xff, sizeof(T));  // all-ones bits: a NaN
  blob::reseal(nan_blob);
  refused(nan_blob, "non-finite");
}

// The fields load_state checks after the checksum, each edited alone in a resealed blob: a written
// flag, the position, and the per-slot state by every rule a control states (the default rule of a
// normalised control, TopKEviction's own, and the rules Concat and Gated take from their parts).
// Each must be refused by name, the destination untouched.
namespace {

// A blob's trailing fields, from the end (save_state's layout): checksum, n written flags, n slot
// positions of 8 bytes, the per-slot state [2 × n] row by row.
template <class T>
struct Tail {
  std::size_t size, n;
  std::size_t written(Index l) const { return size - 8 - n + std::size_t(l); }
  std::size_t position(Index l) const { return size - 8 - n - 8 * n + 8 * std::size_t(l); }
  std::size_t slot_state(Index row, Index l) const {
    return size - 8 - n - 8 * n - 2 * n * sizeof(T) + (std::size_t(row) * n + std::size_t(l)) * sizeof(T);
  }
};

template <class T>
std::vector<std::uint8_t> with_scalar(std::vector<std::uint8_t> b, std::size_t at, T x) {
  std::memcpy(&b.at(at), &x, sizeof(T));
  blob::reseal(b);
  return b;
}

std::vector<std::uint8_t> with_u64(std::vector<std::uint8_t> b, std::size_t at, std::uint64_t x) {
  blob::put_u64(b, at, x);
  blob::reseal(b);
  return b;
}

// Loads `blob` into a copy of `dst`: refused with `why` in the message, the copy as it was.
template <class Attn>
void refused_state(const Attn& attn, const std::vector<std::uint8_t>& blob, const typename Attn::state_type& dst,
                   const char* why) {
  INFO(why);
  auto into = dst;
  REQUIRE_THROWS_AS(abc::load_state(attn, blob, into), abc::config_error);
  REQUIRE_THROWS_WITH(abc::load_state(attn, blob, into), ABC_CONTAINS(why));
  REQUIRE(into == dst);
}

}  // namespace

TEMPLATE_TEST_CASE("a blob's flags, position and per-slot state are checked by every rule", "[state_io][errors]",
                   float, double) {
  using T = TestType;
  using namespace abc::control;
  constexpr T nan = std::numeric_limits<T>::quiet_NaN(), inf = std::numeric_limits<T>::infinity();
  const Index d = 4, dv = 3, n = 5;
  auto q = ref::random<T>(9, d, 1), v = ref::random<T>(9, dv, 2);

  // A normalised control (the default rule): ABC-MLP's running max and sum, and no positions.
  abc::BoundedAttention mlp{Mlp<T>(abc::Slots{n}, d, abc::Seed{3})};
  auto state = mlp.make_state(d, dv);
  mlp.forward_causal(state, q, q, v);
  const std::vector<std::uint8_t> good = abc::save_state(mlp, state);
  const Tail<T> at{good.size(), std::size_t(n)};
  auto dst = mlp.make_state(d, dv);
  mlp.forward_causal(dst, q.topRows(2), q.topRows(2), v.topRows(2));
  {
    typename decltype(mlp)::state_type back;
    abc::load_state(mlp, good, back);  // the unedited blob loads
    REQUIRE(back == state);
  }
  auto flag = good;
  flag[at.written(n - 1)] = 2;
  blob::reseal(flag);
  refused_state(mlp, flag, dst, "abc::load_state: a written flag is 2, expected 0 or 1");
  // The position: the u64 after the tag, n, d and dv (magic, version, scalar size, tag length, tag).
  const std::size_t pos_at = 8 + 4 + 4 + 4 + std::size_t(good[16]) + 3 * 8;
  REQUIRE(good[pos_at] == 9);  // the nine tokens consumed
  refused_state(mlp, with_u64(good, pos_at, std::uint64_t(1) << 62), dst,
                "abc::load_state: position is 4611686018427387904, expected less than 2^62");
  const char* max_bad = "abc::load_state: the per-slot state is invalid: a running maximum of the normaliser is NaN or +inf";
  refused_state(mlp, with_scalar(good, at.slot_state(0, 2), nan), dst, max_bad);
  refused_state(mlp, with_scalar(good, at.slot_state(0, n - 1), inf), dst, max_bad);
  refused_state(mlp, with_scalar(good, at.slot_state(1, 0), -inf), dst,
                "the per-slot state is invalid: a sum of the normaliser is not finite");
  refused_state(mlp, with_u64(good, at.position(3), 0), dst,
                "the per-slot state is invalid: a slot position is set, but the control keeps none");
  {
    // −∞ is a running max the rule takes (a slot with no mass yet).
    typename decltype(mlp)::state_type back;
    abc::load_state(mlp, with_scalar(good, at.slot_state(0, 1), -inf), back);
    REQUIRE(std::isinf(back.slot_state()(0, 1)));
  }

  // TopKEviction: 3 tokens in 5 slots, so slots 0–2 hold tokens and 3–4 are empty.
  abc::BoundedAttention topk{TopKEviction<T>(abc::Slots{n}, 1, abc::select::KeyScore<T>::norm())};
  auto kept = topk.make_state(d, dv);
  topk.forward_causal(kept, q.topRows(3), q.topRows(3), v.topRows(3));
  REQUIRE(kept.slot_position(0) == 0);
  REQUIRE(kept.slot_position(3) == -1);
  const std::vector<std::uint8_t> kept_blob = abc::save_state(topk, kept);
  const Tail<T> kat{kept_blob.size(), std::size_t(n)};
  const auto kdst = topk.make_state(d, dv);
  const std::string invalid = "abc::load_state: the per-slot state is invalid: ";
  refused_state(topk, with_scalar(kept_blob, kat.slot_state(0, 1), nan), kdst,
                (invalid + "a kept token's score is NaN").c_str());
  refused_state(topk, with_scalar(kept_blob, kat.slot_state(1, 2), T(1)), kdst,
                (invalid + "row 1 of the per-slot state is unused and must be 0").c_str());
  refused_state(topk, with_u64(kept_blob, kat.position(2), 3), kdst,
                (invalid + "a slot holds a token position outside [0, position)").c_str());
  refused_state(topk, with_u64(kept_blob, kat.position(2), std::uint64_t(-2)), kdst,
                (invalid + "a slot holds a token position outside [0, position)").c_str());
  refused_state(topk, with_scalar(kept_blob, kat.slot_state(0, 4), T(0)), kdst,
                (invalid + "an empty slot has a score").c_str());
  refused_state(topk, with_u64(kept_blob, kat.position(2), 0), kdst, (invalid + "two slots hold the same token").c_str());

  // Concat checks each part on its own columns: the window's slots by the default rule, TopK's by
  // its own (slot 2 of the whole is TopK's slot 0).
  abc::BoundedAttention both{Concat<SlidingWindow<T>, TopKEviction<T>>(
      SlidingWindow<T>(2), TopKEviction<T>(abc::Slots{3}, 1, abc::select::KeyScore<T>::norm()))};
  auto bstate = both.make_state(d, dv);
  both.forward_causal(bstate, q.topRows(2), q.topRows(2), v.topRows(2));
  const std::vector<std::uint8_t> both_blob = abc::save_state(both, bstate);
  const Tail<T> bat{both_blob.size(), std::size_t(n)};
  const auto bdst = both.make_state(d, dv);
  refused_state(both, with_u64(both_blob, bat.position(1), 0), bdst,
                (invalid + "a slot position is set, but the control keeps none").c_str());
  refused_state(both, with_scalar(both_blob, bat.slot_state(0, 2), nan), bdst,
                (invalid + "a kept token's score is NaN").c_str());
  refused_state(both, with_scalar(both_blob, bat.slot_state(0, 4), T(0)), bdst,
                (invalid + "an empty slot has a score").c_str());

  // Gated takes its inner control's rule.
  abc::BoundedAttention gated{Gated<TopKEviction<T>>(TopKEviction<T>(abc::Slots{n}, 1, abc::select::KeyScore<T>::norm()),
                                                    abc::Vector<T>::Constant(d, T(0.2)), T(0.5))};
  auto gstate = gated.make_state(d, dv);
  gated.forward_causal(gstate, q.topRows(3), q.topRows(3), v.topRows(3));
  const std::vector<std::uint8_t> gated_blob = abc::save_state(gated, gstate);
  refused_state(gated, with_u64(gated_blob, Tail<T>{gated_blob.size(), std::size_t(n)}.position(1), 0),
                gated.make_state(d, dv), (invalid + "two slots hold the same token").c_str());
}

}  // namespace state_io_test
