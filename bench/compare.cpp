// SPDX-License-Identifier: MIT
// abc compare: every control on one workload, in one table.
//
//   compare [--tokens N] [--slots n] [--dim d] [--repeat r] [--noncausal]
//
// For each control: median time of r runs, speed-up over exact softmax attention (the blocked
// online-softmax baseline), the decode state's bytes, and the error of its output against exact
// attention (max absolute and RMS over all outputs). Exact attention's own "state" is its KV cache.
#include <abc/abc.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

namespace {

using abc::Index;
using Mat = abc::Matrix<float>;

struct Config {
  Index tokens = 4096, slots = 64, dim = 64;
  int repeat = 5;
  bool causal = true;
};

struct Row {
  std::string name;
  double ms = 0;
  std::size_t bytes = 0;
  double max_err = 0, rms_err = 0;
};

template <class F>
double median_ms(int repeat, F&& f) {
  std::vector<double> t;
  for (int r = 0; r < repeat; ++r) {
    const auto s = std::chrono::steady_clock::now();
    f();
    t.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - s).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

Config parse(int argc, char** argv) {
  Config c;
  for (int i = 1; i < argc; ++i) {
    auto next = [&](const char* what) {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "compare: %s needs a value\n", what);
        std::exit(2);
      }
      return std::atol(argv[++i]);
    };
    if (!std::strcmp(argv[i], "--tokens")) c.tokens = next("--tokens");
    else if (!std::strcmp(argv[i], "--slots")) c.slots = next("--slots");
    else if (!std::strcmp(argv[i], "--dim")) c.dim = next("--dim");
    else if (!std::strcmp(argv[i], "--repeat")) c.repeat = int(next("--repeat"));
    else if (!std::strcmp(argv[i], "--noncausal")) c.causal = false;
    else {
      std::printf("usage: compare [--tokens N] [--slots n] [--dim d] [--repeat r] [--noncausal]\n");
      std::exit(std::strcmp(argv[i], "--help") ? 2 : 0);
    }
  }
  if (c.tokens < 1 || c.slots < 1 || c.dim < 1 || c.repeat < 1) {
    std::fprintf(stderr, "compare: sizes and --repeat must be positive\n");
    std::exit(2);
  }
  return c;
}

}  // namespace

