// SPDX-License-Identifier: MIT
// abc: bounded-memory attention. select::HeavyHitters, the H2O policy of a KvCacheAttention: keep
// the recent tokens and the heavy hitters, the older tokens with the most accumulated attention.
#pragma once

#include <cstdint>
#include <string>

#include "../detail/check.hpp"
#include "../types.hpp"
#include "kv_cache_attention.hpp"

ABC_NAMESPACE_BEGIN
namespace select {

/// Sizes of an H2O cache. The paper splits its budget equally between heavy hitters and recent
/// tokens; the defaults keep 128 of each.
struct HeavyHitterConfig {
  Index heavy = 128;   ///< older tokens kept by accumulated attention mass
  Index recent = 128;  ///< the newest tokens, always kept
};

/**
 * \brief H2O (Zhang et al. 2023) as a KvCacheAttention policy: a token's score is its accumulated
 * attention mass, the sum over every query that has read it of the probability it gave it (its own
 * query's included). The cache keeps the `recent` newest tokens and the `heavy` older ones of
 * largest mass; of equal masses the older token goes first.
 */
template <class Scalar = float>
class HeavyHitters {
 public:
  /// float or double.
  using scalar_type = Scalar;

  /// \throws config_error if heavy or recent < 0.
  explicit HeavyHitters(HeavyHitterConfig config = {}) : cfg_(config) {
    constexpr const char* who = "abc::select::HeavyHitters";
    if (cfg_.heavy < 0) detail::raise(who, detail::at_least(Status::bad_config, "config.heavy", cfg_.heavy, 0, "a token count"));
    if (cfg_.recent < 0)
      detail::raise(who, detail::at_least(Status::bad_config, "config.recent", cfg_.recent, 0, "a token count"));
  }
  /// The configuration type KvCacheAttention accepts in place of the policy.
  using config_type = HeavyHitterConfig;
  /// The sizes, as given.
  const HeavyHitterConfig& config() const noexcept { return cfg_; }
  /// heavy: older tokens kept by score.
  Index selected() const noexcept { return cfg_.heavy; }
  /// The newest tokens, always kept.
  Index recent() const noexcept { return cfg_.recent; }
  /// The name of this policy's caches in blobs.
  static std::string tag() { return "abc::select::HeavyHitters"; }

  /// Adds every probability of the read to the mass of the token it went to.
  void update(const CacheRead<Scalar>& r, double* scores) const noexcept {
    for (Index i = 0; i < r.segment; ++i)
      for (Index j = 0; j < r.kept + i + 1; ++j) scores[j] += double(r.p(i, j));
  }
  /// A mass is a sum of probabilities, at most one per query of the stream.
  const char* score_problem(double score, std::int64_t, std::int64_t stream) const noexcept {
    return score >= 0 && score <= double(stream) + 1 ? nullptr : "expected a mass in [0, position + 1]";
  }

 private:
  HeavyHitterConfig cfg_;
};

/// H2O: a KvCacheAttention with the HeavyHitters policy.
template <class Scalar = float>
using HeavyHitterAttention = KvCacheAttention<HeavyHitters<Scalar>>;

}  // namespace select
ABC_NAMESPACE_END
