// SPDX-License-Identifier: MIT
// abc example: a tiny transformer decoder generating a long sequence token by token, with ABC-MLP
// attention (constant state) and with exact softmax attention over a growing KV cache.
//
//   tiny_decoder [tokens] [abc|softmax|both]     (defaults: 100000 both)
//
// The model: byte vocabulary (256), d_model 64, 2 layers of pre-norm multi-head attention (4 heads
// of 16) and a ReLU MLP (64 -> 256 -> 64) with residuals, RMS normalisation, tied embedding,
// seeded random weights, no positional encoding, and seeded sampling of the next token. Both runs
// use the same weights; only the attention differs:
//   abc      one abc::BoundedAttention{abc::control::Mlp<float>} (32 slots, its own W_φ) and one
//            State per layer and head, advanced with step_into: O(n · d) per token, fixed memory.
//   softmax  a KV cache per layer and head that grows by one key and one value per token, read
//            with a plain loop over the cache: O(t · d) per token, memory growing with t.
// A progress line after 1000 tokens and every 10000 after that shows tokens so far, tokens/s over
// the last interval and the bytes held by the attention state or caches.
//
// The softmax run is quadratic in total: when no token count is given it stops at 30000 tokens
// (100000 took 14 minutes, 7 of them on the CPU, on a busy 2-core machine, against 3 s for
// abc); pass a count to run it further.
#include <abc/abc.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <random>
#include <string>
#include <vector>

namespace {

using abc::Index;
using Mat = abc::Matrix<float>;
using Vec = abc::Vector<float>;

constexpr Index kVocab = 256, kModel = 64, kHeads = 4, kHead = kModel / kHeads, kLayers = 2,
                kHidden = 256, kSlots = 32;
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
  for (Index t = 0; t < tokens; ++t) {
    x = m.embed.row(token).transpose();
    for (Index l = 0; l < kLayers; ++l) {
      const Layer& layer = m.layers[static_cast<std::size_t>(l)];
      rms_norm(x, h);
      qkv.noalias() = layer.w_qkv * h;  // [q; k; v], each the H heads side by side
      attention.attend(l, qkv, att);
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
    if (done == 1000 || done % 10000 == 0 || done == tokens) {
      const auto now = std::chrono::steady_clock::now();
      const double secs = std::chrono::duration<double>(now - last).count();
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

/// ABC-MLP: a bounded memory of kSlots slots per layer and head, one step per token.
class AbcAttention {
 public:
  using Attn = abc::BoundedAttention<abc::control::Mlp<float>>;

  AbcAttention() {
    for (Index i = 0; i < kLayers * kHeads; ++i) {
      attn_.emplace_back(abc::control::Mlp<float>(kHead, kSlots, /*seed=*/1000 + static_cast<std::uint64_t>(i)));
      states_.push_back(attn_.back().make_state(kHead, kHead));
    }
  }

  void attend(Index layer, const Vec& qkv, Vec& out) {
    for (Index hd = 0; hd < kHeads; ++hd) {
      const auto i = static_cast<std::size_t>(layer * kHeads + hd);
      attn_[i].step_into(states_[i], qkv.segment(hd * kHead, kHead), qkv.segment(kModel + hd * kHead, kHead),
                         qkv.segment(2 * kModel + hd * kHead, kHead), out.segment(hd * kHead, kHead));
    }
  }

  std::size_t bytes() const {
    std::size_t b = 0;
    for (const auto& s : states_) b += s.bytes();
    return b;
  }

 private:
  std::vector<Attn> attn_;
  std::vector<Attn::state_type> states_;
};

/// Exact causal softmax attention: a KV cache per layer and head ([t × d] each, contiguous) that
/// grows by one row per token, read with O(t · d) work per token.
class SoftmaxCache {
 public:
  SoftmaxCache() : keys_(static_cast<std::size_t>(kLayers * kHeads)), values_(keys_.size()) {}

  void attend(Index layer, const Vec& qkv, Vec& out) {
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
  Index tokens = 100000;
  const bool explicit_count = argc > 1;
  if (explicit_count) {
    char* end = nullptr;
    tokens = std::strtoll(argv[1], &end, 10);
    if (end == argv[1] || *end != '\0' || tokens < 1) {
      std::cerr << "usage: tiny_decoder [tokens >= 1] [abc|softmax|both]\n";
      return 2;
    }
  }
  const std::string which = argc > 2 ? argv[2] : "both";
  if (which != "abc" && which != "softmax" && which != "both") {
    std::cerr << "usage: tiny_decoder [tokens >= 1] [abc|softmax|both]\n";
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
