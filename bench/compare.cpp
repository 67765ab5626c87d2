// SPDX-License-Identifier: MIT
// abc compare: every control on one workload, in one table: time, speed-up over exact softmax
// attention, decode state bytes, and the error of each control's output against exact attention.
// The workload is random q, k, v (timing), the q, k, v of a seeded random decoder over a repetitive
// byte text (attention with structure), or the user's own .npy files. `compare --help` explains
// every option, row and column; the same text is kHelp below.
#include <abc/abc.hpp>

#include "../examples/npy.hpp"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <functional>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using abc::Index;
using Mat = abc::Matrix<float>;

const char kHelp[] = R"(usage: compare [options]

Runs every control of abc on one workload of N tokens (one attention head: q, k, v) and prints
one row per control: its time, its decode state, and how far its output is from exact softmax
attention on the same q, k, v. Causal (forward_causal: token t reads tokens 0..t) unless
--noncausal. Bad options print one line and exit with status 2.

workload (--workload or --npy; default --workload random):
  --workload random   q, k, v uniform in [-1, 1], seeded. The logits q.k/sqrt(d) have a
                      standard deviation of about 0.33 whatever d is, so exact attention is
                      nearly uniform over the prefix and its output is close to the running mean
                      of the values. Right for timing; its error column says little about a
                      trained model's attention (see "errors on random data" below).
  --workload decoder  q, k, v of the second attention layer of a seeded random byte-level
                      decoder (d_model = d, one head) reading a generated text with repetition
                      (Zipf-distributed words; one word boundary in ten starts a copy of an
                      earlier span). Layer 1 attends by position, mixing each byte with the few
                      before it; layer 2's queries and keys share most of their projection, so a
                      query attends to earlier occurrences of its own context, near or far. Its
                      attention is peaked and long-range, as that of many trained heads is.
  --npy DIR           your own q, k, v: DIR/q.npy, DIR/k.npy [N x d] and DIR/v.npy [N x dv],
                      float32 or float64 (computed in float), C order, as numpy.save writes
                      them (numpy.ascontiguousarray(a) first for a transposed view). One head:
                      for a multi-head layer save one head's q, k, v, e.g. q[0, h] of a
                      [B, H, N, d] tensor. Logits are q.k/sqrt(d); scale q first for another
                      scale.

sizes:
  --tokens N    tokens (default 4096; with --npy the first N rows, default all)
  --dim d       dimension of q, k and v (default 64; with --npy it comes from the files)
  --slots n     memory slots of every bounded control (default 64)
  --seed s      seed of the random and decoder workloads and of the controls' weights
                (default 1)
  --repeat r    timed runs per row; the median is shown (default 5)
  --noncausal   run forward() (every query reads all N tokens) instead of forward_causal()
  --select      the KV-cache table instead (see "--select" below)
  --isa NAME    the kernels to run: sse2, fma3_avx2 or avx512bw (default: the widest this CPU
                runs). compare carries one copy of itself per instruction set and picks one at
                start (docs/simd.md); the first line of its output names the one running.
  --help        this text

rows: softmax (exact) is abc::SoftmaxAttention, the reference every error is measured against.
Every other row is abc::BoundedAttention with one control (docs/operators/) and n slots, except
identity (one slot per token: exact attention through the bounded machinery, so its error is
rounding only), trams (TRAMS proper, a pool of 2n tokens read n at a time, fed in segments of 64),
h2o (H2O: n tokens kept, n/2 recent and n/2 by accumulated attention) and sinks (StreamingLLM:
the 4 first tokens and the n - 4 newest), both decoded a token at a time (a step reads the n kept
tokens and itself) and causal only, as trams, and rfa D=64 / D=256 (random feature attention: 2D
slots). Slot counts: window, mlp, gsa, linformer, random slot, compressive, global tokens,
cluster, top-k eviction: n; concat: n/2 global tokens + a window of n/2; dilated r=2: two ring
buffers of n/2.

columns:
  time ms      median wall time of the whole sequence in one call, one thread.
  speed-up     softmax (exact)'s time divided by this row's: above 1 is faster.
  state bytes  the decode state after N tokens, what a decoder keeps per sequence and head:
               constant in N for every bounded control; for softmax (exact) its KV cache,
               2 N d 4 bytes, which grows with N.
  max err      the largest |out - exact| over all N x dv outputs, exact being softmax (exact)'s
               output on the same q, k, v. This is the approximation error of the bounded
               memory (what it forgets, merges or estimates), not rounding: float rounding is
               the identity row's error. In the units of v.
  rms err      the root mean square of the same differences.
  rel err      rms err / the rms of the exact output: 1 means an error as large as the output.

