// SPDX-License-Identifier: MIT
// abc example: a tiny transformer decoder generating a long sequence token by token, with ABC-MLP
// attention (constant state) and with exact softmax attention over a growing KV cache.
//
//   tiny_decoder [tokens] [abc|softmax|both]
//
// Defaults: both runs, ABC-MLP for 100000 tokens and softmax for 30000 (below); a token count
// given on the command line applies to both.
//
// The model: byte vocabulary (256), d_model 64, 2 layers of pre-norm multi-head attention (4 heads
// of 16) and a ReLU MLP (64 -> 256 -> 64) with residuals, RMS normalisation, tied embedding,
// seeded random weights, no positional encoding, and seeded sampling of the next token. Both runs
// use the same weights; only the attention differs:
//   abc      per layer one abc::MultiHeadAttention of abc::control::Mlp<float> (32 slots, each head's
//            own W_φ reading the layer input, as the ABC paper does) and a decode Pool: O(n · d)
//            per head and token, fixed memory.
//   softmax  a KV cache per layer and head that grows by one key and one value per token, read
//            with two matrix-vector products over the cache: O(t · d) per token, memory growing
//            with t.
// Each run prints a labelled line after 1000 tokens, every 10000 after that and at the end: tokens
// so far, tokens/s over the last interval and the bytes held by the attention state or caches
// (CTest and logs read these). When stdout is a terminal, a progress bar below them is redrawn in
// place with the tokens done, the current rate and the time left.
//
// The softmax run does O(t) work for token t, so its total grows with the square of the length:
// when no token count is given it stops at 30000 tokens; pass a count to run it further.
#include <abc/abc.hpp>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <random>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#if defined(_WIN32)
#include <io.h>
#define ABC_EXAMPLE_ISATTY(f) _isatty(_fileno(f))
#else
#include <unistd.h>
#define ABC_EXAMPLE_ISATTY(f) isatty(fileno(f))
#endif

namespace {

using abc::Index;
using Mat = abc::Matrix<float>;
using Vec = abc::Vector<float>;

constexpr Index kVocab = 256, kModel = 64, kHeads = 4, kHead = kModel / kHeads, kLayers = 2,
                kHidden = 256, kSlots = 32;
constexpr Index kAbcDefault = 100000;     // the token count when none is given
constexpr Index kSoftmaxDefault = 30000;  // the softmax run's length when none is given

Mat gaussian(Index rows, Index cols, float sd, std::mt19937_64& rng) {
  std::normal_distribution<float> normal(0.0f, sd);
  Mat m(rows, cols);
  for (Index i = 0; i < m.size(); ++i) m.data()[i] = normal(rng);
  return m;
}

void rms_norm(const Vec& x, Vec& y) {
  const float ms = x.squaredNorm() / static_cast<float>(x.size());
  y = x / std::sqrt(ms + 1e-5f);
}

struct Layer {
  Mat w_qkv, w_o, w_1, w_2;  // [3D × D], [D × D], [F × D], [D × F]
};

/// The decoder without its attention: `Attention::attend(layer, qkv, out)` is the only thing the
/// two runs do differently.
struct Model {
  Mat embed;  // [V × D], also the output projection (tied)
  std::vector<Layer> layers;

  explicit Model(std::uint64_t seed) {
    std::mt19937_64 rng(seed);
    embed = gaussian(kVocab, kModel, 1.0f, rng);
    const float sd_in = 1.0f / std::sqrt(float(kModel)), sd_hidden = 1.0f / std::sqrt(float(kHidden));
    for (Index l = 0; l < kLayers; ++l)
      layers.push_back({gaussian(3 * kModel, kModel, sd_in, rng), gaussian(kModel, kModel, sd_in, rng),
                        gaussian(kHidden, kModel, sd_in, rng), gaussian(kModel, kHidden, sd_hidden, rng)});
  }
};

/// A one-line progress bar redrawn in place (carriage return, no newline), on a terminal only: piped
/// output such as CTest's log gets nothing from it, so every line there is a complete record.
class ProgressBar {
 public:
  using Clock = std::chrono::steady_clock;

  ProgressBar(std::string name, Index total)
      : on_(ABC_EXAMPLE_ISATTY(stdout) != 0), name_(std::move(name)), total_(total), last_(Clock::now()) {}

  /// Redraws the bar if a fifth of a second has passed since the last redraw.
  void update(Index done) {
    if (!on_) return;
    const auto now = Clock::now();
    const double dt = std::chrono::duration<double>(now - last_).count();
    if (dt < 0.2) return;
    // The rate is smoothed over about a second: the softmax run slows down as its cache grows,
    // and a rate over the whole run would promise too early an end.
    const double recent = double(done - last_done_) / dt;
    rate_ = rate_ > 0 ? 0.8 * rate_ + 0.2 * recent : recent;
    last_ = now;
    last_done_ = done;
    const int width = 24, filled = int(double(width) * double(done) / double(total_));
    std::ostringstream line;
    line << "  " << name_ << " [" << std::string(std::size_t(filled), '#')
         << std::string(std::size_t(width - filled), '.') << "] " << done << '/' << total_ << " tokens  " << static_cast<long long>(rate_) << " tokens/s  ETA "
         << clock_time(double(total_ - done) / std::max(rate_, 1e-9));
    draw(line.str());
  }