int main(int argc, char** argv) {
  const Config cfg = parse(argc, argv);
  const Index N = cfg.tokens, d = cfg.dim, n = cfg.slots;
  const Mat q = Mat::Random(N, d), k = Mat::Random(N, d), v = Mat::Random(N, d);

  abc::SoftmaxAttention<float> exact_attn;
  Mat exact(N, d);
  Row base{"softmax (exact)"};
  base.ms = median_ms(cfg.repeat, [&] {
    if (cfg.causal) exact_attn.forward_causal_into(q, k, v, exact);
    else exact_attn.forward_into(q, k, v, exact);
  });
  base.bytes = std::size_t(2 * N * d) * sizeof(float);
  std::vector<Row> rows{base};

  auto add = [&](const std::string& name, const auto& control) {
    abc::BoundedAttention attn{control};
    Mat out(N, d);
    auto state = attn.make_state(d, d);
    Row r{name};
    r.ms = median_ms(cfg.repeat, [&] {
      if (cfg.causal) {
        state.reset();
        attn.forward_causal_into(state, q, k, v, out);
      } else {
        attn.forward_into(q, k, v, out);
      }
    });
    r.bytes = state.bytes();
    r.max_err = double((out - exact).cwiseAbs().maxCoeff());
    r.rms_err = std::sqrt(double((out - exact).squaredNorm()) / double(out.size()));
    rows.push_back(r);
  };
  using namespace abc::control;
  add("identity (n = N)", Identity<float>{N});
  add("window", SlidingWindow<float>{n});
  add("mlp exp", Mlp<float>(d, n, 1));
  add("mlp sigmoid", Mlp<float>(d, n, 1, Activation::sigmoid));
  add("mlp relu", Mlp<float>(d, n, 1, Activation::relu));
  add("gsa (slot gates)", SlotGates<float>(d, n, 1));  // GSA: a forget gate per slot, τ = 8
  add("linformer", Linformer<float>(n, N, 1));  // N_max = N
  add("random slot", RandomSlot<float>(n, 1));
  add("compressive", Compressive<float>((N + n - 1) / n, n));  // ratio so that n·c ≥ N
  {
    // n global tokens spread evenly: every ⌈N/n⌉-th position.
    std::vector<Index> every;
    for (Index t = 0; t < N; t += (N + n - 1) / n) every.push_back(t);
    add("global tokens", GlobalTokens<float>(every));
    // Longformer / BigBird: half the slots global, half a window.
    std::vector<Index> half;
    for (Index t = 0; t < N && Index(half.size()) < std::max<Index>(n / 2, 1); t += (N + n - 1) / std::max<Index>(n / 2, 1))
      half.push_back(t);
    add("concat global+window", Concat<GlobalTokens<float>, SlidingWindow<float>>(GlobalTokens<float>(half),
                                                                                   SlidingWindow<float>(std::max<Index>(n - n / 2, 1))));
  }
  add("dilated r=2", Dilated<float>(std::max<Index>(n / 2, 1), 2));  // same slot count as the others
  if (cfg.causal)  // causal needs fixed centroids: k-means on the keys, fitted once outside the timing
    add("cluster", Cluster<float>(Cluster<float>::kmeans(k, n, 1, 20).centroids));
  else  // non-causal fits k-means on the keys inside every call (20 Lloyd updates at most)
    add("cluster (k-means)", Cluster<float>(n, d, 1, 20));
  add("gated window", Gated<SlidingWindow<float>>(SlidingWindow<float>(n), abc::Vector<float>::Constant(d, 0.1f), 1.0f));
  // TRAMS without expiry: n/2 newest tokens + the n/2 best-scoring older ones (released-code score).
  const abc::select::KeyScore<float> trams_score(Mat::Random(d, d));
  add("top-k eviction", TopKEviction<float>(std::max<Index>(n / 2, 1), n - n / 2, trams_score));
  if (cfg.causal) {
    // TRAMS proper (not a control): a FIFO pool of 2n tokens, reading n/2 recent + n/2 selected, fed
    // in segments of 64 tokens (causal within a segment). State: the pool.
    abc::select::TramsAttention<float> trams({2 * n, std::max<Index>(n / 2, 1), n - std::max<Index>(n / 2, 1)}, trams_score);
    auto state = trams.make_state(d, d);
    Mat out(N, d);
    Row r{"trams (pool 2n)"};
    r.ms = median_ms(cfg.repeat, [&] {
      state.reset();
      for (Index t0 = 0; t0 < N; t0 += 64) {
        const Index c = std::min<Index>(64, N - t0);
        trams.segment_into(state, q.middleRows(t0, c), k.middleRows(t0, c), v.middleRows(t0, c), out.middleRows(t0, c));
      }
    });
    r.bytes = state.bytes();
    r.max_err = double((out - exact).cwiseAbs().maxCoeff());
    r.rms_err = std::sqrt(double((out - exact).squaredNorm()) / double(out.size()));
    rows.push_back(r);
  }
  // RFA on normalised q and k (the feature maps' default) with σ = 1.6: softmax with inverse
  // temperature s² ≈ 2.6 as D grows, about the logits scale·q·k of this workload (|q|, |k| ≈
  // sqrt(d/3)). Its memory is 2D slots.
  for (Index D : {Index(64), Index(256)})
    add("rfa D=" + std::to_string(D),
        RandomFeature<float>{abc::feature::RandomFourier<float>(abc::feature::Projection<float>(D, d, 1, 1.6f).draw())});

  std::printf("abc compare: %s attention, N = %ld, d = dv = %ld, n = %ld, float, median of %d (one thread)\n\n",
              cfg.causal ? "causal" : "non-causal", long(N), long(d), long(n), cfg.repeat);
  std::printf("%-20s %12s %10s %14s %11s %11s\n", "control", "time ms", "speed-up", "state bytes", "max err",
              "rms err");
  for (const auto& r : rows)
    std::printf("%-20s %12.3f %9.2fx %14zu %11.2e %11.2e\n", r.name.c_str(), r.ms, base.ms / r.ms, r.bytes,
                r.max_err, r.rms_err);
  std::printf("\nstate bytes of softmax (exact): its KV cache at N tokens. Errors: against exact attention.\n");
  return 0;
}
