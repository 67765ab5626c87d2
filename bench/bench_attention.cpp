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
#include <abc/multi_head_attention.hpp>

#include <benchmark/benchmark.h>

#include <functional>
#include <string>
#include <vector>

#include "flops.hpp"
#include "machine.hpp"

namespace {

using abc::Index;
using Mat = abc::Matrix<float>;
constexpr Index kD = 64;

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
  bool sweep = true;  // run at n ∈ {16, 64, 256}; else n = 64 only
};

Index slots(const benchmark::State& st) { return st.range(1); }

// ---- plain Eigen ABC-MLP (the baseline of the library's own kernels) ----------------------------

void softmax_rows(Mat& p) {
  for (Index i = 0; i < p.rows(); ++i) {
    p.row(i).array() = (p.row(i).array() - p.row(i).maxCoeff()).exp();
    p.row(i) /= p.row(i).sum();
  }
}

// Non-causal: Φ = softmax over tokens of the logits K W_φᵀ per slot, K̃ = Φᵀ K, Ṽ = Φᵀ V,
// out = softmax(scale Q K̃ᵀ) Ṽ.
void eigen_mlp_forward(const Mat& w, const Mat& q, const Mat& k, const Mat& v, Mat& out) {
  Mat phi = k * w.transpose();
  const Eigen::RowVectorXf mx = phi.colwise().maxCoeff();
  phi = (phi.rowwise() - mx).array().exp().matrix();
  const Eigen::RowVectorXf total = phi.colwise().sum();
  phi.array().rowwise() /= total.array();
  const Mat km = phi.transpose() * k, vm = phi.transpose() * v;
  Mat p = (q * km.transpose()) / std::sqrt(float(q.cols()));
  softmax_rows(p);
  out = p * vm;
}

// One causal token: the online softmax per slot, K̃ ← diag(a) K̃ + w kᵀ, then the read.
struct EigenMlpState {
  Mat km, vm;
  Eigen::ArrayXf mx, z;
  EigenMlpState(Index n, Index d, Index dv)
      : km(Mat::Zero(n, d)), vm(Mat::Zero(n, dv)), mx(Eigen::ArrayXf::Constant(n, -1e30f)), z(Eigen::ArrayXf::Zero(n)) {}
};
void eigen_mlp_token(const Mat& w, EigenMlpState& s, const Eigen::VectorXf& q, const Eigen::VectorXf& k,
                     const Eigen::VectorXf& v, Eigen::VectorXf& out) {
  const Eigen::ArrayXf logit = (w * k).array();
  const Eigen::ArrayXf m_new = s.mx.max(logit);
  const Eigen::ArrayXf keep = (s.mx - m_new).exp(), add = (logit - m_new).exp();
  const Eigen::ArrayXf z_new = keep * s.z + add;
  const Eigen::VectorXf a = (keep * s.z / z_new).matrix(), wr = (add / z_new).matrix();
  s.km = a.asDiagonal() * s.km + wr * k.transpose();
  s.vm = a.asDiagonal() * s.vm + wr * v.transpose();
  s.mx = m_new;
  s.z = z_new;
  Eigen::VectorXf p = s.km * q / std::sqrt(float(q.size()));
  p = (p.array() - p.maxCoeff()).exp().matrix();
  out = s.vm.transpose() * (p / p.sum());
}