errors on random data: exact attention is nearly uniform there, its output the mean of many
values and therefore small, so rel err is large for any control that does not average over the
whole prefix; a window or a top-k cache keeps n tokens of a flat distribution. Two rows are large
for reasons of their own:
  random slot  adds each token to a hashed slot without averaging: a slot holds the sum of about
               N/n keys and values, its key grows like sqrt(N/n), the slot softmax turns one-hot
               and the output is a sum of N/n values where exact attention gives their mean.
  rfa D=...    estimates softmax with D random sin/cos features of unit-norm q and k, at one
               temperature (sigma^2 = mean |q| mean |k| / sqrt(d), printed below the table):
               each key's kernel value is estimated with an error of about 1/sqrt(D), noise that
               is large against the nearly equal weights of a flat distribution, and the
               denominator is not kept positive with sin/cos features: where it comes near 0, at
               any token and more often at the first ones (few terms), the output blows up. That
               is its max err, which changes a lot with --seed; rms err is the typical error. On
               peaked attention (--workload decoder) sigma^2 is large and the far keys' noise
               swamps the few near keys: RFA needs a large D there.
--workload decoder or --npy gives errors that say how a control does on attention with structure;
the line "exact attention:" above the table says how peaked and how local the workload is.

--select: the bounded KV caches for softmax attention, at budgets of 64 to 1024 tokens (those
below N / 2). Each reads the first N / 2 tokens as one prompt segment (exactly), then decodes the
rest a token at a time; the columns are over the decoded tokens. Rows: window (the budget's newest
tokens), sinks (4 first tokens and the newest), h2o (half heavy hitters by accumulated attention,
half newest), snapkv (half the budget for the prompt, chosen by its last 32 queries' pooled
attention, half a decode window), trams (a pool of twice the budget, read budget/2 newest and
budget/2 best-scored). Columns: kept mass, the share of exact attention's weight that falls on the
tokens a decoded query reads (mean over 128 sampled queries: 100 % is exact); rel err, the rms of
out - exact over the rms of exact, decoded tokens only; us/step, the median time of one decode
step; state bytes, what the cache holds (trams: its pool of twice the budget).
)";

[[noreturn]] void usage_error(const std::string& what) {
  std::fprintf(stderr, "compare: %s (compare --help lists the options)\n", what.c_str());
  std::exit(2);
}

struct Config {
  Index tokens = 4096, slots = 64, dim = 64;
  bool tokens_given = false, dim_given = false;
  int repeat = 5;
  bool causal = true;
  bool select = false;
  std::uint64_t seed = 1;
  std::string workload = "random";
  std::optional<std::string> npy_dir;
};

// An integer option's value: the whole text a decimal integer in [lo, hi], or one line naming the
// option and exit status 2 (atol would read "12x" as 12 and "x" as 0).
long long integer(const char* option, const char* text, long long lo, long long hi) {
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(text, &end, 10);
  if (end == text || *end != '\0' || errno == ERANGE || v < lo || v > hi)
    usage_error(std::string(option) + " wants an integer from " + std::to_string(lo) + " to " +
                std::to_string(hi) + ", got '" + text + "'");
  return v;
}

Config parse(int argc, char** argv) {
  Config c;
  bool workload_given = false;
  for (int i = 1; i < argc; ++i) {
    const std::string opt = argv[i];
    const auto value = [&]() -> const char* {
      if (i + 1 >= argc) usage_error(opt + " needs a value");
      return argv[++i];
    };
    // Sizes are capped where N·d and n·d stay far from overflow and a run could still finish.
    if (opt == "--help" || opt == "-h") {
      std::fputs(kHelp, stdout);
      std::exit(0);
    } else if (opt == "--tokens") {
      c.tokens = Index(integer("--tokens", value(), 1, 1 << 24));
      c.tokens_given = true;
    } else if (opt == "--slots") {
      c.slots = Index(integer("--slots", value(), 1, 1 << 20));
    } else if (opt == "--dim") {
      c.dim = Index(integer("--dim", value(), 1, 1 << 14));
      c.dim_given = true;
    } else if (opt == "--repeat") {
      c.repeat = int(integer("--repeat", value(), 1, 1000));
    } else if (opt == "--seed") {
      c.seed = std::uint64_t(integer("--seed", value(), 0, LLONG_MAX));
    } else if (opt == "--isa") {
      // compare_dispatch.cpp has chosen the copy that runs from the same option: it is this one.
      const std::string isa = value();
      if (isa != abc::simd_arch())
        usage_error("--isa " + isa + ": this compare carries only the " + abc::simd_arch() + " kernels");
    } else if (opt == "--noncausal") {
      c.causal = false;
    } else if (opt == "--select") {
      c.select = true;
    } else if (opt == "--workload") {
      c.workload = value();
      workload_given = true;
      if (c.workload != "random" && c.workload != "decoder")
        usage_error("--workload wants random or decoder, got '" + c.workload + "'");
    } else if (opt == "--npy") {
      c.npy_dir = value();
    } else {
      usage_error((opt.rfind("-", 0) == 0 ? "unknown option '" : "unexpected argument '") + opt + "'");
    }
  }
  if (c.npy_dir && workload_given) usage_error("--npy and --workload name two workloads; give one");
  if (c.npy_dir && c.dim_given) usage_error("--dim comes from the files with --npy; drop it");
  if (c.select && !c.causal) usage_error("--select decodes, which is causal; drop --noncausal");
  return c;
}

