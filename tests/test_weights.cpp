// SPDX-License-Identifier: MIT
// abc tests: abc::Weights (abc/weights.hpp): the bytes of docs/weights.md exactly, bit-exact round
// trips through bytes and files, strict lookups, and damaged files refused with the object left as
// it was. The whole message of every error is asserted in tests/test_error_messages.cpp.
#include <abc/control/mlp.hpp>
#include <abc/weights.hpp>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include "support/catch.hpp"
#include "support/weights_file.hpp"

namespace weights_test {

namespace {

using abc::Index;
using abc::Weights;

std::string temp_path(const std::string& name) { return (std::filesystem::temp_directory_path() / name).string(); }

template <class T>
std::vector<std::uint8_t> le_bytes(const std::vector<T>& values) {
  abc::detail::Writer w;
  for (const T x : values) w.scalar(x);
  return w.bytes;
}

template <class T>
std::uint64_t bits(T x) {
  if constexpr (sizeof(T) == 8) {
    std::uint64_t b;
    std::memcpy(&b, &x, 8);
    return b;
  } else {
    std::uint32_t b;
    std::memcpy(&b, &x, 4);
    return b;
  }
}

// Values no arithmetic would produce by chance: signed zero, infinities, a NaN with a payload,
// subnormals, the extremes, and ordinary numbers.
template <class T>
std::vector<T> awkward_values() {
  using L = std::numeric_limits<T>;
  T payload_nan;
  if constexpr (sizeof(T) == 8) {
    const std::uint64_t b = 0x7ff8000000012345ULL;
    std::memcpy(&payload_nan, &b, 8);
  } else {
    const std::uint32_t b = 0x7fc01234u;
    std::memcpy(&payload_nan, &b, 4);
  }
  return {T(0) * T(-1), L::infinity(), -L::infinity(), payload_nan, L::denorm_min(), L::min(), L::max(),
          L::lowest(), T(1) / T(3), T(-2.5)};
}

}  // namespace

TEST_CASE("weights: CRC-32 is zlib's", "[weights]") {
  const char check[] = "123456789";
  REQUIRE(abc::detail::crc32(reinterpret_cast<const std::uint8_t*>(check), 9) == 0xcbf43926u);
  REQUIRE(abc::detail::crc32(nullptr, 0) == 0u);
}

TEST_CASE("weights: to_bytes writes docs/weights.md's layout, field by field", "[weights]") {
  Weights w;
  w.set_string("control", "mlp");
  w.set_int("slots", -3);
  w.set_float("tau", 0.5);
  abc::Matrix<float> m(2, 3);
  m << 1, 2, 3, 4, 5, 6;
  w.add("w_phi", m);
  const abc::Vector<double> b = (abc::Vector<double>(2) << -1.0, 0.25).finished();
  w.add("bias", b);
  w.add<float>("scalar", {}, {7.0f});

  using namespace weights_file;
  std::vector<std::uint8_t> i64, f64, str;
  put_u64(i64, std::uint64_t(std::int64_t(-3)));
  put_u64(f64, bits(0.5));
  put_text(str, "mlp");
  const std::vector<std::uint8_t> expected = file(
      {{"control", 3, str}, {"slots", 1, i64}, {"tau", 2, f64}},
      {{"w_phi", 1, {2, 3}, le_bytes<float>({1, 2, 3, 4, 5, 6})},
       {"bias", 2, {2}, le_bytes<double>({-1.0, 0.25})},
       {"scalar", 1, {}, le_bytes<float>({7.0f})}});
  REQUIRE(w.to_bytes() == expected);
  // The first bytes, spelled out: magic, version 1, three metadata entries, the first key's length.
  const std::vector<std::uint8_t> head = {'A', 'B', 'C', 'W', 'G', 'H', 'T', 'S', 1, 0, 0, 0, 3, 0, 0, 0, 7, 0, 0, 0};
  REQUIRE(std::vector<std::uint8_t>(expected.begin(), expected.begin() + 20) == head);
}

TEMPLATE_TEST_CASE("weights: a round trip through bytes and through a file is bit-exact", "[weights]", float, double) {
  using T = TestType;
  Weights w;
  const std::vector<T> odd = awkward_values<T>();
  w.add<T>("awkward", {2, 5}, odd);
  abc::Matrix<T> m(3, 4);
  for (Index i = 0; i < m.size(); ++i) m.data()[i] = T(i) / T(7) - T(1);
  w.add("embed.weight", m);
  w.add("head.bias", abc::Vector<T>::LinSpaced(5, T(-1), T(1)));
  w.add<T>("rank4", {2, 1, 3, 2}, std::vector<T>(12, T(0.5)));
  w.add<T>("empty", {0, 3}, {});
  w.set_int("vocab", std::numeric_limits<std::int64_t>::min());
  w.set_float("nan", std::numeric_limits<double>::quiet_NaN());
  w.set_string("activation", "exp");
  w.set_string("note", std::string("bytes \0 and \xff", 13));

  const std::vector<std::uint8_t> bytes = w.to_bytes();
  const Weights back = Weights::from_bytes(bytes);
  REQUIRE(back == w);
  REQUIRE(back.to_bytes() == bytes);  // a file that loads writes back byte for byte
  REQUIRE(back.names() == std::vector<std::string>{"awkward", "embed.weight", "head.bias", "rank4", "empty"});
  REQUIRE(back.meta_keys() == std::vector<std::string>{"vocab", "nan", "activation", "note"});

  const std::vector<T> odd_back = back.values<T>("awkward");
  REQUIRE(odd_back.size() == odd.size());
  for (std::size_t i = 0; i < odd.size(); ++i) {
    INFO("value " << i);
    CHECK(bits(odd_back[i]) == bits(odd[i]));  // NaN payload and the sign of zero included
  }
  REQUIRE(back.matrix<T>("embed.weight") == m);
  REQUIRE(back.matrix<T>("embed.weight", 3, 4) == m);
  REQUIRE(back.vector<T>("head.bias", 5) == abc::Vector<T>::LinSpaced(5, T(-1), T(1)));
  REQUIRE(back.shape("rank4") == std::vector<Index>{2, 1, 3, 2});
  REQUIRE(back.matrix<T>("empty").rows() == 0);
  REQUIRE(back.matrix<T>("empty").cols() == 3);
  REQUIRE(back.dtype("embed.weight") == (sizeof(T) == 4 ? Weights::DType::float32 : Weights::DType::float64));
  REQUIRE(back.meta_kind("vocab") == Weights::MetaKind::int64);
  REQUIRE(back.meta_kind("nan") == Weights::MetaKind::float64);
  REQUIRE(back.meta_kind("note") == Weights::MetaKind::string);
  REQUIRE(back.get_int("vocab") == std::numeric_limits<std::int64_t>::min());
  REQUIRE(std::isnan(back.get_float("nan")));
  REQUIRE(back.get_string("note") == std::string("bytes \0 and \xff", 13));
  REQUIRE(back.has("rank4"));
  REQUIRE_FALSE(back.has("rank5"));
  REQUIRE(back.has_meta("activation"));
  REQUIRE_FALSE(back.has_meta("normalization"));

  // A column-major or expression argument is stored row by row, as a row-major one.
  Weights col;
  const Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic> cm = m;
  col.add("embed.weight", cm);
  REQUIRE(col.matrix<T>("embed.weight") == m);

  const std::string path = temp_path("abc_test_weights_" + std::to_string(sizeof(T)) + ".abcw");
  abc::save_weights(w, path);
  const Weights loaded = abc::load_weights(path);
  std::remove(path.c_str());
  REQUIRE(loaded == w);
}

TEST_CASE("weights: a zero dimension leaves the others bounded, wherever it stands", "[weights]") {
  const std::uint64_t m = std::uint64_t(1) << 20, big = std::uint64_t(1) << 40;
  const Weights w = Weights::from_bytes(weights_file::file({}, {{"e", 1, {m, 0, m}, {}}}));
  REQUIRE(w.shape("e") == std::vector<Index>{Index(m), 0, Index(m)});
  REQUIRE(w.values<float>("e").empty());
  for (const std::vector<std::uint64_t>& dims :
       {std::vector<std::uint64_t>{big, big, 0}, {0, big, big}, {big, 0, big}}) {
    INFO("dims " << dims[0] << ", " << dims[1] << ", " << dims[2]);
    CHECK_THROWS_WITH(Weights::from_bytes(weights_file::file({}, {{"e", 1, dims, {}}})),
                      ABC_CONTAINS("and, zeros left out, at most 2^62 bytes"));
  }
  Weights added;
  REQUIRE_THROWS_AS(added.add<double>("e", {0, Index(big), Index(big)}, {}), abc::config_error);
  added.add<double>("e", {0, Index(m), Index(m)}, {});
  REQUIRE(added.shape("e") == std::vector<Index>{0, Index(m), Index(m)});
}

TEST_CASE("weights: metadata set again keeps its place and takes the new value and kind", "[weights]") {
  Weights w;
  w.set_int("slots", 8);
  w.set_string("control", "mlp");
  w.set_float("slots", 16.0);
  REQUIRE(w.meta_keys() == std::vector<std::string>{"slots", "control"});
  REQUIRE(w.get_float("slots") == 16.0);
  REQUIRE_THROWS_AS(w.get_int("slots"), abc::config_error);
}

TEST_CASE("weights: a failed call leaves the weights as they were", "[weights]") {
  Weights w;
  w.add<float>("a", {2}, {1.0f, 2.0f});
  w.set_int("n", 1);
  const std::vector<std::uint8_t> before = w.to_bytes();
  REQUIRE_THROWS_AS(w.add<float>("a", {1}, {3.0f}), abc::config_error);        // taken
  REQUIRE_THROWS_AS(w.add<float>("b", {3}, {3.0f}), abc::shape_error);         // too few values
  REQUIRE_THROWS_AS(w.add<float>("b", {-1}, {}), abc::config_error);           // negative
  REQUIRE_THROWS_AS(w.add<double>("", {1}, {1.0}), abc::config_error);         // no name
  REQUIRE_THROWS_AS(w.set_string("", "x"), abc::config_error);                 // no key
  REQUIRE_THROWS_AS(w.matrix<double>("a"), abc::config_error);                 // float32
  REQUIRE_THROWS_AS(w.vector<float>("a", 3), abc::shape_error);
  REQUIRE(w.to_bytes() == before);
}

TEST_CASE("weights: every flipped bit and every truncation of a file is refused", "[weights]") {
  Weights w;
  w.set_string("control", "window");
  w.add<float>("w", {2, 2}, {1, 2, 3, 4});
  w.add<double>("b", {1}, {0.5});
  const std::vector<std::uint8_t> good = w.to_bytes();
  for (std::size_t at = 0; at < good.size(); ++at) {
    for (int bit = 0; bit < 8; ++bit) {
      auto bad = good;
      bad[at] = std::uint8_t(bad[at] ^ (1u << bit));
      INFO("byte " << at << ", bit " << bit);
      CHECK_THROWS_AS(Weights::from_bytes(bad), abc::config_error);
    }
  }
  for (std::size_t size = 0; size < good.size(); ++size) {
    INFO("first " << size << " bytes");
    CHECK_THROWS_AS(Weights::from_bytes(good.data(), size), abc::config_error);
  }
  REQUIRE(Weights::from_bytes(good) == w);
}

TEST_CASE("weights: load_weights names the file in its messages", "[weights]") {
  const std::string path = temp_path("abc_test_weights_future.abcw");
  const std::vector<std::uint8_t> future = weights_file::file({}, {}, 2);
  {
    std::FILE* f = std::fopen(path.c_str(), "wb");
    REQUIRE(f);
    REQUIRE(std::fwrite(future.data(), 1, future.size(), f) == future.size());
    std::fclose(f);
  }
  CHECK_THROWS_WITH(abc::load_weights(path), "abc::load_weights: " + path + ": version is 2, expected 1");
  std::remove(path.c_str());
}

TEST_CASE("weights: a file cut short and sealed again is refused by the field it cuts", "[weights]") {
  Weights w;
  w.set_int("n", 4);
  w.add<float>("w", {2, 2}, {1, 2, 3, 4});
  const std::vector<std::uint8_t> good = w.to_bytes();
  // Every cut from just after the version to just before the checksum, resealed: the checksum
  // passes, so the parser's own length checks must catch each one.
  for (std::size_t keep = 12; keep + 4 < good.size(); ++keep) {
    std::vector<std::uint8_t> cut(good.begin(), good.begin() + std::ptrdiff_t(keep));
    weights_file::seal(cut);
    INFO("first " << keep << " bytes, resealed");
    CHECK_THROWS_WITH(Weights::from_bytes(cut), ABC_CONTAINS("abc::Weights::from_bytes: truncated: "));
  }
}

TEST_CASE("weights: an ABC-MLP configuration travels as names", "[weights]") {
  using abc::control::Activation;
  using abc::control::Normalization;
  Weights w;
  w.set_string("activation", "sigmoid");
  w.set_string("normalization", "per_token");
  const Weights back = Weights::from_bytes(w.to_bytes());
  REQUIRE(abc::control::activation_from_name(back.get_string("activation")) == Activation::sigmoid);
  REQUIRE(abc::control::normalization_from_name(back.get_string("normalization")) == Normalization::per_token);
  REQUIRE(abc::control::activation_from_name("exp") == Activation::exp);
  REQUIRE(abc::control::activation_from_name("relu") == Activation::relu);
  REQUIRE(abc::control::normalization_from_name("prefix") == Normalization::prefix);
  CHECK_THROWS_WITH(abc::control::activation_from_name("Exp", "decode"),
                    "decode: activation is 'Exp', expected 'exp', 'sigmoid' or 'relu'");
}

}  // namespace weights_test