void run_eigen_mlp(benchmark::State& st, const std::string& form) {
  const Index n_tok = st.range(0), n = st.range(1);
  const Mat w = abc::control::Mlp<float>(abc::Slots{n}, kD, abc::Seed{1}).weights();
  const Inputs in(n_tok);
  Mat out(n_tok, kD);
  Eigen::VectorXf o(kD);
  const double N = double(n_tok);
  const double flops = abc_bench::logit_flops(N, double(n), kD) + abc_bench::dense_write_flops(N, double(n), kD, kD) +
                       abc_bench::read_flops(N, double(n), kD, kD);
  EigenMlpState state(n, kD, kD);
  if (form == "forward") {
    for (auto _ : st) {
      eigen_mlp_forward(w, in.q, in.k, in.v, out);
      benchmark::DoNotOptimize(out.data());
    }
    set_counters(st, N, flops, 0);
  } else if (form == "forward_causal") {
    for (auto _ : st) {
      state = EigenMlpState(n, kD, kD);
      for (Index t = 0; t < n_tok; ++t) {
        eigen_mlp_token(w, state, in.q.row(t).transpose(), in.k.row(t).transpose(), in.v.row(t).transpose(), o);
        out.row(t) = o.transpose();
      }
      benchmark::DoNotOptimize(out.data());
    }
    set_counters(st, N, flops, 0);
  } else {
    Index t = 0;
    for (auto _ : st) {
      const Index r = t++ % n_tok;
      eigen_mlp_token(w, state, in.q.row(r).transpose(), in.k.row(r).transpose(), in.v.row(r).transpose(), o);
      benchmark::DoNotOptimize(o.data());
    }
    set_counters(st, 1, flops / N, 0);
  }
}

