// SPDX-License-Identifier: MIT
// abc bench: forward, forward_causal and step of each control and of exact softmax attention.
//
//   bench_attention [--benchmark_filter=...] [--benchmark_repetitions=5 ...]
//
// Counters: tokens_per_s, FLOPS (the useful arithmetic of flops.hpp per second), peak_frac (FLOPS
// over the FMA peak measured at start-up by machine.hpp), state_bytes (the decode state).
// Sizes: N ∈ {256, 1024, 4096, 16384} spans the softmax crossover (hundreds of tokens) to long
// contexts; d = dv = 64 is the common head width; n = 64 is the papers' memory size.
#include <abc/abc.hpp>

#include <benchmark/benchmark.h>

#include <functional>
#include <string>
#include <vector>

#include "flops.hpp"
#include "machine.hpp"

namespace {

using abc::Index;
using Mat = abc::Matrix<float>;
constexpr Index kD = 64, kSlots = 64;

struct Inputs {
  Mat q, k, v;
  explicit Inputs(Index n) : q(Mat::Random(n, kD)), k(Mat::Random(n, kD)), v(Mat::Random(n, kD)) {}
};

void set_counters(benchmark::State& st, double tokens, double flops, double state_bytes) {
  st.counters["tokens_per_s"] = benchmark::Counter(tokens, benchmark::Counter::kIsIterationInvariantRate);
  st.counters["FLOPS"] = benchmark::Counter(flops, benchmark::Counter::kIsIterationInvariantRate,
                                            benchmark::Counter::OneK::kIs1000);
  st.counters["peak_frac"] = benchmark::Counter(flops / abc_bench::fma_peak(),
                                                benchmark::Counter::kIsIterationInvariantRate);
  st.counters["state_bytes"] = state_bytes;
}

// How each control is built and what its write costs.
struct Control {
  std::string name;
  std::function<void(benchmark::State&, const std::string& form)> run;
};

template <class C>
void run_bounded(benchmark::State& st, const C& control, bool dense, const std::string& form) {
  const Index n_tok = st.range(0);
  abc::BoundedAttention attn{control};
  const Inputs in(n_tok);
  const double n = double(attn.num_slots()), d = kD, N = double(n_tok);
  double write = dense ? abc_bench::dense_write_flops(N, n, d, d) : abc_bench::onehot_write_flops(N, d, d);
  if constexpr (abc::detail::has_input_dim<C>::value) write += abc_bench::logit_flops(N, n, d);
  double read = abc_bench::read_flops(N, n, d, d);
  if constexpr (abc::detail::has_linear_readout<C>::value) {  // no K̃: features of k and q, then Ṽ
    write = abc_bench::feature_flops(N, n, d) + abc_bench::dense_write_flops(N, n, 0, d);
    read = abc_bench::feature_flops(N, n, d) + abc_bench::read_flops(N, n, 0, d);
  }
  auto state = attn.make_state(kD, kD);
  if (form == "forward") {
    Mat out(n_tok, kD);
    for (auto _ : st) {
      attn.forward_into(in.q, in.k, in.v, out);
      benchmark::DoNotOptimize(out.data());
    }
    set_counters(st, N, write + read, double(state.bytes()));
  } else if (form == "forward_causal") {
    Mat out(n_tok, kD);
    for (auto _ : st) {
      state.reset();
      attn.forward_causal_into(state, in.q, in.k, in.v, out);
      benchmark::DoNotOptimize(out.data());
    }
    set_counters(st, N, write + read, double(state.bytes()));
  } else {  // step at position N: prefill N tokens, then time single tokens
    attn.forward_causal(state, in.q, in.k, in.v);
    abc::Vector<float> out(kD);
    Index t = 0;
    for (auto _ : st) {
      if constexpr (abc::detail::has_max_tokens<C>::value) {
        if (state.position() >= attn.control().max_tokens()) {  // capacity reached: prefill again
          st.PauseTiming();
          state.reset();
          attn.forward_causal(state, in.q, in.k, in.v);
          st.ResumeTiming();
        }
      }
      const Index r = t++ % n_tok;
      attn.step_into(state, in.q.row(r), in.k.row(r), in.v.row(r), out);
      benchmark::DoNotOptimize(out.data());
    }
    const double per = (write + read) / N;  // the same arithmetic, one token at a time
    set_counters(st, 1, per, double(state.bytes()));
  }
}

void run_softmax(benchmark::State& st, const std::string& form) {
  const Index n_tok = st.range(0);
  abc::SoftmaxAttention<float> attn;
  const Inputs in(n_tok);
  Mat out(n_tok, kD);
  const bool causal = form == "forward_causal";
  for (auto _ : st) {
    if (causal)
      attn.forward_causal_into(in.q, in.k, in.v, out);
    else
      attn.forward_into(in.q, in.k, in.v, out);
    benchmark::DoNotOptimize(out.data());
  }
  // The KV cache an exact decoder holds at this length.
  set_counters(st, double(n_tok), abc_bench::softmax_flops(double(n_tok), double(n_tok), kD, kD, causal),
               double(2 * n_tok * kD * Index(sizeof(float))));
}

// Gaussian RFA with D random features on normalised inputs, σ = 1.6 (inverse temperature s² ≈ 2.6).
abc::control::RandomFeature<float> rfa(Index D) {
  return abc::control::RandomFeature<float>{
      abc::feature::RandomFourier<float>(abc::feature::Projection<float>(D, kD, 1, 1.6f).draw(), true)};
}

void register_all() {
  const std::vector<Index> lengths = {256, 1024, 4096, 16384};
  std::vector<Control> controls = {
      {"window", [](benchmark::State& st, const std::string& f) {
         run_bounded(st, abc::control::SlidingWindow<float>{kSlots}, false, f);
       }},
      {"mlp", [](benchmark::State& st, const std::string& f) {
         run_bounded(st, abc::control::Mlp<float>(kD, kSlots, 1), true, f);
       }},
      {"linformer", [](benchmark::State& st, const std::string& f) {
         // N_max = 2N: step runs past the prefill
         run_bounded(st, abc::control::Linformer<float>(kSlots, 2 * st.range(0), 1), true, f);
       }},
      {"random_slot", [](benchmark::State& st, const std::string& f) {
         run_bounded(st, abc::control::RandomSlot<float>(kSlots, 1), false, f);
       }},
      {"compressive", [](benchmark::State& st, const std::string& f) {
         // step runs past the prefill: room for twice the length
         run_bounded(st, abc::control::Compressive<float>(2 * st.range(0) / kSlots + 1, kSlots), false, f);
       }},
      {"global_tokens", [](benchmark::State& st, const std::string& f) {
         std::vector<Index> pos;
         for (Index i = 0; i < kSlots; ++i) pos.push_back(i * (st.range(0) / kSlots));
         run_bounded(st, abc::control::GlobalTokens<float>(pos), false, f);
       }},
      {"dilated", [](benchmark::State& st, const std::string& f) {
         run_bounded(st, abc::control::Dilated<float>(kSlots / 2, 2), false, f);
       }},
      {"cluster", [](benchmark::State& st, const std::string& f) {
         const Mat keys = Mat::Random(st.range(0), kD);
         run_bounded(st, abc::control::Cluster<float>(abc::control::Cluster<float>::kmeans(keys, kSlots, 1, 10).centroids),
                     false, f);
       }},
      {"gated_window", [](benchmark::State& st, const std::string& f) {
         run_bounded(st, abc::control::Gated<abc::control::SlidingWindow<float>>(
                             abc::control::SlidingWindow<float>(kSlots), abc::Vector<float>::Constant(kD, 0.1f), 1.0f),
                     false, f);
       }},
      // RFA at D = 32 has 2D = 64 slots: the same memory as the other controls' n = 64.
      {"rfa_D32", [](benchmark::State& st, const std::string& f) { run_bounded(st, rfa(32), true, f); }},
      {"rfa_D64", [](benchmark::State& st, const std::string& f) { run_bounded(st, rfa(64), true, f); }},
      {"rfa_D256", [](benchmark::State& st, const std::string& f) { run_bounded(st, rfa(256), true, f); }},
      {"concat_global_window", [](benchmark::State& st, const std::string& f) {
         std::vector<Index> pos;
         for (Index i = 0; i < kSlots / 2; ++i) pos.push_back(i * (st.range(0) / (kSlots / 2)));
         run_bounded(st, abc::control::Concat<abc::control::GlobalTokens<float>, abc::control::SlidingWindow<float>>(
                             abc::control::GlobalTokens<float>(pos), abc::control::SlidingWindow<float>(kSlots / 2)),
                     false, f);
       }},
  };
  for (const auto& c : controls)
    for (const std::string form : {"forward", "forward_causal", "step"}) {
      auto* b = benchmark::RegisterBenchmark(("bounded/" + c.name + "/" + form).c_str(),
                                             [c, form](benchmark::State& st) { c.run(st, form); });
      for (Index n : lengths) b->Arg(n);
      b->Unit(form == "step" ? benchmark::kNanosecond : benchmark::kMicrosecond);
    }
  for (const std::string form : {"forward", "forward_causal"}) {
    auto* b = benchmark::RegisterBenchmark(("softmax/" + form).c_str(),
                                           [form](benchmark::State& st) { run_softmax(st, form); });
    for (Index n : lengths) b->Arg(n);
    b->Unit(benchmark::kMicrosecond);
  }
}

}  // namespace

int main(int argc, char** argv) {
  const double peak = abc_bench::fma_peak();
  benchmark::AddCustomContext("fma_peak_gflops", std::to_string(peak / 1e9));
  benchmark::AddCustomContext("simd", xsimd::default_arch::name());
  register_all();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
