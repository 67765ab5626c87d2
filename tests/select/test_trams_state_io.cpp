// SPDX-License-Identifier: MIT
// abc tests: select::save_state / select::load_state for a TRAMS pool: the documented byte layout
// written out independently, bit-exact round trips that continue as the saved pool would (empty,
// filling, wrapped around, every score kind), and every way a blob can be wrong, refused by name
// with the destination left as it was.
#include <abc/abc.hpp>
#include <abc/select/state_io.hpp>

#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "support/blob.hpp"
#include "support/catch.hpp"
#include "support/reference.hpp"

namespace trams_state_io_test {

namespace {

using abc::Index;
using abc::select::KeyScore;
using abc::select::ScoreKind;
using abc::select::TramsAttention;
using abc::select::TramsConfig;
using Blob = std::vector<std::uint8_t>;

template <class T>
KeyScore<T> make_score(ScoreKind kind, Index d) {
  if (kind == ScoreKind::key_norm) return KeyScore<T>::norm();
  return KeyScore<T>(ref::random<T>(d, 2 * d + 1, 11), kind);
}

// The layout of select::save_state's documentation, written byte by byte from the pool's public
// accessors: the test's own writer, not the library's.
template <class T>
Blob documented_layout(const TramsAttention<T>& attn, const typename TramsAttention<T>::State& s) {
  Blob b;
  const auto put = [&b](std::uint64_t x, int bytes) {
    for (int i = 0; i < bytes; ++i) b.push_back(std::uint8_t(x >> (8 * i)));
  };
  const auto put_scalar = [&put](T x) {
    std::uint64_t bits = 0;
    std::memcpy(&bits, &x, sizeof(T));
    put(bits, int(sizeof(T)));
  };
  for (char c : std::string("ABCSTATE")) b.push_back(std::uint8_t(c));
  put(2, 4);
  put(sizeof(T), 4);
  const std::string tag = "abc::select::TramsAttention";
  put(tag.size(), 4);
  for (char c : tag) b.push_back(std::uint8_t(c));
  put(std::uint64_t(attn.config().pool), 8);
  put(std::uint64_t(s.key_dim()), 8);
  put(std::uint64_t(s.value_dim()), 8);
  put(std::uint64_t(s.size()), 8);
  put(std::uint64_t(s.position()), 8);
  put(std::uint64_t(attn.score().kind()), 4);
  put(std::uint64_t(attn.score().model_dim()), 8);
  for (Index age = 0; age < s.size(); ++age) {
    for (Index j = 0; j < s.key_dim(); ++j) put_scalar(s.key(age)(j));
    for (Index j = 0; j < s.value_dim(); ++j) put_scalar(s.value(age)(j));
    put_scalar(s.score(age));
  }
  std::uint64_t h = 0xcbf29ce484222325ULL;  // FNV-1a 64 of everything before the checksum
  for (std::uint8_t x : b) h = (h ^ x) * 0x100000001b3ULL;
  put(h, 8);
  return b;
}

template <class T>
void feed(const TramsAttention<T>& attn, typename TramsAttention<T>::State& s, Index tokens, Index d, Index dv,
          std::uint64_t seed) {
  const auto q = ref::random<T>(tokens, d, seed), k = ref::random<T>(tokens, d, seed + 1),
             v = ref::random<T>(tokens, dv, seed + 2);
  Index t = 0;
  for (Index len : {Index(3), Index(1), Index(5)})  // segments of several lengths, then steps
    if (t + len <= tokens) {
      attn.segment(s, q.middleRows(t, len), k.middleRows(t, len), v.middleRows(t, len));
      t += len;
    }
  for (; t < tokens; ++t) attn.step(s, q.row(t).transpose(), k.row(t).transpose(), v.row(t).transpose());
}

// Offsets in a blob of the tag "abc::select::TramsAttention" (27 bytes): after magic, version,
// scalar size and the tag's length and bytes come pool, d, dv, size, position, kind, model_dim.
constexpr std::size_t header = 8 + 4 + 4 + 4 + 27;
constexpr std::size_t at_pool = header, at_d = header + 8, at_dv = header + 16, at_size = header + 24,
                      at_position = header + 32, at_kind = header + 40, at_tokens = header + 52;

}  // namespace

TEMPLATE_TEST_CASE("a TRAMS pool blob has the documented layout", "[trams][state_io]", float, double) {
  using T = TestType;
  const Index d = 5, dv = 3;
  for (ScoreKind kind : {ScoreKind::trams_code, ScoreKind::key_norm}) {
    TramsAttention<T> attn(TramsConfig{7, 2, 3}, make_score<T>(kind, d));
    auto s = attn.make_state(d, dv);
    for (Index tokens : {0, 4, 12}) {  // empty, filling, wrapped around the ring
      INFO("tokens " << tokens);
      if (tokens > 0) feed(attn, s, tokens - s.position(), d, dv, std::uint64_t(tokens));
      const Blob blob = abc::select::save_state(attn, s);
      REQUIRE(blob == documented_layout(attn, s));
      REQUIRE(blob.size() == at_tokens + std::size_t(s.size()) * (d + dv + 1) * sizeof(T) + 8);
    }
  }
}

TEMPLATE_TEST_CASE("a TRAMS pool round-trips bit-exactly and continues as the saved one",
                   "[trams][state_io]", float, double) {
  using T = TestType;
  const Index d = 6, dv = 4;
  for (ScoreKind kind : {ScoreKind::trams_code, ScoreKind::trams_paper, ScoreKind::reformulated_norm,
                         ScoreKind::key_norm}) {
    for (auto positions : {abc::select::PositionMode::compacted, abc::select::PositionMode::original}) {
      TramsConfig cfg{9, 3, 2, positions};
      TramsAttention<T> attn(cfg, make_score<T>(kind, d));
      for (Index prefix : {0, 5, 9, 23}) {  // empty, filling, just full, wrapped
        INFO("kind " << int(kind) << ", prefix " << prefix);
        auto s = attn.make_state(d, dv);
        feed(attn, s, prefix, d, dv, 5);
        const Blob blob = abc::select::save_state(attn, s);
        typename TramsAttention<T>::State loaded;  // default-constructed: takes the blob's widths
        abc::select::load_state(attn, blob, loaded);
        REQUIRE(loaded.size() == s.size());
        REQUIRE(loaded.position() == s.position());
        REQUIRE(loaded.capacity() == s.capacity());
        for (Index age = 0; age < s.size(); ++age) {
          REQUIRE(loaded.key(age) == s.key(age));
          REQUIRE(loaded.value(age) == s.value(age));
          REQUIRE(loaded.score(age) == s.score(age));
          REQUIRE(loaded.token_position(age) == s.token_position(age));
        }
        REQUIRE(abc::select::save_state(attn, loaded) == blob);
        REQUIRE(attn.attended(loaded) == attn.attended(s));
        REQUIRE(attn.distances(loaded, 3) == attn.distances(s, 3));
        // Both continue over more than a pool's worth of segments and steps: equal bit for bit.
        const auto q = ref::random<T>(20, d, 31), k = ref::random<T>(20, d, 32), v = ref::random<T>(20, dv, 33);
        REQUIRE(attn.segment(loaded, q.topRows(6), k.topRows(6), v.topRows(6)) ==
                attn.segment(s, q.topRows(6), k.topRows(6), v.topRows(6)));
        for (Index t = 6; t < 20; ++t)
          REQUIRE(attn.step(loaded, q.row(t).transpose(), k.row(t).transpose(), v.row(t).transpose()) ==
                  attn.step(s, q.row(t).transpose(), k.row(t).transpose(), v.row(t).transpose()));
        REQUIRE(abc::select::save_state(attn, loaded) == abc::select::save_state(attn, s));
      }
    }
  }
}

TEST_CASE("a TRAMS pool may be loaded into an attention that reads it differently", "[trams][state_io]") {
  const Index d = 4, dv = 2;
  const KeyScore<double> score(ref::random<double>(d, 8, 3));
  TramsAttention<double> saver(TramsConfig{8, 4, 4}, score), reader(TramsConfig{8, 1, 2}, score);
  auto s = saver.make_state(d, dv);
  feed(saver, s, 13, d, dv, 9);
  auto loaded = reader.make_state(d, dv);
  abc::select::load_state(reader, abc::select::save_state(saver, s), loaded);
  REQUIRE(reader.attended(loaded) == reader.attended(s));  // recent and topk are the reader's
  REQUIRE(reader.attended(loaded).size() == 3);
}

TEMPLATE_TEST_CASE("bad TRAMS pool blobs are refused by name and leave the destination untouched",
                   "[trams][state_io][errors]", float, double) {
  using T = TestType;
  using U = std::conditional_t<std::is_same<T, float>::value, double, float>;
  const Index d = 4, dv = 3;
  TramsAttention<T> attn(TramsConfig{6, 2, 2}, make_score<T>(ScoreKind::trams_code, d));
  auto s = attn.make_state(d, dv);
  feed(attn, s, 9, d, dv, 1);
  const Blob good = abc::select::save_state(attn, s);
  auto dst = attn.make_state(d, dv);
  feed(attn, dst, 2, d, dv, 2);
  const Blob before = abc::select::save_state(attn, dst);
  const auto refused = [&](const Blob& blob, const std::string& why) {
    INFO(why);
    REQUIRE_THROWS_AS(abc::select::load_state(attn, blob, dst), abc::config_error);
    REQUIRE_THROWS_WITH(abc::select::load_state(attn, blob, dst), ABC_CONTAINS("abc::select::load_state: " + why));
    REQUIRE(abc::select::save_state(attn, dst) == before);
    REQUIRE(dst.size() == 2);
  };
  const auto edited = [&good](std::size_t at, std::uint64_t x) {
    Blob b = good;
    blob::put_u64(b, at, x);
    blob::reseal(b);
    return b;
  };

  for (std::size_t cut : {std::size_t(0), std::size_t(7), std::size_t(30), good.size() / 2, good.size() - 1})
    refused(Blob(good.begin(), good.begin() + long(cut)), cut < 16 ? "not a state blob" : "checksum mismatch");
  Blob flipped = good;
  flipped[good.size() / 2] ^= 0x04;
  refused(flipped, "checksum mismatch");
  Blob version = good;
  version[8] = 3;
  blob::reseal(version);
  refused(version, "version is 3, expected 2");

  // Another kind of state, either way round, and the other scalar type.
  abc::BoundedAttention window{abc::control::SlidingWindow<T>{6}};
  refused(abc::save_state(window, window.make_state(d, dv)),
          "control kind is abc::control::SlidingWindow, expected abc::select::TramsAttention");
  auto wstate = window.make_state(d, dv);
  REQUIRE_THROWS_WITH(abc::load_state(window, good, wstate),
                      ABC_CONTAINS("control kind is abc::select::TramsAttention, expected abc::control::SlidingWindow"));
  TramsAttention<U> other_type(TramsConfig{6, 2, 2}, KeyScore<U>::norm());
  refused(abc::select::save_state(other_type, other_type.make_state(d, dv)),
          "scalar size is " + std::to_string(sizeof(U)) + " bytes, expected " + std::to_string(sizeof(T)));

  // Another attention's pool, the destination's widths, the score.
  TramsAttention<T> bigger(TramsConfig{7, 2, 2}, make_score<T>(ScoreKind::trams_code, d));
  refused(abc::select::save_state(bigger, bigger.make_state(d, dv)), "pool is 7, expected 6 (the attention's config.pool)");
  refused(edited(at_pool, 5), "pool is 5, expected 6 (the attention's config.pool)");
  refused(edited(at_dv, 2), "widths are d = 4, dv = 2, expected d = 4, dv = 3 (the destination's)");
  refused(edited(at_d, 0), "widths are d = 0, dv = 3, expected each in [1, 65536]");
  refused(edited(at_dv, 65537), "widths are d = 4, dv = 65537, expected each in [1, 65536]");
  refused(edited(at_d, std::uint64_t(1) << 62), "widths are d = 4611686018427387904, dv = 3");
  {
    // Widths in range whose rows for a pool of 2^47 tokens overflow an Index: refused before a
    // cache of that size is allocated (a pool that large is only ever a configuration).
    const std::uint64_t rows = std::uint64_t(1) << 47;
    TramsAttention<T> huge(TramsConfig{Index(rows), 2, 2}, KeyScore<T>::norm());
    Blob wide = good;
    blob::put_u64(wide, at_pool, rows);
    blob::put_u64(wide, at_d, 65536);
    blob::put_u64(wide, at_dv, 65536);
    blob::reseal(wide);
    typename TramsAttention<T>::State blank;
    REQUIRE_THROWS_WITH(abc::select::load_state(huge, wide, blank),
                        ABC_CONTAINS("abc::select::load_state: 140737488355328 rows × (d + dv) overflows "
                                     "(140737488355328 × 131072)"));
    REQUIRE(blank.capacity() == 0);
  }
  TramsAttention<T> paper(TramsConfig{6, 2, 2}, make_score<T>(ScoreKind::trams_paper, d));
  refused(abc::select::save_state(paper, paper.make_state(d, dv)),
          "the score is kind 1 with model_dim 9, expected kind 0 with model_dim 9");
  TramsAttention<T> narrow_score(TramsConfig{6, 2, 2}, KeyScore<T>(ref::random<T>(d, 5, 1)));
  refused(abc::select::save_state(narrow_score, narrow_score.make_state(d, dv)),
          "the score is kind 0 with model_dim 5, expected kind 0 with model_dim 9");
  {
    // Keys of another width, the score's kind and model_dim the same: into a blank destination (no
    // widths of its own to compare), the score's W_Q still refuses them.
    TramsAttention<T> wide_score(TramsConfig{6, 2, 2}, KeyScore<T>(ref::random<T>(d + 2, 2 * d + 1, 11)));
    const Blob wide = abc::select::save_state(wide_score, wide_score.make_state(d + 2, dv));
    typename TramsAttention<T>::State blank;
    REQUIRE_THROWS_WITH(abc::select::load_state(attn, wide, blank),
                        ABC_CONTAINS("abc::select::load_state: d is 6, expected 4 (the rows of the score's W_Q)"));
    REQUIRE(blank.capacity() == 0);
  }

  // Counts no stream could have produced, and lengths that do not match them.
  refused(edited(at_size, 7), "size is 7, expected at most 6 (the pool)");
  refused(edited(at_position, 5), "position is 5, expected in [6, 2^62)");
  refused(edited(at_position, std::uint64_t(1) << 62), "position is 4611686018427387904, expected in [6, 2^62)");
  refused(edited(at_size, 5), "length is " + std::to_string(good.size()) + " bytes, expected " +
                                  std::to_string(good.size() - (d + dv + 1) * sizeof(T)));
  Blob longer = good;
  longer.insert(longer.end() - 8, std::uint8_t(0));
  blob::reseal(longer);
  refused(longer, "length is " + std::to_string(good.size() + 1) + " bytes");
  Blob kind = good;
  kind[at_kind] = 9;
  blob::reseal(kind);
  refused(kind, "the score is kind 9 with model_dim 9, expected kind 0");
  Blob short_header(good.begin(), good.begin() + long(at_kind));  // ends inside the score's fields
  short_header.resize(short_header.size() + 8);
  blob::reseal(short_header);
  refused(short_header, "truncated header");

  // Values no pool holds: a non-finite key or value, a NaN score (a key's score is never NaN).
  const std::size_t token2 = at_tokens + 2 * (d + dv + 1) * sizeof(T);
  for (std::size_t entry : {std::size_t(0), std::size_t(d + 1)}) {
    Blob bad = good;
    const T inf = std::numeric_limits<T>::infinity();
    std::memcpy(&bad[token2 + entry * sizeof(T)], &inf, sizeof(T));
    blob::reseal(bad);
    refused(bad, "the key or value of the token of age 2 is not finite");
  }
  Blob nan_score = good;
  const T nan = std::numeric_limits<T>::quiet_NaN();
  std::memcpy(&nan_score[token2 + std::size_t(d + dv) * sizeof(T)], &nan, sizeof(T));
  blob::reseal(nan_score);
  refused(nan_score, "the score of the token of age 2 is NaN");
  // An infinite score is one a pool holds (a key whose score overflowed ranks last): accepted.
  Blob inf_score = good;
  const T minus_inf = -std::numeric_limits<T>::infinity();
  std::memcpy(&inf_score[token2 + std::size_t(d + dv) * sizeof(T)], &minus_inf, sizeof(T));
  blob::reseal(inf_score);
  auto accepts = attn.make_state(d, dv);
  abc::select::load_state(attn, inf_score, accepts);
  REQUIRE(accepts.score(2) == minus_inf);
}

TEST_CASE("select::save_state refuses a pool of another attention", "[trams][state_io][errors]") {
  TramsAttention<float> attn(TramsConfig{6, 2, 2}, KeyScore<float>::norm()),
      other(TramsConfig{5, 2, 2}, KeyScore<float>::norm());
  REQUIRE_THROWS_AS(abc::select::save_state(attn, other.make_state(3, 3)), abc::config_error);
  REQUIRE_THROWS_WITH(abc::select::save_state(attn, other.make_state(3, 3)),
                      ABC_CONTAINS("abc::select::save_state: state.capacity() is 5, expected 6"));
  REQUIRE_THROWS_WITH(abc::select::save_state(attn, TramsAttention<float>::State{}),
                      ABC_CONTAINS("abc::select::save_state: state.capacity() is 0, expected 6"));
}

}  // namespace trams_state_io_test