// ---- workloads -------------------------------------------------------------------------------

struct Workload {
  Mat q, k, v;
  std::string what;  // one line for the header
};

Mat gaussian(Index rows, Index cols, float sd, std::mt19937_64& rng) {
  std::normal_distribution<float> normal(0.0f, sd);
  Mat m(rows, cols);
  for (Index i = 0; i < m.size(); ++i) m.data()[i] = normal(rng);
  return m;
}

Mat uniform(Index rows, Index cols, std::mt19937_64& rng) {
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  Mat m(rows, cols);
  for (Index i = 0; i < m.size(); ++i) m.data()[i] = u(rng);
  return m;
}

// Each row divided by its root mean square (RMS normalisation, as a pre-norm transformer does).
Mat rms_rows(const Mat& x) {
  Mat y(x.rows(), x.cols());
  for (Index t = 0; t < x.rows(); ++t)
    y.row(t) = x.row(t) / std::sqrt(x.row(t).squaredNorm() / float(x.cols()) + 1e-5f);
  return y;
}

// Bytes of a text with repetition, as prose and source code have: words of a seeded vocabulary
// drawn by a Zipf law, and at one word boundary in ten a copy of an earlier span of 16 to 128
// bytes (a repeated phrase or line).
std::vector<int> repetitive_text(Index n_bytes, std::mt19937_64& rng) {
  constexpr int kWords = 400;
  std::vector<std::string> words(kWords);
  std::uniform_int_distribution<int> length(1, 9), letter('a', 'z');
  for (auto& w : words)
    for (int i = length(rng); i > 0; --i) w += char(letter(rng));
  std::vector<double> zipf(kWords);
  for (int i = 0; i < kWords; ++i) zipf[std::size_t(i)] = 1.0 / std::pow(double(i + 1), 1.1);
  std::discrete_distribution<std::size_t> pick(zipf.begin(), zipf.end());
  std::bernoulli_distribution copy(0.1);
  std::uniform_int_distribution<std::size_t> span(16, 128);
  std::vector<int> text;
  const auto size = std::size_t(n_bytes);
  while (text.size() < size) {
    if (text.size() > 256 && copy(rng)) {
      const std::size_t len = span(rng);
      const std::size_t from = std::uniform_int_distribution<std::size_t>(0, text.size() - len)(rng);
      for (std::size_t i = 0; i < len; ++i) text.push_back(text[from + i]);
    } else {
      for (char ch : words[pick(rng)]) text.push_back(ch);
      text.push_back(' ');
    }
  }
  text.resize(size);
  return text;
}

// The sinusoidal position code of "Attention is all you need": its rows' dot product depends on
// the distance between the positions only, largest at distance 0.
Mat positions(Index n, Index d) {
  Mat p(n, d);
  for (Index t = 0; t < n; ++t)
    for (Index i = 0; i < d; ++i) {
      const double freq = std::pow(10000.0, -double(2 * (i / 2)) / double(d));
      p(t, i) = float(i % 2 == 0 ? std::sin(double(t) * freq) : std::cos(double(t) * freq));
    }
  return p;
}

