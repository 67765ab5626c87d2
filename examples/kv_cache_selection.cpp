// SPDX-License-Identifier: MIT
// abc example: a long stream through a TRAMS KV cache (select::TramsAttention), decoded token by
// token. For each query-independent score, and for recency alone with the same budget, it reports
// how much of full causal attention's probability mass the kept set captures, and the output error;
// and the same for attention sinks (the first 4 tokens and a window, StreamingLLM) at that budget.
//
//   kv_cache_selection [tokens]      (default 1500)
//
// Data (docs/operators/trams.md): post-LayerNorm-like hidden states h = γ ⊙ LN₀(z) + β, and
// W_Q, W_K, W_V with N(0, 4/d_model) entries. Two biases: β isotropic, and β with a shared positive
// mean along 1 (the geometry the TRAMS score assumes). This is a sanity demonstration, not a
// reproduction: on data without that geometry no query-independent score need beat recency.
#include <abc/bounded_attention.hpp>
#include <abc/control/concat.hpp>
#include <abc/control/global_tokens.hpp>
#include <abc/control/sliding_window.hpp>
#include <abc/select/key_score.hpp>
#include <abc/select/trams_attention.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

namespace {

using abc::Index;
using Mat = abc::Matrix<double>;
using abc::select::KeyScore;
using abc::select::ScoreKind;

struct Stream {
  Mat q, k, v, w_q;
};

Stream make_stream(Index n, Index d_model, Index d_head, double bias_mean, std::uint64_t seed) {
  std::mt19937_64 g(seed);
  std::normal_distribution<double> z(0, 1);
  auto gauss = [&](Index r, Index c, double sd) {
    Mat m(r, c);
    for (Index i = 0; i < r; ++i)
      for (Index j = 0; j < c; ++j) m(i, j) = sd * z(g);
    return m;
  };
  const Mat gamma = (gauss(1, d_model, 0.2).array() + 1).matrix();
  const Mat beta = (gauss(1, d_model, bias_mean == 0 ? 0.3 : 0.1).array() + bias_mean).matrix();
  Mat h = gauss(n, d_model, 1);
  for (Index i = 0; i < n; ++i) {  // LN₀: standardise each row, then γ ⊙ · + β
    const double mu = h.row(i).mean();
    const double sd = std::sqrt((h.row(i).array() - mu).square().mean());
    h.row(i) = ((h.row(i).array() - mu) / sd * gamma.array() + beta.array()).matrix();
  }
  const double w_sd = 2 / std::sqrt(double(d_model));
  Stream s;
  s.w_q = gauss(d_head, d_model, w_sd);  // [d_h × d_model], the nn.Linear layout
  const Mat w_k = gauss(d_head, d_model, w_sd), w_v = gauss(d_head, d_model, w_sd);
  s.q = h * s.w_q.transpose();
  s.k = h * w_k.transpose();
  s.v = h * w_v.transpose();
  return s;
}

struct Result {
  double mass = 0, rel_err = 0;
  Index count = 0;
  Result& mean() {
    mass /= double(count);
    rel_err /= double(count);
    return *this;
  }
};

// One query t: the share of full causal softmax's mass (over every token so far, not only those
// kept) on the tokens it read (`held(i)`), and its output's relative error against full attention.
template <class Held>
void account(const Stream& s, Index t, const abc::Vector<double>& out, const Held& held, Result& r) {
  const double scale = 1 / std::sqrt(double(s.k.cols()));
  const abc::Vector<double> logits = scale * (s.k.topRows(t + 1) * s.q.row(t).transpose());
  const abc::Vector<double> p = (logits.array() - logits.maxCoeff()).exp().matrix();
  const double total = p.sum();
  double mass = 0;
  for (Index i = 0; i <= t; ++i)
    if (held(i)) mass += p(i);
  const abc::Vector<double> full = s.v.topRows(t + 1).transpose() * p / total;
  r.mass += mass / total;
  r.rel_err += (out - full).norm() / full.norm();
  ++r.count;
}

// Streams every token through TRAMS's step(), reporting the steady state (once the pool is full).
Result run(const Stream& s, abc::select::TramsConfig cfg, const KeyScore<double>& score) {
  abc::select::TramsAttention<double> attn(cfg, score);
  auto state = attn.make_state(s.k.cols(), s.v.cols());
  Result r;
  std::vector<bool> read(static_cast<std::size_t>(s.q.rows()));
  for (Index t = 0; t < s.q.rows(); ++t) {
    const auto kept = attn.attended(state);
    const abc::Vector<double> out = attn.step(state, s.q.row(t).transpose(), s.k.row(t).transpose(), s.v.row(t).transpose());
    if (t < cfg.pool) continue;
    std::fill(read.begin(), read.end(), false);
    read[static_cast<std::size_t>(t)] = true;  // the query's own token is always read
    const Index first = t - state.size() + 1;  // position of pool age 0, after this step's push
    for (Index a : kept) read[static_cast<std::size_t>(first - 1 + a)] = true;
    account(s, t, out, [&](Index i) { return bool(read[static_cast<std::size_t>(i)]); }, r);
  }
  return r.mean();
}

// Attention sinks (StreamingLLM): the first `sinks` tokens plus a window of the newest, each read
// once, as a bounded memory of abc (Concat of global tokens and a window counts a token once).
Result run_sinks(const Stream& s, Index sinks, Index window, Index warmup) {
  using Sinks = abc::control::Concat<abc::control::GlobalTokens<double>, abc::control::SlidingWindow<double>>;
  std::vector<Index> first(static_cast<std::size_t>(sinks));
  for (Index i = 0; i < sinks; ++i) first[static_cast<std::size_t>(i)] = i;
  abc::BoundedAttention<Sinks> attn{Sinks{abc::control::GlobalTokens<double>(first), abc::control::SlidingWindow<double>(window)}};
  auto state = attn.make_state(s.k.cols(), s.v.cols());
  Result r;
  for (Index t = 0; t < s.q.rows(); ++t) {
    const abc::Vector<double> out = attn.step(state, s.q.row(t).transpose(), s.k.row(t).transpose(), s.v.row(t).transpose());
    if (t >= warmup) account(s, t, out, [&](Index i) { return i < sinks || i > t - window; }, r);
  }
  return r.mean();
}

}  // namespace

