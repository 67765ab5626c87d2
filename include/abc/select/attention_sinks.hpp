// SPDX-License-Identifier: MIT
// abc: bounded-memory attention. select::AttentionSinks, the StreamingLLM policy of a
// KvCacheAttention: keep the first tokens of the stream and a window of the newest.
#pragma once

#include <cstdint>
#include <string>

#include "../detail/check.hpp"
#include "../types.hpp"
#include "kv_cache_attention.hpp"

ABC_NAMESPACE_BEGIN
namespace select {

/// Sizes of an attention-sink cache. StreamingLLM keeps 4 sink tokens; the window is the rest of
/// the cache.
struct SinkConfig {
  Index sinks = 4;      ///< the stream's first tokens, kept for good
  Index window = 1020;  ///< the newest tokens, always kept
};

/**
 * \brief Attention sinks (StreamingLLM, Xiao et al. 2024) as a KvCacheAttention policy: a token's
 * score is minus its position, so of the tokens older than the window the `sinks` first of the
 * stream stay. A step reads the sinks, the `window` previous tokens and itself: the read of
 * control::Concat<GlobalTokens{0 … sinks − 1}, SlidingWindow{window + 1}>, each token once.
 */
template <class Scalar = float>
class AttentionSinks {
 public:
  /// float or double.
  using scalar_type = Scalar;

  /// \throws config_error if sinks or window < 0.
  explicit AttentionSinks(SinkConfig config = {}) : cfg_(config) {
    constexpr const char* who = "abc::select::AttentionSinks";
    if (cfg_.sinks < 0) detail::raise(who, detail::at_least(Status::bad_config, "config.sinks", cfg_.sinks, 0, "a token count"));
    if (cfg_.window < 0)
      detail::raise(who, detail::at_least(Status::bad_config, "config.window", cfg_.window, 0, "a token count"));
  }
  /// The configuration type KvCacheAttention accepts in place of the policy.
  using config_type = SinkConfig;
  /// The sizes, as given.
  const SinkConfig& config() const noexcept { return cfg_; }
  /// sinks: older tokens kept by score.
  Index selected() const noexcept { return cfg_.sinks; }
  /// window: the newest tokens, always kept.
  Index recent() const noexcept { return cfg_.window; }
  /// The name of this policy's caches in blobs.
  static std::string tag() { return "abc::select::AttentionSinks"; }

  /// A new token scores minus its position: the earlier, the higher.
  void update(const CacheRead<Scalar>& r, double* scores) const noexcept {
    for (Index j = r.kept; j < r.kept + r.segment; ++j) scores[j] = -double(r.positions[j]);
  }
  /// The score is minus the token's position.
  const char* score_problem(double score, std::int64_t token, std::int64_t) const noexcept {
    return score == -double(token) ? nullptr : "expected minus the token's position";
  }

 private:
  SinkConfig cfg_;
};

/// StreamingLLM: a KvCacheAttention with the AttentionSinks policy.
template <class Scalar = float>
using SinkAttention = KvCacheAttention<AttentionSinks<Scalar>>;

}  // namespace select
ABC_NAMESPACE_END