// A seeded random decoder over a repetitive byte text; q, k, v are what its second attention
// layer reads. Random weights alone give nearly uniform attention, like random q, k, v; two choices
// give it structure like that of trained heads: layer 1's queries and keys are the positions only
// (a recency-weighted mix of the last bytes into each token, the n-gram context), and layer 2's
// query and key projections share most of their weights, so its logits compare contexts.
Workload decoder_workload(Index N, Index d, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  const std::vector<int> text = repetitive_text(N, rng);
  const float sd = 1.0f / std::sqrt(float(d));
  const Mat embed = gaussian(256, d, 1.0f, rng), pos = positions(N, d);
  Mat x(N, d);
  // Positions enter the residual weakly: at full strength every token would match its neighbours
  // best, and the attention would be a window.
  for (Index t = 0; t < N; ++t) x.row(t) = embed.row(text[std::size_t(t)]) + 0.3f * pos.row(t);

  // Layer 1: causal attention by position, then a ReLU MLP (d -> 4d -> d), both residual.
  const abc::SoftmaxAttention<float> exact;
  const Mat w_v1 = gaussian(d, d, sd, rng), w_o1 = gaussian(d, d, sd, rng);
  const Mat w_1 = gaussian(4 * d, d, sd, rng), w_2 = gaussian(d, 4 * d, 0.5f * sd, rng);
  const Mat pos_qk = 1.5f * pos;
  Mat mixed(N, d);
  exact.forward_causal_into(pos_qk, pos_qk, rms_rows(x) * w_v1.transpose(), mixed);
  x += mixed * w_o1.transpose();
  x += (rms_rows(x) * w_1.transpose()).cwiseMax(0.0f) * w_2.transpose();

  // Layer 2's q, k, v. W_k = W_q + a smaller independent part: the shared part makes equal contexts
  // match, the other keeps a query from simply matching its own key best. The gain widens the
  // logits to several units, so that the best matches stand out.
  const Mat h = rms_rows(x);
  const float gain = 1.6f;
  const Mat w_q = gaussian(d, d, sd, rng), w_k = w_q + gaussian(d, d, 0.5f * sd, rng);
  const Mat w_v = gaussian(d, d, sd, rng);
  Workload w{gain * h * w_q.transpose(), gain * h * w_k.transpose(), h * w_v.transpose(), ""};
  w.what = "decoder: layer 2 of a seeded random byte-level decoder over a repetitive text, seed " +
           std::to_string(seed);
  return w;
}

Workload npy_workload(const std::string& dir, const Config& c) {
  const auto load = [&](const char* name) {
    try {
      return npy::read(dir + "/" + name);
    } catch (const std::exception& e) {
      throw std::runtime_error(std::string("--npy: ") + e.what());
    }
  };
  const npy::Array q = load("q.npy"), k = load("k.npy"), v = load("v.npy");
  const auto two_d = [](const char* name, const npy::Array& a) {
    if (a.shape.size() != 2 || a.shape[0] < 1 || a.shape[1] < 1)
      throw std::runtime_error(std::string("--npy: ") + name + " is " + npy::shape_string(a.shape) +
                               ", expected [N, d] (one head, one token per row)");
  };
  two_d("q.npy", q);
  two_d("k.npy", k);
  two_d("v.npy", v);
  if (q.shape != k.shape)
    throw std::runtime_error("--npy: q.npy is " + npy::shape_string(q.shape) + " and k.npy " +
                             npy::shape_string(k.shape) + "; q and k need the same shape [N, d]");
  if (v.shape[0] != q.shape[0])
    throw std::runtime_error("--npy: v.npy has " + std::to_string(v.shape[0]) + " rows and q.npy " +
                             std::to_string(q.shape[0]) + "; every file holds one row per token");
  Index N = q.shape[0];
  if (c.tokens_given) {
    if (c.tokens > N)
      throw std::runtime_error("--tokens " + std::to_string(c.tokens) + ": the files hold " +
                               std::to_string(N) + " tokens");
    N = c.tokens;
  }
  const auto rows = [&](const npy::Array& a) {
    Mat m(N, a.shape[1]);
    for (Index i = 0; i < m.size(); ++i) m.data()[i] = float(a.data[std::size_t(i)]);
    return m;
  };
  Workload w{rows(q), rows(k), rows(v), ""};
  if (!w.q.allFinite() || !w.k.allFinite() || !w.v.allFinite())
    throw std::runtime_error("--npy: the files hold NaN or Inf, or values beyond float's range, in their first " +
                             std::to_string(N) + " rows");
  w.what = "--npy " + dir;
  return w;
}

// ---- the exact attention's shape ----------------------------------------------------------------