  /// Erases the bar, before a line of output and at the end of the run.
  void clear() {
    if (on_ && shown_ > 0) draw("");
  }

 private:
  static std::string clock_time(double seconds) {
    const auto s = static_cast<long long>(std::min(seconds, 359999.0) + 0.5);
    char buf[32];
    std::snprintf(buf, sizeof buf, "%lld:%02lld:%02lld", s / 3600, s / 60 % 60, s % 60);
    return buf;
  }

  // Spaces over the rest of the previous text, then the cursor back to the line's start.
  void draw(const std::string& text) {
    std::cout << '\r' << text;
    if (text.size() < shown_) std::cout << std::string(shown_ - text.size(), ' ') << '\r' << text;
    std::cout << std::flush;
    shown_ = text.size();
  }

  bool on_;
  std::string name_;
  Index total_, last_done_ = 0;
  Clock::time_point last_;
  double rate_ = 0;
  std::size_t shown_ = 0;
};

/// Generates `tokens` tokens from token 0, printing progress; returns a checksum of the tokens.
template <class Attention>
std::uint64_t generate(const Model& m, Attention& attention, Index tokens, const char* name) {
  Vec x(kModel), h(kModel), qkv(3 * kModel), att(kModel), hidden(kHidden), logits(kVocab);
  std::mt19937_64 rng(12345);
  std::uniform_real_distribution<float> uniform(0.0f, 1.0f);
  std::uint64_t checksum = 0;
  Index token = 0;
  std::cout << name << ": generating " << tokens << " tokens\n";
  const auto start = std::chrono::steady_clock::now();
  auto last = start;
  Index last_t = 0;
  ProgressBar bar(name, tokens);
  for (Index t = 0; t < tokens; ++t) {
    x = m.embed.row(token).transpose();
    for (Index l = 0; l < kLayers; ++l) {
      const Layer& layer = m.layers[static_cast<std::size_t>(l)];
      rms_norm(x, h);
      qkv.noalias() = layer.w_qkv * h;  // [q; k; v], each the H heads side by side
      attention.attend(l, qkv, h, att);  // h: the layer input, which ABC-MLP's control reads
      x.noalias() += layer.w_o * att;
      rms_norm(x, h);
      hidden.noalias() = layer.w_1 * h;
      hidden = hidden.cwiseMax(0.0f);
      x.noalias() += layer.w_2 * hidden;
    }
    rms_norm(x, h);
    logits.noalias() = m.embed * h;
    // Sample from softmax(logits / sqrt(D)): a temperature that keeps random weights from
    // collapsing into greedy repetition.
    logits = (logits.array() - logits.maxCoeff()) / std::sqrt(float(kModel));
    logits = logits.array().exp();
    const float u = uniform(rng) * logits.sum();
    float acc = 0;
    token = kVocab - 1;
    for (Index i = 0; i < kVocab; ++i) {
      acc += logits(i);
      if (acc > u) {
        token = i;
        break;
      }
    }
    checksum = checksum * 1000003u + static_cast<std::uint64_t>(token);

    const Index done = t + 1;
    if (done % 64 == 0) bar.update(done);
    if (done == 1000 || done % 10000 == 0 || done == tokens) {
      const auto now = std::chrono::steady_clock::now();
      const double secs = std::chrono::duration<double>(now - last).count();
      bar.clear();
      std::cout << "  " << name << "  tokens " << done << "  tokens/s "
                << static_cast<long long>(double(done - last_t) / secs) << "  attention bytes "
                << attention.bytes() << std::endl;  // flushed: progress shows when piped too
      last = now;
      last_t = done;
    }
  }
  const double total = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cout << name << ": " << tokens << " tokens in " << total << " s ("
            << static_cast<long long>(double(tokens) / total) << " tokens/s), attention bytes "
            << attention.bytes() << ", token checksum " << checksum << '\n';
  return checksum;
}

/// ABC-MLP as the paper runs it: per layer one MultiHeadAttention, a control per head whose W_φ
/// [kSlots × d_model] reads the layer input (the normalised residual stream h), and a decode Pool
/// with one sequence: one call per layer and token steps every head, the slot logits of all heads
/// one product h [W_φ¹; …; W_φᴴ]ᵀ. O(n · d) per head and token, fixed memory.
class AbcAttention {
 public:
  using Mha = abc::MultiHeadAttention<abc::control::Mlp<float>>;

  AbcAttention() {
    for (Index l = 0; l < kLayers; ++l) {
      std::vector<abc::control::Mlp<float>> controls;
      for (Index hd = 0; hd < kHeads; ++hd)
        controls.emplace_back(abc::Slots{kSlots}, kModel, abc::Seed{1000 + static_cast<std::uint64_t>(l * kHeads + hd)});
      layers_.emplace_back(controls, kHeads, kHeads);
      layers_.back().add(pools_.emplace_back(), 0, kHead, kHead);
    }
  }

