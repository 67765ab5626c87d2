// SPDX-License-Identifier: MIT
// abc tests: what a State promises beyond its shapes. A state belongs to the control type that made
// it (another control of the same shapes refuses it); whatever save_state writes, load_state reads
// back; slot positions are integers, exact at any stream length; a blob names its control by an
// explicit tag, so a blob written by one compiler's build loads in another's (tests/data/state/,
// written by a g++ build, is loaded here by every build of the suite, clang's included).
#include <abc/abc.hpp>
#include <abc/state_io.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "support/blob.hpp"
#include "support/catch.hpp"
#include "support/reference.hpp"

namespace state_contract_test {

namespace {

using abc::Index;
using abc::select::KeyScore;

void write_u64(std::vector<std::uint8_t>& b, std::size_t at, std::uint64_t x) {
  for (int i = 0; i < 8; ++i) b[at + std::size_t(i)] = std::uint8_t(x >> (8 * i));
}

// Offset of the position field: magic, version, scalar size, tag length and tag, then n, d, dv.
std::size_t position_offset(const std::vector<std::uint8_t>& b) {
  const std::uint32_t tag_len = std::uint32_t(b[16]) | std::uint32_t(b[17]) << 8 | std::uint32_t(b[18]) << 16 |
                                std::uint32_t(b[19]) << 24;
  return 20 + tag_len + 24;
}

// An empty state of `attn` that has consumed `position` tokens, through the blob format (the one way
// a caller can hold such a state without streaming that many tokens).
template <class Attn>
typename Attn::state_type state_at(const Attn& attn, Index d, Index dv, std::uint64_t position) {
  auto blob = abc::save_state(attn, attn.make_state(d, dv));
  write_u64(blob, position_offset(blob), position);
  blob::reseal(blob);
  typename Attn::state_type s;
  abc::load_state(attn, blob, s);
  return s;
}

}  // namespace

TEMPLATE_TEST_CASE("a state made by one control is refused by another of the same shapes", "[state][errors]",
                   float, double) {
  using T = TestType;
  const Index d = 4, dv = 3, n = 6;
  const abc::BoundedAttention window{abc::control::SlidingWindow<T>{n}};
  const abc::BoundedAttention hashed{abc::control::RandomSlot<T>{abc::Slots{n}, abc::Seed{5}}};
  const auto q = ref::random<T>(5, d, 1), k = ref::random<T>(5, d, 2), v = ref::random<T>(5, dv, 3);
  auto s = window.make_state(d, dv);
  window.forward_causal(s, q, k, v);
  const auto before = s;
  REQUIRE(hashed.validate(s, q, k, v) == abc::Status::bad_config);
  REQUIRE(hashed.validate_step(s, q.row(0).transpose(), k.row(0).transpose(), v.row(0).transpose()) ==
          abc::Status::bad_config);
  REQUIRE_THROWS_AS(hashed.forward_causal(s, q, k, v), abc::config_error);
  REQUIRE_THROWS_WITH(hashed.forward_causal(s, q, k, v),
                      ABC_CONTAINS("abc::BoundedAttention::forward_causal: state comes from abc::control::SlidingWindow, "
                                   "expected abc::control::RandomSlot"));
  REQUIRE_THROWS_WITH(hashed.step(s, q.row(0).transpose(), k.row(0).transpose(), v.row(0).transpose()),
                      ABC_CONTAINS("abc::BoundedAttention::step: state comes from abc::control::SlidingWindow"));
  REQUIRE(s == before);
  // The same control type with other parameters shares the memory's meaning: accepted.
  const abc::BoundedAttention wider{abc::control::SlidingWindow<T>{n}, abc::Options{}};
  REQUIRE(wider.validate(s, q, k, v) == abc::Status::ok);
  // A state that no attention made (default-constructed) is named as such.
  abc::State<T> blank;
  REQUIRE_THROWS_WITH(window.forward_causal(blank, q, k, v), ABC_CONTAINS("state.keys() is [0 x 0], expected [6 x 4]"));
}

TEMPLATE_TEST_CASE("whatever save_state writes, load_state reads back", "[state_io][state]", float, double) {
  using T = TestType;
  const Index d = 4, dv = 2;
  // Keys of ±1e30: the TRAMS score overflows the scalar type to +inf, a legitimate score (such a
  // key ranks first). The blob must load.
  const abc::Matrix<T> w = ref::random<T>(d, 8, 11);
  const abc::BoundedAttention attn{abc::control::TopKEviction<T>(abc::Slots{5}, 2, KeyScore<T>(w))};
  abc::Matrix<T> k = ref::random<T>(9, d, 12);
  k.row(1).setConstant(T(1e30));
  k.row(4).setConstant(T(-1e30));
  k.row(6).setConstant(std::numeric_limits<T>::max());
  const auto q = ref::random<T>(9, d, 13), v = ref::random<T>(9, dv, 14);
  auto s = attn.make_state(d, dv);
  attn.forward_causal(s, q, k, v);
  const auto blob = abc::save_state(attn, s);
  abc::State<T> loaded;
  REQUIRE_NOTHROW(abc::load_state(attn, blob, loaded));
  REQUIRE(loaded == s);
  REQUIRE(abc::save_state(attn, loaded) == blob);
}

TEMPLATE_TEST_CASE("TopKEviction keeps integer positions: exact past 2^24 tokens, in float too", "[state][top_k_eviction]",
                   float, double) {
  using T = TestType;
  const Index d = 3, dv = 2, N = 40;
  const abc::BoundedAttention attn{abc::control::TopKEviction<T>(abc::Slots{7}, 3, KeyScore<T>::norm())};
  const auto q = ref::random<T>(N, d, 21), k = ref::random<T>(N, d, 22), v = ref::random<T>(N, dv, 23);
  const abc::Matrix<T> fresh = attn.forward_causal(q, k, v);
  // The same tokens after 2^40 + 1 others were consumed by an empty state (positions beyond any
  // float integer): the kept set depends only on scores and relative order, so the reads are equal.
  for (std::uint64_t start : {std::uint64_t(1) << 24, (std::uint64_t(1) << 40) + 1}) {
    INFO("start " << start);
    auto late = state_at(attn, d, dv, start);
    REQUIRE(late.position() == Index(start));
    REQUIRE(attn.forward_causal(late, q, k, v) == fresh);
    REQUIRE(late.position() == Index(start) + N);
    for (Index l = 0; l < attn.num_slots(); ++l) {
      REQUIRE(late.slot_position(l) >= Index(start));
      REQUIRE(late.slot_position(l) < Index(start) + N);
    }
  }
}

TEST_CASE("a blob names its control by an explicit tag", "[state_io]") {
  using namespace abc::control;
  const auto tag_of = [](const std::vector<std::uint8_t>& b) {
    const std::size_t len = std::size_t(b[16]) | std::size_t(b[17]) << 8;
    return std::string(b.begin() + 20, b.begin() + 20 + std::ptrdiff_t(len));
  };
  const abc::BoundedAttention window{SlidingWindow<float>{4}};
  REQUIRE(tag_of(abc::save_state(window, window.make_state(2, 2))) == "abc::control::SlidingWindow");
  using Longformer = Concat<GlobalTokens<double>, Gated<SlidingWindow<double>>>;
  const abc::BoundedAttention lf{Longformer(GlobalTokens<double>(std::vector<Index>{0}),
                                            Gated<SlidingWindow<double>>(SlidingWindow<double>{3},
                                                                        abc::Vector<double>::Ones(2), 0.0))};
  REQUIRE(tag_of(abc::save_state(lf, lf.make_state(2, 2))) ==
          "abc::control::Concat<abc::control::GlobalTokens,abc::control::Gated<abc::control::SlidingWindow>>");
  const abc::BoundedAttention rfa{RandomFeature<float, abc::feature::ArcCosine<float>>{
      abc::feature::ArcCosine<float>(abc::Matrix<float>::Ones(3, 2))}};
  REQUIRE(tag_of(abc::save_state(rfa, rfa.make_state(2, 2))) == "abc::control::RandomFeature<abc::feature::ArcCosine>");
}

// ---- blobs written by another build ----------------------------------------------------------------
// tests/data/state/<name>.blob were written by the hidden test case below in a g++ build
// (`abc_tests "[.golden-writer]"` with ABC_GOLDEN_DIR set). Every build of the suite (g++, clang
// under the sanitizers, the scalar kernels) loads them, saves them back byte for byte, and finds
// the state it computes itself from the same tokens, to rounding (builds may round differently).

namespace {

// Inputs every build computes alike: counter-based uniforms in [−1, 1), no library distribution.
template <class T>
abc::Matrix<T> tokens(Index rows, Index cols, std::uint64_t seed) {
  abc::Matrix<T> m(rows, cols);
  for (Index i = 0; i < m.size(); ++i) m.data()[i] = T(2 * abc::detail::uniform(seed, std::uint64_t(i)) - 1);
  return m;
}

struct Golden {
  std::string name;
  std::vector<std::uint8_t> (*make)();                                     // the blob this build writes
  void (*check)(const std::vector<std::uint8_t>& blob);                    // loads a blob and compares
};

template <class Control>
struct GoldenCase {
  static constexpr Index d = 5, dv = 3, n_tok = 37;
  using T = typename Control::scalar_type;
  static abc::BoundedAttention<Control> attention();  // defined per control below
  static abc::State<T> state() {
    const auto attn = attention();
    auto s = attn.make_state(d, dv);
    attn.forward_causal(s, tokens<T>(n_tok, d, 1), tokens<T>(n_tok, d, 2), tokens<T>(n_tok, dv, 3));
    return s;
  }
  static std::vector<std::uint8_t> make() { return abc::save_state(attention(), state()); }
  static void check(const std::vector<std::uint8_t>& blob) {
    const auto attn = attention();
    abc::State<T> loaded;
    REQUIRE_NOTHROW(abc::load_state(attn, blob, loaded));
    REQUIRE(abc::save_state(attn, loaded) == blob);
    const abc::State<T> mine = state();
    REQUIRE(loaded.position() == mine.position());
    const double tol = std::is_same<T, float>::value ? 1e-5 : 1e-12;
    // Elementwise, relative to the largest finite entry; equal infinities (an empty slot's −∞) match.
    const auto close = [tol](const abc::Matrix<T>& x, const abc::Matrix<T>& y) {
      if (x.rows() != y.rows() || x.cols() != y.cols()) return false;
      double big = 1;
      for (Index i = 0; i < y.size(); ++i)
        if (std::isfinite(y.data()[i])) big = std::max(big, double(std::abs(y.data()[i])));
      for (Index i = 0; i < y.size(); ++i)
        if (!(x.data()[i] == y.data()[i] || std::abs(double(x.data()[i]) - double(y.data()[i])) <= tol * big))
          return false;
      return true;
    };
    REQUIRE(close(loaded.keys(), mine.keys()));
    REQUIRE(close(loaded.values(), mine.values()));
    REQUIRE(close(loaded.slot_state(), mine.slot_state()));
    for (Index l = 0; l < mine.num_slots(); ++l) {
      REQUIRE(loaded.written(l) == mine.written(l));
      REQUIRE(loaded.slot_position(l) == mine.slot_position(l));
    }
    // Both continue alike.
    abc::State<T> a = loaded, b = mine;
    const auto q = tokens<T>(9, d, 4), k = tokens<T>(9, d, 5), v = tokens<T>(9, dv, 6);
    const abc::Matrix<T> oa = attn.forward_causal(a, q, k, v), ob = attn.forward_causal(b, q, k, v);
    REQUIRE((oa - ob).cwiseAbs().maxCoeff() <= 10 * tol);
  }
};

using namespace abc::control;
using Window = SlidingWindow<float>;
using MlpD = Mlp<double>;
using TopK = TopKEviction<float>;
using Longformer = Concat<GlobalTokens<float>, SlidingWindow<float>>;
using GatedMlp = Gated<Mlp<float>>;
using ArcRfa = RandomFeature<double, abc::feature::ArcCosine<double>>;
using Clusters = Cluster<float>;

template <> abc::BoundedAttention<Window> GoldenCase<Window>::attention() { return abc::BoundedAttention{Window{6}}; }
template <> abc::BoundedAttention<MlpD> GoldenCase<MlpD>::attention() { return abc::BoundedAttention{MlpD(abc::Slots{7}, d, abc::Seed{11})}; }
template <> abc::BoundedAttention<TopK> GoldenCase<TopK>::attention() {
  return abc::BoundedAttention{TopK(abc::Slots{7}, 3, KeyScore<float>(tokens<float>(d, 8, 12)))};
}
template <> abc::BoundedAttention<Longformer> GoldenCase<Longformer>::attention() {
  return abc::BoundedAttention{Longformer(GlobalTokens<float>(std::vector<Index>{0, 5}), SlidingWindow<float>{4})};
}
template <> abc::BoundedAttention<GatedMlp> GoldenCase<GatedMlp>::attention() {
  return abc::BoundedAttention{GatedMlp(Mlp<float>(abc::Slots{6}, d, abc::Seed{13}), tokens<float>(d, 1, 14), 0.25f)};
}
// The blob holds the state of raw inputs, written before unit inputs became the maps' default.
template <> abc::BoundedAttention<ArcRfa> GoldenCase<ArcRfa>::attention() {
  return abc::BoundedAttention{ArcRfa(abc::feature::ArcCosine<double>(tokens<double>(8, d, 15), abc::feature::InputNorm::raw))};
}
template <> abc::BoundedAttention<Clusters> GoldenCase<Clusters>::attention() {
  return abc::BoundedAttention{Clusters(tokens<float>(4, d, 16))};
}

template <class C>
Golden golden(const char* name) {
  return {name, &GoldenCase<C>::make, &GoldenCase<C>::check};
}

std::vector<Golden> goldens() {
  return {golden<Window>("sliding_window_float"), golden<MlpD>("mlp_double"), golden<TopK>("top_k_eviction_float"),
          golden<Longformer>("concat_global_window_float"), golden<GatedMlp>("gated_mlp_float"),
          golden<ArcRfa>("rfa_arc_cosine_double"), golden<Clusters>("cluster_float")};
}

std::vector<std::uint8_t> read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::vector<std::uint8_t>(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

}  // namespace

TEST_CASE("blobs written by a g++ build load in this build", "[state_io][portability]") {
  for (const Golden& g : goldens()) {
    INFO(g.name);
    const auto blob = read_file(std::string(ABC_TEST_DATA_DIR) + "/state/" + g.name + ".blob");
    REQUIRE(blob.size() > 64);
    g.check(blob);
    g.check(g.make());  // and this build's own blob, through the same checks
  }
}

TEST_CASE("write the blobs of tests/data/state", "[.golden-writer]") {
  const char* dir = std::getenv("ABC_GOLDEN_DIR");
  REQUIRE(dir != nullptr);
  for (const Golden& g : goldens()) {
    const auto blob = g.make();
    std::ofstream f(std::string(dir) + "/" + g.name + ".blob", std::ios::binary);
    f.write(reinterpret_cast<const char*>(blob.data()), std::streamsize(blob.size()));
    REQUIRE(f.good());
  }
}

}  // namespace state_contract_test