// How peaked and how local exact attention is, from up to 256 queries spread over the sequence:
// exp(entropy) is the number of keys a query's weight is spread over (as many as it reads for
// uniform weights, 1 for one-hot); the mass on the n most recent keys is what a window of n could
// keep, the mass on the n heaviest what any n-token cache could keep at best.
std::string attention_shape(const Mat& q, const Mat& k, Index n, bool causal) {
  const Index N = q.rows(), samples = std::min<Index>(N, 256);
  const double scale = 1.0 / std::sqrt(double(q.cols()));
  double eff = 0, recent = 0, heavy = 0;
  std::vector<double> p;
  for (Index i = 0; i < samples; ++i) {
    const Index t = (i + 1) * N / samples - 1, keys = causal ? t + 1 : N;
    p.resize(std::size_t(keys));
    double mx = -INFINITY;
    for (Index j = 0; j < keys; ++j) {
      p[std::size_t(j)] = scale * double(q.row(t).dot(k.row(j)));
      mx = std::max(mx, p[std::size_t(j)]);
    }
    double z = 0;
    for (double& x : p) z += (x = std::exp(x - mx));
    double h = 0, last = 0;
    for (Index j = 0; j < keys; ++j) {
      double& x = p[std::size_t(j)];
      x /= z;
      if (x > 0) h -= x * std::log(x);
      if (j > t - n) last += x;
    }
    const auto top = std::min<std::size_t>(std::size_t(n), p.size());
    std::partial_sort(p.begin(), p.begin() + std::ptrdiff_t(top), p.end(), std::greater<double>());
    double sum_top = 0;
    for (std::size_t j = 0; j < top; ++j) sum_top += p[j];
    eff += std::exp(h);
    recent += last;
    heavy += sum_top;
  }
  const double s = double(samples);
  char line[400];
  if (causal)
    std::snprintf(line, sizeof line,
                  "exact attention (%ld sampled queries): weight spread over exp(entropy) = %.3g keys on "
                  "average;\n  the n = %ld most recent keys hold %.0f %% of it, the %ld heaviest %.0f %%",
                  long(samples), eff / s, long(n), 100 * recent / s, long(n), 100 * heavy / s);
  else
    std::snprintf(line, sizeof line,
                  "exact attention (%ld sampled queries): weight spread over exp(entropy) = %.3g keys on "
                  "average;\n  the n = %ld heaviest keys hold %.0f %% of it",
                  long(samples), eff / s, long(n), 100 * heavy / s);
  return line;
}

// ---- the table --------------------------------------------------------------------------------

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

void errors(Row& r, const Mat& out, const Mat& exact) {
  r.max_err = double((out - exact).cwiseAbs().maxCoeff());
  r.rms_err = std::sqrt(double((out - exact).squaredNorm()) / double(out.size()));
}

// ---- --select: the KV caches ---------------------------------------------------------------------

struct SelectRow {
  std::string name;
  Index budget = 0;
  double kept = 0, rel_err = 0, us = 0;
  std::size_t bytes = 0;
};

// Exact attention's weight, for decoded query t, on the tokens `read` (positions, t itself among them).
double kept_mass(const Mat& q, const Mat& k, Index t, const std::vector<std::int64_t>& read) {
  const double scale = 1.0 / std::sqrt(double(q.cols()));
  std::vector<double> p(std::size_t(t + 1));
  double mx = -INFINITY, z = 0, kept = 0;
  for (Index j = 0; j <= t; ++j) mx = std::max(mx, p[std::size_t(j)] = scale * double(q.row(t).dot(k.row(j))));
  for (double& x : p) z += (x = std::exp(x - mx));
  for (std::int64_t j : read) kept += p[std::size_t(j)];
  return kept / z;
}

// A cache: a prompt of N/2 tokens in one segment, then decode steps. `read(state, t)` lists the
// positions decoded query t reads before its step.
template <class Attn, class Read>
SelectRow select_row(const std::string& name, Index budget, const Attn& attn, const Read& read, const Mat& q,
                     const Mat& k, const Mat& v, const Mat& exact, int repeat) {
  const Index N = q.rows(), prompt = N / 2, steps = N - prompt, d = q.cols(), dv = v.cols();
  SelectRow r{name, budget};
  auto state = attn.make_state(d, dv);
  Mat out(steps, dv), prompt_out(prompt, dv);
  abc::Vector<float> o(dv);
  const Index samples = std::min<Index>(steps, 128);
  std::vector<double> times;
  for (int rep = 0; rep < repeat; ++rep) {
    state.reset();
    attn.segment_into(state, q.topRows(prompt), k.topRows(prompt), v.topRows(prompt), prompt_out);
    double kept = 0;
    Index next_sample = 0;
    double seconds = 0;
    for (Index t = prompt; t < N; ++t) {
      const Index i = t - prompt;
      if (rep == 0 && next_sample < samples && i == (next_sample + 1) * steps / samples - 1) {  // not timed
        std::vector<std::int64_t> positions = read(state);
        positions.push_back(t);
        kept += kept_mass(q, k, t, positions);
        ++next_sample;
      }
      const auto s = std::chrono::steady_clock::now();
      attn.step_into(state, q.row(t), k.row(t), v.row(t), o);
      seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - s).count();
      out.row(i) = o.transpose();
    }
    if (rep == 0) r.kept = kept / double(samples);
    times.push_back(seconds / double(steps));
  }
  std::sort(times.begin(), times.end());
  r.us = 1e6 * times[times.size() / 2];
  const Mat exact_steps = exact.bottomRows(steps);
  const double exact_rms = std::sqrt(double(exact_steps.squaredNorm()) / double(exact_steps.size()));
  r.rel_err = std::sqrt(double((out - exact_steps).squaredNorm()) / double(out.size())) / exact_rms;
  r.bytes = state.bytes();
  return r;
}

