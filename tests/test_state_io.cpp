// SPDX-License-Identifier: MIT
// abc tests: save_state / load_state: bit-exact round trips for every control, and every way a
// blob can be wrong (corrupt, truncated, wrong version, wrong control, wrong shape) reported with
// the destination left untouched.
#include <abc/abc.hpp>
#include <abc/state_io.hpp>

#include <cstring>

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

}  // namespace state_io_test