int main(int argc, char** argv) {
  const Index tokens = argc > 1 ? std::atol(argv[1]) : 1500;
  const Index d_model = 128, d_head = 32;
  const abc::select::TramsConfig released{400, 150, 50};  // M = 400, R = 150, K = 50 (m = 200)
  if (tokens <= released.pool) {
    std::fprintf(stderr, "kv_cache_selection: tokens must exceed the pool (%ld)\n", long(released.pool));
    return 2;
  }
  std::printf("TRAMS KV cache: pool %ld, recent %ld, topk %ld (attends to %ld + the query), d_model %ld, d_head %ld, "
              "%ld tokens\n",
              long(released.pool), long(released.recent), long(released.topk), long(released.recent + released.topk),
              long(d_model), long(d_head), long(tokens));
  std::printf("captured = mean share of full causal attention's mass on the kept tokens; error = mean ||o - o_full|| / ||o_full||\n\n");
  for (double bias_mean : {0.0, 0.5}) {
    const Stream s = make_stream(tokens, d_model, d_head, bias_mean, 11);
    std::printf("hidden-state bias %s\n", bias_mean == 0 ? "isotropic (beta ~ 0.3 N(0,1))" : "shared mean (beta = 0.5 + 0.1 N(0,1))");
    std::printf("  %-34s %9s %9s\n", "selection", "captured", "error");
    auto row = [&](const std::string& name, abc::select::TramsConfig cfg, const KeyScore<double>& score) {
      const Result r = run(s, cfg, score);
      std::printf("  %-34s %9.4f %9.4f\n", name.c_str(), r.mass, r.rel_err);
    };
    row("TRAMS code score (default)", released, KeyScore<double>(s.w_q, ScoreKind::trams_code));
    row("TRAMS paper score", released, KeyScore<double>(s.w_q, ScoreKind::trams_paper));
    row("reformulated key norm ||W_Q^T k||", released, KeyScore<double>(s.w_q, ScoreKind::reformulated_norm));
    row("key norm ||k||", released, KeyScore<double>::norm());
    row("recency only (recent 200, topk 0)", {released.pool, released.recent + released.topk, 0}, KeyScore<double>::norm());
    row("whole pool (400)", {released.pool, released.recent, released.pool - released.recent}, KeyScore<double>::norm());
    const Result sinks = run_sinks(s, 4, released.recent + released.topk - 3, released.pool);
    std::printf("  %-34s %9.4f %9.4f\n", "attention sinks 4 + window 197", sinks.mass, sinks.rel_err);
    std::printf("\n");
  }
  return 0;
}