// `control_flops`: the control's own arithmetic per token (flops.hpp), on top of the write.
template <class C>
void run_bounded(benchmark::State& st, const C& control, bool dense, const std::string& form,
                 double control_flops = 0, abc::Options options = {}) {
  const Index n_tok = st.range(0);
  abc::BoundedAttention attn{control, options};
  const Inputs in(n_tok);
  const double n = double(attn.num_slots()), d = kD, N = double(n_tok);
  double write = dense ? abc_bench::dense_write_flops(N, n, d, d) : abc_bench::onehot_write_flops(N, d, d);
  write += N * control_flops;
  double read = abc_bench::read_flops(N, n, d, d);
  if constexpr (abc::detail::has_linear_readout<C>::value) {  // no K̃: features of k and q, then Ṽ
    write = abc_bench::feature_flops(N, n, d) + abc_bench::dense_write_flops(N, n, 0, d);
    read = abc_bench::feature_flops(N, n, d) + abc_bench::read_flops(N, n, 0, d);
  }
  // "step_bf16": the step on a state held in bfloat16 (abc::StateStorage::bfloat16).
  auto state = attn.make_state(kD, kD, form == "step_bf16" ? abc::StateStorage::bfloat16 : abc::StateStorage::native);
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
  } else {  // step (float or bfloat16 state) at position N: prefill N tokens, then time single tokens
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

// A forward pass and its backward pass (∂L/∂out of ones). Counters: tokens_per_s, and
// peak_rss_mib, the process's peak resident set so far.
template <class C>
void run_gradients(benchmark::State& st, const C& control, const std::string& form) {
  const Index n_tok = st.range(0);
  abc::BoundedAttention attn{control};
  const Inputs in(n_tok);
  const Mat d_out = Mat::Ones(n_tok, kD);
  for (auto _ : st) {
    if (form == "forward") {
      benchmark::DoNotOptimize(attn.forward(in.q, in.k, in.v).data());
    } else if (form == "forward_causal") {
      benchmark::DoNotOptimize(attn.forward_causal(in.q, in.k, in.v).data());
    } else if (form == "backward") {
      benchmark::DoNotOptimize(attn.backward(in.q, in.k, in.v, d_out).k.data());
    } else {
      benchmark::DoNotOptimize(attn.backward_causal(in.q, in.k, in.v, d_out).k.data());
    }
  }
  st.counters["tokens_per_s"] = benchmark::Counter(double(n_tok), benchmark::Counter::kIsIterationInvariantRate);
  st.counters["peak_rss_mib"] = abc_bench::peak_rss_mib();
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

// Cross attention against a source of N tokens (st.range(0)), one target token per iteration:
// "read" builds the source's memory once, outside the timing, and reads it (O(n · d) per token);
// "forward" is what a decoder without a memory pays, the whole source rebuilt for each token.
template <class C>
void run_cross(benchmark::State& st, const C& control, const std::string& form) {
  const abc::BoundedAttention<C> attn{control};
  const Index n_src = st.range(0), targets = 1000;
  const Inputs src(n_src), tgt(targets);
  const auto memory = attn.memory(src.k, src.v);
  Mat out(1, kD);
  Index t = 0;
  for (auto _ : st) {
    if (form == "read")
      attn.read_into(memory, tgt.q.row(t), out);
    else
      attn.forward_into(tgt.q.row(t), src.k, src.v, out);
    benchmark::DoNotOptimize(out.data());
    t = (t + 1) % targets;
  }
  set_counters(st, 1, 0, double(memory.bytes()));
}

// A batched decode step of 8 sequences × 16 query heads over 4 key/value heads (GQA), d = 64:
// "shared" gives each key/value head one memory its 4 query heads read; "per_head" gives every
// query head a memory of its own (the same control copied); "validate" times only the checks of
// the shared step (validate(pool, ids, ...), what every call runs before it writes), to read as a
// fraction of the step. "_bf16": the pool's states held in bfloat16. state_bytes: the pool. With
// ABC_WITH_OPENMP, OMP_NUM_THREADS sets the threads (bench/README.md: thread scaling).
void run_gqa_step(benchmark::State& st, bool shared, bool validate_only = false,
                  abc::StateStorage storage = abc::StateStorage::native) {
  using Mlp = abc::control::Mlp<float>;
  const Index B = 8, H = 16, kv = 4, n = st.range(1);
  const abc::MultiHeadAttention<Mlp> mha = shared ? abc::MultiHeadAttention<Mlp>(Mlp(abc::Slots{n}, kD, abc::Seed{1}), H, kv)
                                                  : abc::MultiHeadAttention<Mlp>(std::vector<Mlp>(H, Mlp(abc::Slots{n}, kD, abc::Seed{1})), kv);
  abc::MultiHeadAttention<Mlp>::Pool pool;
  std::vector<std::uint64_t> ids;
  for (Index b = 0; b < B; ++b) {
    ids.push_back(std::uint64_t(b));
    mha.add(pool, ids.back(), kD, kD, storage);
  }
  const Mat q = Mat::Random(B, H * kD), k = Mat::Random(B, kv * kD), v = Mat::Random(B, kv * kD);
  Mat out(B, H * kD);
  using In = abc::HeadTensor<const float>;
  const auto qt = In::bshd(q.data(), B, 1, H, kD), kt = In::bshd(k.data(), B, 1, kv, kD), vt = In::bshd(v.data(), B, 1, kv, kD);
  const auto ot = abc::HeadTensor<float>::bshd(out.data(), B, 1, H, kD);
  for (auto _ : st) {
    if (validate_only) {
      const abc::Status s = mha.validate(pool, ids, qt, kt, vt, ot);
      benchmark::DoNotOptimize(s);
    } else {
      mha.forward_causal(pool, ids, qt, kt, vt, ot);
      benchmark::DoNotOptimize(out.data());
    }
  }
  set_counters(st, double(B), 0, double(pool.bytes()));
}

// One sequence of N tokens through a 16-head layer (d = 64) whose tensors are [batch, seq, heads,
// dim] ("bshd": a head's rows 16 · 64 floats apart) or [batch, heads, seq, dim] ("bhsd": contiguous),
// forward or forward_causal: what the layout costs a long call (bench/README.md, "layouts").
template <class Control>
void run_layout(benchmark::State& st, const Control& control, bool bshd, bool causal) {
  const Index H = 16, N = st.range(0);
  const abc::MultiHeadAttention<Control> mha(control, H, H);
  const Mat q = Mat::Random(N, H * kD), k = Mat::Random(N, H * kD), v = Mat::Random(N, H * kD);
  Mat out(N, H * kD);
  using In = abc::HeadTensor<const float>;
  using Out = abc::HeadTensor<float>;
  const auto in = [&](const Mat& m) { return bshd ? In::bshd(m.data(), 1, N, H, kD) : In::bhsd(m.data(), 1, H, N, kD); };
  const auto ot = bshd ? Out::bshd(out.data(), 1, N, H, kD) : Out::bhsd(out.data(), 1, H, N, kD);
  for (auto _ : st) {
    if (causal)
      mha.forward_causal(in(q), in(k), in(v), ot);
    else
      mha.forward(in(q), in(k), in(v), ot);
    benchmark::DoNotOptimize(out.data());
  }
  set_counters(st, double(N), 0, 0);
}

// Gaussian RFA with D random features on normalised inputs (the maps' default), σ = 1.6 (inverse
// temperature s² ≈ 2.6).
abc::control::RandomFeature<float> rfa(Index D) {
  return abc::control::RandomFeature<float>{
      abc::feature::RandomFourier<float>(abc::feature::Projection<float>(D, kD, abc::Seed{1}, 1.6f).draw())};
}

void register_all() {
  const std::vector<Index> lengths = {256, 1024, 4096, 16384};
  // Every control at n ∈ {16, 64, 256} slots (st.range(1)), except the RFA entries whose memory is
  // fixed by D (2D slots; D = 32 matches n = 64).
  std::vector<Control> controls = {
      {"window", [](benchmark::State& st, const std::string& f) {
         run_bounded(st, abc::control::SlidingWindow<float>{slots(st)}, false, f);
       }},
      {"topk_eviction", [](benchmark::State& st, const std::string& f) {  // state bytes stay flat
         run_bounded(st, abc::control::TopKEviction<float>(abc::Slots{slots(st)}, slots(st) / 2, abc::select::KeyScore<float>(Mat::Random(kD, kD))),
                     false, f, abc_bench::key_score_flops(kD));
       }},
      {"mlp", [](benchmark::State& st, const std::string& f) {
         run_bounded(st, abc::control::Mlp<float>(abc::Slots{slots(st)}, kD, abc::Seed{1}), true, f,
                     abc_bench::logit_flops(1, double(slots(st)), kD));
       }},
      {"gsa", [](benchmark::State& st, const std::string& f) {  // GSA: a forget gate per slot, τ = 8
         run_bounded(st, abc::control::SlotGates<float>(abc::Slots{slots(st)}, kD, abc::Seed{1}), true, f,
                     abc_bench::logit_flops(1, double(slots(st)), kD));
       }},
      {"linformer", [](benchmark::State& st, const std::string& f) {
         // N_max = 2N: step runs past the prefill
         run_bounded(st, abc::control::Linformer<float>(abc::Slots{slots(st)}, 2 * st.range(0), abc::Seed{1}), true, f);
       }},
      {"random_slot", [](benchmark::State& st, const std::string& f) {
         run_bounded(st, abc::control::RandomSlot<float>(abc::Slots{slots(st)}, abc::Seed{1}), false, f);
       }},
      {"compressive", [](benchmark::State& st, const std::string& f) {
         // step runs past the prefill: room for twice the length
         run_bounded(st, abc::control::Compressive<float>(abc::Slots{slots(st)}, 2 * st.range(0) / slots(st) + 1), false, f);
       }},
      {"global_tokens", [](benchmark::State& st, const std::string& f) {
         std::vector<Index> pos;
         for (Index i = 0; i < slots(st); ++i) pos.push_back(i * (st.range(0) / slots(st)));
         run_bounded(st, abc::control::GlobalTokens<float>(pos), false, f);
       }},
      {"dilated", [](benchmark::State& st, const std::string& f) {
         run_bounded(st, abc::control::Dilated<float>(abc::Slots{slots(st) / 2}, 2), false, f);
       }},
      {"cluster", [](benchmark::State& st, const std::string& f) {
         const Mat keys = Mat::Random(st.range(0), kD);
         run_bounded(st, abc::control::Cluster<float>(abc::control::Cluster<float>::kmeans(keys, abc::Slots{slots(st)}, abc::Seed{1}, 10).centroids),
                     false, f, abc_bench::logit_flops(1, double(slots(st)), kD));  // distances to n centroids
       }},
      {"gated_window", [](benchmark::State& st, const std::string& f) {
         run_bounded(st, abc::control::Gated<abc::control::SlidingWindow<float>>(
                             abc::control::SlidingWindow<float>(slots(st)), abc::Vector<float>::Constant(kD, 0.1f), 1.0f),
                     false, f, abc_bench::gate_flops(kD));
       }},
      // RFA at D = 32 has 2D = 64 slots: the same memory as the other controls' n = 64.
      {"rfa_D32", [](benchmark::State& st, const std::string& f) { run_bounded(st, rfa(32), true, f); }, false},
      {"rfa_D64", [](benchmark::State& st, const std::string& f) { run_bounded(st, rfa(64), true, f); }, false},
      {"rfa_D256", [](benchmark::State& st, const std::string& f) { run_bounded(st, rfa(256), true, f); }, false},
      {"concat_global_window", [](benchmark::State& st, const std::string& f) {
         std::vector<Index> pos;
         for (Index i = 0; i < slots(st) / 2; ++i) pos.push_back(i * (st.range(0) / (slots(st) / 2)));
         run_bounded(st, abc::control::Concat<abc::control::GlobalTokens<float>, abc::control::SlidingWindow<float>>(
                             abc::control::GlobalTokens<float>(pos), abc::control::SlidingWindow<float>(slots(st) / 2)),
                     false, f);
       }},
  };
  for (const auto& c : controls)
    for (const std::string form : {"forward", "forward_causal", "step"}) {
      auto* b = benchmark::RegisterBenchmark(("bounded/" + c.name + "/" + form).c_str(),
                                             [c, form](benchmark::State& st) { c.run(st, form); });
      for (Index n : lengths)
        for (Index slots : c.sweep ? std::vector<Index>{16, 64, 256} : std::vector<Index>{64}) b->Args({n, slots});
      // Slot counts that are not a multiple of a kernel block (4 batches: 64 floats with AVX-512):
      // the step's passes take the batches left over as one block.
      if (form == "step" && c.sweep)
        for (Index slots : {32, 48, 96}) b->Args({4096, slots});
      b->Unit(form == "step" ? benchmark::kNanosecond : benchmark::kMicrosecond);
    }
  // The step on a bfloat16 state, beside the float one above (n = 64, N = 4096).
  for (const auto& c : controls)
    if (c.name == "mlp" || c.name == "gsa" || c.name == "window" || c.name == "rfa_D32") {
      auto* b = benchmark::RegisterBenchmark(("bounded/" + c.name + "/step_bf16").c_str(),
                                             [c](benchmark::State& st) { c.run(st, "step_bf16"); });
      b->Args({4096, 64})->Unit(benchmark::kNanosecond);
    }
  // Cross attention, 1 target token per iteration against an N-token source (n = 64).
  for (const std::string form : {"read", "forward"}) {
    auto* b = benchmark::RegisterBenchmark(("cross/mlp/" + form).c_str(), [form](benchmark::State& st) {
      run_cross(st, abc::control::Mlp<float>(abc::Slots{slots(st)}, kD, abc::Seed{1}), form);
    });
    for (Index n : lengths) b->Args({n, 64});
    b->Unit(benchmark::kNanosecond);
  }
  // Gradients of ABC-MLP (n = 64) against its forward pass at the same N, and the process's peak
  // resident memory (run one N per process to read it for that N: the peak only grows).
  for (const std::string form : {"forward", "backward", "forward_causal", "backward_causal"}) {
    auto* b = benchmark::RegisterBenchmark(("grad/mlp/" + form).c_str(), [form](benchmark::State& st) {
      run_gradients(st, abc::control::Mlp<float>(abc::Slots{slots(st)}, kD, abc::Seed{1}), form);
    });
    for (Index n : {Index(4096), Index(16384), Index(65536)}) b->Args({n, 64});
    b->Unit(benchmark::kMicrosecond);
  }
  // Grouped-query decode: one memory per key/value head against one per query head.
  for (const bool shared : {true, false}) {
    auto* b = benchmark::RegisterBenchmark(shared ? "gqa/mlp/step_shared" : "gqa/mlp/step_per_head",
                                           [shared](benchmark::State& st) { run_gqa_step(st, shared); });
    b->Args({1, 64});
    b->Unit(benchmark::kMicrosecond);
  }
  for (const bool shared : {true, false}) {
    auto* b = benchmark::RegisterBenchmark(shared ? "gqa/mlp/step_shared_bf16" : "gqa/mlp/step_per_head_bf16",
                                           [shared](benchmark::State& st) {
                                             run_gqa_step(st, shared, false, abc::StateStorage::bfloat16);
                                           });
    b->Args({1, 64});
    b->Unit(benchmark::kMicrosecond);
  }
  benchmark::RegisterBenchmark("gqa/mlp/validate", [](benchmark::State& st) { run_gqa_step(st, true, true); })
      ->Args({1, 64})
      ->Unit(benchmark::kMicrosecond);
  // Layouts: layout/<control>/<form>/<bshd|bhsd>/<N>.
  for (const bool causal : {false, true})
    for (const bool bshd : {true, false}) {
      const std::string tail = std::string(causal ? "forward_causal/" : "forward/") + (bshd ? "bshd" : "bhsd");
      benchmark::RegisterBenchmark(("layout/mlp/" + tail).c_str(), [=](benchmark::State& st) {
        run_layout(st, abc::control::Mlp<float>(abc::Slots{64}, kD, abc::Seed{1}), bshd, causal);
      })->Arg(4096)->Unit(benchmark::kMillisecond);
      benchmark::RegisterBenchmark(("layout/window/" + tail).c_str(), [=](benchmark::State& st) {
        run_layout(st, abc::control::SlidingWindow<float>{64}, bshd, causal);
      })->Arg(4096)->Unit(benchmark::kMillisecond);
    }
  // The chunk size C (abc::Options::chunk) of the chunked causal kernel at N = 4096 and each n:
  // the measurement behind the default. Names: chunk/<control>/forward_causal/<N>/<n>/<C>.
  for (const std::string name : {"mlp", "rfa"})
    for (const std::string form : {"forward_causal"}) {
      auto* b = benchmark::RegisterBenchmark(("chunk/" + name + "/" + form).c_str(), [name, form](benchmark::State& st) {
        abc::Options o;
        o.chunk = st.range(2);
        if (name == "mlp")
          run_bounded(st, abc::control::Mlp<float>(abc::Slots{slots(st)}, kD, abc::Seed{1}), true, form,
                      abc_bench::logit_flops(1, double(slots(st)), kD), o);
        else  // D = n/2 random features: n slots
          run_bounded(st, rfa(slots(st) / 2), true, form, 0, o);
      });
      for (Index n : {16, 64, 256})
        for (Index c : {8, 16, 32, 64, 128, 256}) b->Args({4096, n, c});
      b->Unit(benchmark::kMicrosecond);
    }
  // The same ABC-MLP mathematics in plain Eigen, written from the equations without the library's
  // chunking or kernels: what the library's kernels are measured against.
  for (const std::string form : {"forward", "forward_causal", "step"}) {
    auto* b = benchmark::RegisterBenchmark(("eigen_mlp/" + form).c_str(),
                                           [form](benchmark::State& st) { run_eigen_mlp(st, form); });
    for (Index n : lengths) b->Args({n, 64});
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
  benchmark::AddCustomContext("memory_bandwidth_gbs", std::to_string(abc_bench::memory_bandwidth() / 1e9));
  register_all();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