int run_select(const Config& cfg, const Workload& w) {
  const Mat &q = w.q, &k = w.k, &v = w.v;
  const Index N = q.rows(), d = q.cols();
  Mat exact(N, v.cols());
  abc::SoftmaxAttention<float>().forward_causal_into(q, k, v, exact);
  const auto kept_positions = [](const auto& state) {
    std::vector<std::int64_t> p;
    for (Index a = 0; a < state.size(); ++a) p.push_back(state.token_position(a));
    return p;
  };
  std::vector<SelectRow> rows;
  using namespace abc::select;
  const KeyScore<float> trams_score = KeyScore<float>::norm();
  for (Index b : {Index(64), Index(128), Index(256), Index(512), Index(1024)}) {
    if (b >= N / 2) break;
    const Index half = b / 2;
    rows.push_back(select_row("window", b, SinkAttention<float>(SinkConfig{0, b}), kept_positions, q, k, v, exact,
                              cfg.repeat));
    rows.push_back(select_row("sinks", b, SinkAttention<float>(SinkConfig{4, b - 4}), kept_positions, q, k, v, exact,
                              cfg.repeat));
    rows.push_back(select_row("h2o", b, HeavyHitterAttention<float>(HeavyHitterConfig{half, b - half}),
                              kept_positions, q, k, v, exact, cfg.repeat));
    rows.push_back(select_row("snapkv", b,
                              SnapKvAttention<float>(SnapKvConfig{half, std::min<Index>(32, half), 5,
                                                                  Pooling::average, b - half}),
                              kept_positions, q, k, v, exact, cfg.repeat));
    const TramsAttention<float> trams(TramsConfig{2 * b, half, b - half}, trams_score);
    rows.push_back(select_row(
        "trams", b, trams,
        [&trams](const auto& pool) {
          std::vector<std::int64_t> p;
          for (Index a : trams.attended(pool)) p.push_back(pool.token_position(a));
          return p;
        },
        q, k, v, exact, cfg.repeat));
  }
  std::printf("abc compare --select: KV caches for softmax attention, N = %ld (a prompt of %ld tokens in one "
              "segment, then %ld decode steps), d = %ld, float, median of %d (one thread)\n",
              long(N), long(N / 2), long(N - N / 2), long(d), cfg.repeat);
  std::printf("kernels: %s (this CPU: %s)\n", abc::simd_arch(), abc::cpu_simd_arch());
  std::printf("workload: %s\n%s\n\n", w.what.c_str(), attention_shape(q, k, 256, true).c_str());
  std::printf("%-8s %7s %10s %9s %9s %12s\n", "policy", "budget", "kept mass", "rel err", "us/step", "state bytes");
  for (const auto& r : rows)
    std::printf("%-8s %7ld %9.1f%% %9.3f %9.2f %12zu\n", r.name.c_str(), long(r.budget), 100 * r.kept, r.rel_err, r.us,
                r.bytes);
  std::printf("\ntrams (a TRAMS pool) scores keys by their norm here (no W_Q in a workload); compare --help "
              "explains every row and column.\n");
  return 0;
}

