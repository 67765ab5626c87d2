// SPDX-License-Identifier: MIT
// abc tests: a long stream through every control and through TRAMS, decoded token by token. The
// decode state must stay the same size (State::bytes) and the process's resident memory flat, every
// output finite, and the position exact. The stream length is ABC_STRESS_TOKENS (default 100 000,
// the short form CI runs); the long form is 10^6 tokens:
//
//     ABC_STRESS_TOKENS=1000000 build/tests/abc_tests "[stream]"
//
// Numerical accuracy over 10^6 tokens against float64 references is test_stress.cpp's "[long]" case
// (window and ABC-MLP); each control's exactness is its own test file's.
#include <abc/abc.hpp>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "support/catch.hpp"
#include "support/reference.hpp"

namespace stress_stream_test {

namespace {

using abc::Index;
namespace ctl = abc::control;

Index stream_tokens() {
  const char* s = std::getenv("ABC_STRESS_TOKENS");
  return s ? Index(std::strtoll(s, nullptr, 10)) : Index(100000);
}

// Resident set size in bytes, from /proc (0 where there is none: the check is then skipped).
std::size_t rss_bytes() {
  std::FILE* f = std::fopen("/proc/self/statm", "r");
  if (!f) return 0;
  unsigned long pages = 0, resident = 0;
  const int got = std::fscanf(f, "%lu %lu", &pages, &resident);
  std::fclose(f);
  return got == 2 ? std::size_t(resident) * 4096 : 0;
}

// Token t's entries: counter-based uniforms in [−1, 1), so nothing of size N is ever held.
float entry(std::uint64_t t, Index c, std::uint64_t stream) {
  return float(2 * abc::detail::uniform(stream, t * 4096 + std::uint64_t(c)) - 1);
}

struct Report {
  std::string name;
  std::size_t state_bytes = 0;
  long long rss_growth = 0;
};

// Decodes N tokens through `step` (or `decode(state, q, k, v, out)`), checking as it goes.
template <class MakeState, class Decode>
Report stream(const std::string& name, Index N, Index d, MakeState make_state, Decode decode) {
  auto state = make_state();
  std::size_t bytes = 0;  // after the first tenth: TRAMS sizes its read buffers once its pool is full
  abc::Vector<float> q(d), k(d), v(d), out(d);
  std::size_t rss_warm = 0;
  bool finite = true;
  for (Index t = 0; t < N; ++t) {
    for (Index c = 0; c < d; ++c) {
      q(c) = entry(std::uint64_t(t), c, 1);
      k(c) = entry(std::uint64_t(t), c, 2);
      v(c) = entry(std::uint64_t(t), c, 3);
    }
    decode(state, q, k, v, out);
    finite = finite && out.allFinite();
    if (t == N / 10) {
      rss_warm = rss_bytes();
      bytes = state.bytes();
    }
  }
  INFO(name);
  REQUIRE(finite);
  REQUIRE(state.bytes() == bytes);
  REQUIRE(std::int64_t(state.position()) == std::int64_t(N));
  return {name, bytes, rss_warm ? static_cast<long long>(rss_bytes()) - static_cast<long long>(rss_warm) : 0};
}

template <class Control>
Report bounded(const std::string& name, Control c, Index N, Index d) {
  const abc::BoundedAttention<Control> attn{std::move(c)};
  return stream(
      name, N, d, [&] { return attn.make_state(d, d); },
      [&](auto& s, const auto& q, const auto& k, const auto& v, auto& out) { attn.step_into(s, q, k, v, out); });
}

}  // namespace

TEST_CASE("stream: every control and TRAMS decode N tokens in flat memory", "[stress][stream]") {
  const Index N = stream_tokens(), d = 16, n = 16;
  REQUIRE(N >= 1000);  // the TRAMS pool (64 tokens) fills within the first tenth
  const abc::Vector<float> w_g = ref::random<float>(d, 1, 951, 0.3);
  std::vector<Index> globals{0, 1, 2, 3, N / 2, N - 1};
  const abc::Matrix<float> proj = ref::random<float>(n / 2, d, 952);  // RFA's W, D = n / 2
  std::vector<Report> r;
  r.push_back(bounded("sliding window", ctl::SlidingWindow<float>{n}, N, d));
  r.push_back(bounded("dilated", ctl::Dilated<float>{abc::Slots{n / 4}, 4}, N, d));
  r.push_back(bounded("ABC-MLP exp", ctl::Mlp<float>(abc::Slots{n}, d, abc::Seed{953}), N, d));
  r.push_back(bounded("ABC-MLP sigmoid", ctl::Mlp<float>(abc::Slots{n}, d, abc::Seed{954}, ctl::Activation::sigmoid), N, d));
  r.push_back(bounded("ABC-MLP relu per-token", ctl::Mlp<float>(abc::Slots{n}, d, abc::Seed{955}, ctl::Activation::relu, ctl::Normalization::per_token), N, d));
  r.push_back(bounded("GSA slot gates", ctl::SlotGates<float>(abc::Slots{n}, d, abc::Seed{962}), N, d));
  r.push_back(bounded("Linformer (N_max = N)", ctl::Linformer<float>(abc::Slots{4}, N, abc::Seed{956}), N, d));
  r.push_back(bounded("random slot", ctl::RandomSlot<float>(abc::Slots{n}, abc::Seed{957}), N, d));
  r.push_back(bounded("compressive", ctl::Compressive<float>(abc::Slots{n}, (N + n - 1) / n), N, d));
  r.push_back(bounded("global tokens", ctl::GlobalTokens<float>(globals), N, d));
  r.push_back(bounded("cluster", ctl::Cluster<float>(ref::random<float>(n, d, 958)), N, d));
  r.push_back(bounded("gated window", ctl::Gated<ctl::SlidingWindow<float>>(ctl::SlidingWindow<float>{n}, w_g, 1.0f), N, d));
  r.push_back(bounded("gated ABC-MLP", ctl::Gated<ctl::Mlp<float>>(ctl::Mlp<float>(abc::Slots{n}, d, abc::Seed{959}), w_g, 1.0f), N, d));
  r.push_back(bounded("global + window", ctl::Concat<ctl::GlobalTokens<float>, ctl::SlidingWindow<float>>(
                                             ctl::GlobalTokens<float>(std::vector<Index>{0, 1, 2, 3}), ctl::SlidingWindow<float>{n}),
                      N, d));
  r.push_back(bounded("RFA sin/cos", ctl::RandomFeature<float>(abc::feature::RandomFourier<float>(proj), 1e-3f), N, d));
  r.push_back(bounded("RFA arc-cos", ctl::RandomFeature<float, abc::feature::ArcCosine<float>>(abc::feature::ArcCosine<float>(proj)), N, d));
  r.push_back(bounded("RFA gated", ctl::RandomFeature<float>(abc::feature::RandomFourier<float>(proj), w_g, 1.0f, 1e-3f), N, d));
  r.push_back(bounded("top-k eviction", ctl::TopKEviction<float>(abc::Slots{n}, n / 2, abc::select::KeyScore<float>(ref::random<float>(d, 32, 960))), N, d));
  {
    const abc::select::TramsAttention<float> trams({64, 24, 8}, abc::select::KeyScore<float>(ref::random<float>(d, 32, 961)));
    r.push_back(stream(
        "TRAMS (pool 64, recent 24, top-k 8)", N, d, [&] { return trams.make_state(d, d); },
        [&](auto& s, const auto& q, const auto& k, const auto& v, auto& out) { trams.step_into(s, q, k, v, out); }));
  }
  std::cout << "stream of " << N << " tokens (d = " << d << "): state bytes and resident-memory growth after the first tenth\n";
  for (const auto& e : r) {
    std::cout << "  " << e.name << ": " << e.state_bytes << " B, RSS " << (e.rss_growth >= 0 ? "+" : "") << e.rss_growth << " B\n";
    INFO(e.name);
    // A decode step allocates nothing that stays: a few pages of slack for the allocator's own
    // bookkeeping, far below one token's worth of history per token.
    CHECK(e.rss_growth <= 1 << 20);
  }
}

}  // namespace stress_stream_test
