// SPDX-License-Identifier: MIT
// abc: bounded-memory attention. select::SnapKv, the SnapKV policy of a KvCacheAttention: a prompt
// keeps the tokens its last queries attend to most (pooled), and decoding keeps a window.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "../detail/check.hpp"
#include "../types.hpp"
#include "kv_cache_attention.hpp"

ABC_NAMESPACE_BEGIN
namespace select {

/// How SnapKV smooths the observation window's votes over neighbouring tokens.
enum class Pooling {
  average,  ///< the mean over the kernel, zeros beyond the ends (the released code's default)
  max,      ///< the largest vote in the kernel
};

/// Sizes of a SnapKV cache; the defaults are the released code's (a prompt kept to 256 + 64
/// tokens, a window of 64, a kernel of 5, average pooling), with a decode window of 64.
struct SnapKvConfig {
  Index capacity = 256 + 64;  ///< prompt tokens kept, the observation window included
  Index window = 64;          ///< the prompt's last queries whose attention chooses what is kept
  Index kernel = 5;           ///< pooling width, odd
  Pooling pooling = Pooling::average;  ///< how the votes are smoothed
  Index recent = 64;          ///< the newest tokens, always kept: the decode window
};

/**
 * \brief SnapKV (Li et al. 2024) as a KvCacheAttention policy. A segment of more than one token
 * is a prompt: the attention its last `window` queries give each earlier token (their
 * probabilities summed: the votes) is pooled over `kernel` neighbours, and that is every older
 * token's score; the window's own tokens score +∞. The cut then keeps the `recent` newest tokens
 * and the `capacity` highest scores: with recent = 0, exactly SnapKV's compressed prompt (the
 * top capacity − window by pooled votes, and the window). A decoded token (a segment of one)
 * scores −∞, so it stays only while among the `recent` newest: decoding keeps a window, and the
 * compressed prompt stays.
 */
template <class Scalar = float>
class SnapKv {
 public:
  /// float or double.
  using scalar_type = Scalar;

  /// \throws config_error if a size is negative, window < 1, capacity < window, or the kernel is
  /// not odd and positive.
  explicit SnapKv(SnapKvConfig config = {}) : cfg_(config) {
    constexpr const char* who = "abc::select::SnapKv";
    detail::Problem p;
    if (cfg_.window < 1)
      p = detail::at_least(Status::bad_config, "config.window", cfg_.window, 1, "the queries that vote");
    else if (cfg_.capacity < cfg_.window)
      p = detail::value_problem(Status::bad_config, "config.capacity", cfg_.capacity, "at least ", cfg_.window,
                                "config.window: the prompt's kept tokens include its observation window");
    else if (cfg_.kernel < 1 || cfg_.kernel % 2 == 0)
      p = detail::value_problem(Status::bad_config, "config.kernel", cfg_.kernel, "odd and at least ", 1,
                                "the pooling is centred on each token");
    else if (cfg_.recent < 0)
      p = detail::at_least(Status::bad_config, "config.recent", cfg_.recent, 0, "a token count");
    if (p) detail::raise(who, p);
  }
  /// The configuration type KvCacheAttention accepts in place of the policy.
  using config_type = SnapKvConfig;
  /// The sizes, as given.
  const SnapKvConfig& config() const noexcept { return cfg_; }
  /// capacity: the prompt tokens kept by score.
  Index selected() const noexcept { return cfg_.capacity; }
  /// The newest tokens, always kept.
  Index recent() const noexcept { return cfg_.recent; }
  /// The name of this policy's caches in blobs.
  static std::string tag() { return "abc::select::SnapKv"; }

  /// A prompt rescores every token by the pooled votes of its observation window; a decoded token
  /// scores −∞.
  void update(const CacheRead<Scalar>& r, double* scores) const {
    constexpr double inf = std::numeric_limits<double>::infinity();
    const Index total = r.kept + r.segment;
    if (r.segment == 1) {
      scores[total - 1] = -inf;
      return;
    }
    const Index w = std::min(cfg_.window, r.segment), voted = total - w, half = cfg_.kernel / 2;
    // The pooling's memory first: once the votes overwrite the scores nothing may fail, or a
    // failed call would leave the kept tokens rescored.
    std::vector<double> held(std::size_t(std::min(half, voted)));
    // The votes go into the scores, then are pooled in place.
    for (Index j = 0; j < voted; ++j) {
      double v = 0;
      for (Index i = r.segment - w; i < r.segment; ++i) v += double(r.p(i, j));
      scores[j] = v;
    }
    pool(scores, voted, half, held);
    for (Index j = voted; j < total; ++j) scores[j] = inf;
  }
  /// Any score but NaN (−∞: a decoded token; +∞: an observation window's).
  const char* score_problem(double score, std::int64_t, std::int64_t) const noexcept {
    return score == score ? nullptr : "expected a number";
  }

 private:
  // In place: x[j] ← the pool of x[j − half … j + half] (zeros beyond the ends for the average,
  // nothing for the max). The inputs to the left of j, which earlier outputs have overwritten, are
  // kept in `held` (min(half, count) entries): the last of them.
  void pool(double* x, Index count, Index half, std::vector<double>& held) const noexcept {
    if (half == 0 || count == 0) return;
    const bool max = cfg_.pooling == Pooling::max;
    const double width = double(half) * 2 + 1;
    const Index room = Index(held.size());
    Index held_count = 0;
    for (Index j = 0; j < count; ++j) {
      double acc = max ? -std::numeric_limits<double>::infinity() : 0.0;
      const auto take = [&](double v) { acc = max ? std::max(acc, v) : acc + v; };
      for (Index h = 0; h < held_count; ++h) take(held[std::size_t(h)]);
      const Index last = j + std::min(half, count - 1 - j);
      for (Index t = j; t <= last; ++t) take(x[t]);
      const double input = x[j];
      x[j] = max ? acc : acc / width;
      if (held_count < room) {
        held[std::size_t(held_count++)] = input;
      } else {  // the oldest held input leaves the window
        std::rotate(held.begin(), held.begin() + 1, held.end());
        held[std::size_t(room - 1)] = input;
      }
    }
  }

  SnapKvConfig cfg_;
};

/// SnapKV: a KvCacheAttention with the SnapKv policy.
template <class Scalar = float>
using SnapKvAttention = KvCacheAttention<SnapKv<Scalar>>;

}  // namespace select
ABC_NAMESPACE_END