int run(const Config& cfg) {
  Workload w;
  if (cfg.npy_dir) {
    w = npy_workload(*cfg.npy_dir, cfg);
  } else if (cfg.workload == "decoder") {
    w = decoder_workload(cfg.tokens, cfg.dim, cfg.seed);
  } else {
    std::mt19937_64 rng(cfg.seed);
    w.q = uniform(cfg.tokens, cfg.dim, rng);
    w.k = uniform(cfg.tokens, cfg.dim, rng);
    w.v = uniform(cfg.tokens, cfg.dim, rng);
    w.what = "random: q, k, v uniform in [-1, 1], seed " + std::to_string(cfg.seed);
  }
  if (cfg.select) return run_select(cfg, w);
  const Mat &q = w.q, &k = w.k, &v = w.v;
  const Index N = q.rows(), d = q.cols(), dv = v.cols(), n = cfg.slots;
  std::mt19937_64 rng(cfg.seed ^ 0x9e3779b97f4a7c15ull);  // the controls' random weights
  const auto seed = [&] { return std::uint64_t(rng()); };

  abc::SoftmaxAttention<float> exact_attn;
  Mat exact(N, dv);
  Row base{"softmax (exact)"};
  base.ms = median_ms(cfg.repeat, [&] {
    if (cfg.causal) exact_attn.forward_causal_into(q, k, v, exact);
    else exact_attn.forward_into(q, k, v, exact);
  });
  base.bytes = std::size_t(N * (d + dv)) * sizeof(float);
  std::vector<Row> rows{base};

  auto add = [&](const std::string& name, const auto& control) {
    abc::BoundedAttention attn{control};
    Mat out(N, dv);
    auto state = attn.make_state(d, dv);
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
    errors(r, out, exact);
    rows.push_back(r);
  };
  using namespace abc::control;
  const Index half = std::max<Index>(n / 2, 1), rest = std::max<Index>(n - n / 2, 1);
  add("identity (n = N)", Identity<float>{N});
  add("window", SlidingWindow<float>{n});
  add("mlp exp", Mlp<float>(abc::Slots{n}, d, abc::Seed(seed())));
  add("mlp sigmoid", Mlp<float>(abc::Slots{n}, d, abc::Seed(seed()), Activation::sigmoid));
  add("mlp relu", Mlp<float>(abc::Slots{n}, d, abc::Seed(seed()), Activation::relu));
  add("gsa (slot gates)", SlotGates<float>(abc::Slots{n}, d, abc::Seed(seed())));  // GSA: a forget gate per slot, τ = 8
  add("linformer", Linformer<float>(abc::Slots{n}, N, abc::Seed(seed())));          // N_max = N
  add("random slot", RandomSlot<float>(abc::Slots{n}, abc::Seed(seed())));
  add("compressive", Compressive<float>(abc::Slots{n}, (N + n - 1) / n));  // ratio so that n·c ≥ N
  {
    // n global tokens spread evenly: every ⌈N/n⌉-th position.
    std::vector<Index> every;
    for (Index t = 0; t < N; t += (N + n - 1) / n) every.push_back(t);
    add("global tokens", GlobalTokens<float>(every));
    // Longformer / BigBird: half the slots global, half a window.
    std::vector<Index> spread;
    for (Index t = 0; t < N && Index(spread.size()) < half; t += (N + half - 1) / half) spread.push_back(t);
    add("concat global+window",
        Concat<GlobalTokens<float>, SlidingWindow<float>>(GlobalTokens<float>(spread), SlidingWindow<float>(rest)));
  }
  add("dilated r=2", Dilated<float>(abc::Slots{half}, 2));  // two buffers of n/2: the same slot count as the others
  if (cfg.causal)  // causal needs fixed centroids: k-means on the keys, fitted once outside the timing
    add("cluster", Cluster<float>(Cluster<float>::kmeans(k, abc::Slots{std::min(n, N)}, abc::Seed(seed()), 20).centroids));
  else  // non-causal fits k-means on the keys inside every call (20 Lloyd updates at most)
    add("cluster (k-means)", Cluster<float>(abc::Slots{n}, d, abc::Seed(seed()), 20));
  add("gated window",
      Gated<SlidingWindow<float>>(SlidingWindow<float>(n), abc::Vector<float>::Constant(d, 0.1f), 1.0f));
  // TRAMS without expiry: n/2 newest tokens + the n/2 best-scoring older ones (released-code score).
  const abc::select::KeyScore<float> trams_score(gaussian(d, d, 1.0f / std::sqrt(float(d)), rng));
  add("top-k eviction", TopKEviction<float>(abc::Slots{n}, n / 2, trams_score));
  if (cfg.causal) {
    // TRAMS proper (not a control): a FIFO pool of 2n tokens, reading n/2 recent + n/2 selected, fed
    // in segments of 64 tokens (causal within a segment). State: the pool.
    abc::select::TramsAttention<float> trams({2 * n, half, n - half}, trams_score);
    auto state = trams.make_state(d, dv);
    Mat out(N, dv);
    Row r{"trams (pool 2n)"};
    r.ms = median_ms(cfg.repeat, [&] {
      state.reset();
      for (Index t0 = 0; t0 < N; t0 += 64) {
        const Index c = std::min<Index>(64, N - t0);
        trams.segment_into(state, q.middleRows(t0, c), k.middleRows(t0, c), v.middleRows(t0, c), out.middleRows(t0, c));
      }
    });
    r.bytes = state.bytes();
    errors(r, out, exact);
    rows.push_back(r);
    // H2O (not a control): n tokens kept, n/2 recent and n/2 heavy hitters by accumulated attention
    // mass, decoded a token at a time (each step reads the kept tokens and itself, then evicts one).
    abc::select::HeavyHitterAttention<float> h2o(abc::select::HeavyHitterConfig{n - half, half});
    auto cache = h2o.make_state(d, dv);
    abc::Vector<float> o(dv);
    Row h{"h2o (n)"};
    h.ms = median_ms(cfg.repeat, [&] {
      cache.reset();
      for (Index t = 0; t < N; ++t) {
        h2o.step_into(cache, q.row(t), k.row(t), v.row(t), o);
        out.row(t) = o.transpose();
      }
    });
    h.bytes = cache.bytes();
    errors(h, out, exact);
    rows.push_back(h);
    // Attention sinks (StreamingLLM): the 4 first tokens and a window of the n - 4 newest, decoded
    // a token at a time.
    const Index sink_count = std::min<Index>(4, n - 1);
    abc::select::SinkAttention<float> sinks(abc::select::SinkConfig{sink_count, n - sink_count});
    auto sink_cache = sinks.make_state(d, dv);
    Row sk{"sinks (n)"};
    sk.ms = median_ms(cfg.repeat, [&] {
      sink_cache.reset();
      for (Index t = 0; t < N; ++t) {
        sinks.step_into(sink_cache, q.row(t), k.row(t), v.row(t), o);
        out.row(t) = o.transpose();
      }
    });
    sk.bytes = sink_cache.bytes();
    errors(sk, out, exact);
    rows.push_back(sk);
  }
  // RFA reads unit-norm q and k (the feature maps' default) and tends to softmax(σ² q̂·k̂) as D
  // grows: σ² = mean|q|·mean|k|/√d puts that temperature at the workload's mean logit scale
  // (about 2.7 for random q, k at any d). Its memory is 2D slots.
  const double sigma = std::sqrt(double(q.rowwise().norm().mean()) * double(k.rowwise().norm().mean()) /
                                 std::sqrt(double(d)));
  for (Index D : {Index(64), Index(256)}) {
    const abc::feature::Projection<float> projection(D, d, abc::Seed{seed()}, float(sigma));
    add("rfa D=" + std::to_string(D), RandomFeature<float>{abc::feature::RandomFourier<float>(projection.draw())});
  }

  const double exact_rms = std::sqrt(double(exact.squaredNorm()) / double(exact.size()));
  std::printf("abc compare: %s attention, N = %ld, d = %ld, dv = %ld, n = %ld, float, median of %d (one thread)\n",
              cfg.causal ? "causal" : "non-causal", long(N), long(d), long(dv), long(n), cfg.repeat);
  std::printf("kernels: %s (this CPU: %s)\n", abc::simd_arch(), abc::cpu_simd_arch());
  std::printf("workload: %s\n%s\n\n", w.what.c_str(), attention_shape(q, k, n, cfg.causal).c_str());
  std::printf("%-20s %10s %9s %12s %10s %10s %9s\n", "control", "time ms", "speed-up", "state bytes", "max err",
              "rms err", "rel err");
  for (const auto& r : rows)
    std::printf("%-20s %10.3f %8.2fx %12zu %10.2e %10.2e %9.2e\n", r.name.c_str(), r.ms, base.ms / r.ms, r.bytes,
                r.max_err, r.rms_err, exact_rms > 0 ? r.rms_err / exact_rms : 0.0);
  std::printf("\nstate bytes: the decode state after N tokens (softmax: its KV cache, growing with N).\n"
              "errors: against softmax (exact) on the same q, k, v; rel err = rms err / %.2e, the rms of the\n"
              "exact output. rfa: sigma = %.3g. compare --help explains every row and column.\n",
              exact_rms, sigma);
  return 0;
}

}  // namespace

// Built once per instruction set (bench/CMakeLists.txt), each copy is compare_main_<isa>, called by
// compare_dispatch.cpp's main; built alone, it is the program's main.
#ifdef ABC_COMPARE_DISPATCHED
#  define ABC_COMPARE_MAIN ABC_ISA_CAT(compare_main_, ABC_ISA)
int ABC_COMPARE_MAIN(int argc, char** argv);
int ABC_COMPARE_MAIN(int argc, char** argv) {
#else
int main(int argc, char** argv) {
#endif
  const Config cfg = parse(argc, argv);
  try {
    return run(cfg);
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "compare: out of memory for N = %ld, d = %ld, n = %ld (try smaller sizes)\n",
                 long(cfg.tokens), long(cfg.dim), long(cfg.slots));
  } catch (const std::exception& e) {
    // Library errors (abc::shape_error, abc::config_error) and bad files: their message, one line.
    std::string what = e.what();
    std::replace(what.begin(), what.end(), '\n', ' ');
    std::fprintf(stderr, "compare: %s\n", what.c_str());
  }
  return 2;
}