  void attend(Index layer, const Vec& qkv, const Vec& h, Vec& out) {
    using In = abc::HeadTensor<const float>;
    // [q; k; v] of one token, each [1, 1, heads, d] side by side in qkv; the layer input as one
    // head shared by all.
    const auto part = [&](Index i) { return In::bshd(qkv.data() + i * kModel, 1, 1, kHeads, kHead); };
    const auto l = static_cast<std::size_t>(layer);
    layers_[l].forward_causal(pools_[l], {0}, part(0), part(1), part(2), In::bshd(h.data(), 1, 1, 1, kModel),
                              abc::HeadTensor<float>::bshd(out.data(), 1, 1, kHeads, kHead));
  }

  std::size_t bytes() const {
    std::size_t b = 0;
    for (const auto& p : pools_) b += p.bytes();
    return b;
  }

 private:
  std::vector<Mha> layers_;
  std::vector<Mha::Pool> pools_;
};

/// Exact causal softmax attention: a KV cache per layer and head ([t × d] each, contiguous) that
/// grows by one row per token, read with O(t · d) work per token.
class SoftmaxCache {
 public:
  SoftmaxCache() : keys_(static_cast<std::size_t>(kLayers * kHeads)), values_(keys_.size()) {}

  void attend(Index layer, const Vec& qkv, const Vec& /*h: softmax attention reads no control input*/, Vec& out) {
    const float scale = 1.0f / std::sqrt(float(kHead));
    for (Index hd = 0; hd < kHeads; ++hd) {
      const auto i = static_cast<std::size_t>(layer * kHeads + hd);
      std::vector<float>& kc = keys_[i];
      std::vector<float>& vc = values_[i];
      const float* k = qkv.data() + kModel + hd * kHead;
      const float* v = qkv.data() + 2 * kModel + hd * kHead;
      kc.insert(kc.end(), k, k + kHead);
      vc.insert(vc.end(), v, v + kHead);
      const Index t = static_cast<Index>(kc.size()) / kHead;
      const Eigen::Map<const Mat> K(kc.data(), t, kHead), V(vc.data(), t, kHead);
      scores_.resize(t);
      scores_.noalias() = scale * (K * qkv.segment(hd * kHead, kHead));
      scores_ = (scores_.array() - scores_.maxCoeff()).exp();
      out.segment(hd * kHead, kHead).noalias() = (V.transpose() * scores_) / scores_.sum();
    }
  }

  std::size_t bytes() const {  // the cached keys and values (not the vectors' spare capacity)
    std::size_t b = 0;
    for (std::size_t i = 0; i < keys_.size(); ++i) b += (keys_[i].size() + values_[i].size()) * sizeof(float);
    return b;
  }

 private:
  std::vector<std::vector<float>> keys_, values_;
  Vec scores_;
};

}  // namespace

int main(int argc, char** argv) {
  const char* usage = "usage: tiny_decoder [tokens] [abc|softmax|both]";
  if (argc > 1 && (std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h")) {
    std::cout << usage << "\n  defaults: both runs, abc-mlp for " << kAbcDefault << " tokens and softmax for "
              << kSoftmaxDefault << "; a token count applies to both\n";
    return 0;
  }
  if (argc > 3) {
    std::cerr << "tiny_decoder: too many arguments (" << usage << ")\n";
    return 2;
  }
  Index tokens = kAbcDefault;
  const bool explicit_count = argc > 1;
  if (explicit_count) {
    char* end = nullptr;
    errno = 0;
    tokens = std::strtoll(argv[1], &end, 10);
    if (end == argv[1] || *end != '\0' || errno == ERANGE || tokens < 1) {
      std::cerr << "tiny_decoder: the token count wants an integer >= 1, got '" << argv[1] << "' (" << usage << ")\n";
      return 2;
    }
  }
  const std::string which = argc > 2 ? argv[2] : "both";
  if (which != "abc" && which != "softmax" && which != "both") {
    std::cerr << "tiny_decoder: the run wants abc, softmax or both, got '" << which << "' (" << usage << ")\n";
    return 2;
  }

  std::cout << "tiny decoder: vocab " << kVocab << ", d_model " << kModel << ", " << kLayers << " layers of "
            << kHeads << " heads (d " << kHead << "), ABC-MLP with " << kSlots << " slots\n";
  const Model model(/*seed=*/2024);
  if (which != "softmax") {
    AbcAttention abc_attention;
    generate(model, abc_attention, tokens, "abc-mlp");
  }
  if (which != "abc") {
    Index n = tokens;
    if (!explicit_count && n > kSoftmaxDefault) {
      n = kSoftmaxDefault;
      std::cout << "softmax: O(t) work per token, " << tokens << " tokens would take minutes; running " << n
                << " (pass a token count to run more)\n";
    }
    SoftmaxCache cache;
    generate(model, cache, n, "softmax");
  }
  return 0;
}
