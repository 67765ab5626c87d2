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
  auto state = attn.make_state(kD, kD);
  if (form == "forward") {
    Mat out(n_tok, kD);
    for (auto _ : st) {
      attn.forward_into(in.q, in.k, in.v, out);
      benchmark::DoNotOptimize(out.data());
    }
    set_counters(st, N, write + abc_bench::read_flops(N, n, d, d), double(state.bytes()));
  } else if (form == "forward_causal") {
    Mat out(n_tok, kD);
    for (auto _ : st) {
      state.reset();
      attn.forward_causal_into(state, in.q, in.k, in.v, out);
      benchmark::DoNotOptimize(out.data());
    }
    set_counters(st, N, write + abc_bench::read_flops(N, n, d, d), double(state.bytes()));
  } else {  // step at position N: prefill N tokens, then time single tokens
    attn.forward_causal(state, in.q, in.k, in.v);
    abc::Vector<float> out(kD);
    Index t = 0;
    for (auto _ : st) {
      const Index r = t++ % n_tok;
      attn.step_into(state, in.q.row(r), in.k.row(r), in.v.row(r), out);
      benchmark::DoNotOptimize(out.data());
    }
    const double per = (dense ? abc_bench::dense_write_flops(1, n, d, d) : abc_bench::onehot_write_flops(1, d, d)) +
                       abc_bench::read_flops(1, n, d, d) +
                       (abc::detail::has_input_dim<C>::value ? abc_bench::logit_flops(1, n, d) : 0.0);
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

void register_all() {
  const std::vector<Index> lengths = {256, 1024, 4096, 16384};
  std::vector<Control> controls = {
      {"window", [](benchmark::State& st, const std::string& f) {
         run_bounded(st, abc::control::SlidingWindow<float>{kSlots}, false, f);
       }},
      {"mlp", [](benchmark::State& st, const std::string& f) {
         run_bounded(st, abc::control::Mlp<float>(kD, kSlots, 1), true, f);
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
