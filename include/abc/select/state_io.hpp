// SPDX-License-Identifier: MIT
// abc: bounded-memory attention. select::save_state / select::load_state: a TRAMS pool or a KV
// cache (H2O, attention sinks, SnapKV) as a versioned binary blob.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "../detail/blob.hpp"
#include "../detail/check.hpp"
#include "../detail/select_state_access.hpp"
#include "../error.hpp"
#include "../types.hpp"
#include "key_score.hpp"
#include "kv_cache_attention.hpp"
#include "trams_attention.hpp"

ABC_NAMESPACE_BEGIN
namespace select {

/// The tag a TRAMS pool carries in a blob (where a BoundedAttention state carries its control's).
inline constexpr const char* trams_state_tag = "abc::select::TramsAttention";

/// The widest key or value a selection blob may hold: a loaded cache allocates its whole budget of
/// rows of this width before any token is read, so the width is bounded by what a head can be, not
/// by the blob's length.
inline constexpr Index select_blob_max_width = Index(1) << 16;

/**
 * \brief Serialises the pool `state` of `attn` to a versioned, little-endian binary blob.
 *
 * Layout (all integers little-endian): the header of every abc state blob (magic "ABCSTATE"; u32
 * version 2; u32 scalar size, 4 or 8; u32 length and bytes of the tag "abc::select::TramsAttention");
 * u64 pool (config().pool), d, dv, size (tokens held), position (tokens consumed); u32 score kind
 * (ScoreKind, in declaration order) and u64 the score's model_dim(); then the size() tokens, oldest
 * first, each as key [d], value [dv] and score, IEEE bit patterns; u64 FNV-1a checksum of
 * everything before it. The scores travel with their keys: they were computed once, when each key
 * entered the pool, and a loaded pool ranks by them.
 * \throws config_error if `state` is not a pool of this attention (its capacity is not config().pool).
 */
template <class Scalar>
std::vector<std::uint8_t> save_state(const TramsAttention<Scalar>& attn,
                                     const typename TramsAttention<Scalar>::State& state) {
  if (state.capacity() != attn.config().pool)
    detail::raise("abc::select::save_state",
                  detail::value_problem(Status::bad_config, "state.capacity()", state.capacity(), "", attn.config().pool,
                                        "config.pool: the state must come from make_state(d, dv) of this attention"));
  detail::Writer w;
  detail::write_blob_header(w, sizeof(Scalar), trams_state_tag);
  for (const std::int64_t x : {std::int64_t(state.capacity()), std::int64_t(state.key_dim()),
                               std::int64_t(state.value_dim()), std::int64_t(state.size()), state.position()})
    w.u64(std::uint64_t(x));
  w.u32(std::uint32_t(attn.score().kind()));
  w.u64(std::uint64_t(attn.score().model_dim()));
  for (Index age = 0; age < state.size(); ++age) {
    const auto k = state.key(age), v = state.value(age);
    for (Index j = 0; j < k.size(); ++j) w.scalar(k(j));
    for (Index j = 0; j < v.size(); ++j) w.scalar(v(j));
    w.scalar(state.score(age));
  }
  w.u64(detail::fnv1a(w.bytes.data(), w.bytes.size()));
  return std::move(w.bytes);
}

/**
 * \brief Restores a pool blob written by select::save_state into `dst`, for use with `attn`.
 *
 * Everything is checked before `dst` is touched: the header (magic, checksum, version, scalar size,
 * tag), the pool size (the attention's config().pool), the key and value widths (`dst`'s, unless
 * `dst` is default-constructed; the score's key_dim() where it has one; at most
 * select_blob_max_width), the score's kind and model_dim (the attention's), the token count (at most
 * the pool) and position (at least the token count), the exact length, and that every key and
 * value is finite and no score is NaN. Any mismatch throws config_error naming it, and `dst` is
 * left as it was. recent, topk, the scale and the position mode are the attention's, not the
 * pool's: a pool may be loaded into an attention that reads it differently.
 */
template <class Scalar>
void load_state(const TramsAttention<Scalar>& attn, const std::uint8_t* data, std::size_t size,
                typename TramsAttention<Scalar>::State& dst) {
  constexpr const char* who = "abc::select::load_state";
  const auto blob_error = [](const std::string& what) { detail::blob_error(who, what); };
  const auto str = [](auto x) { return std::to_string(x); };
  detail::Reader r = detail::read_blob_header(who, data, size, sizeof(Scalar), trams_state_tag);
  const std::uint64_t pool = r.u64(), d = r.u64(), dv = r.u64(), tokens = r.u64(), pos = r.u64();
  const std::uint32_t kind = r.u32();
  const std::uint64_t model_dim = r.u64();
  if (!r.ok) blob_error("truncated header");
  const TramsConfig& cfg = attn.config();
  if (pool != std::uint64_t(cfg.pool))
    blob_error("pool is " + str(pool) + ", expected " + str(cfg.pool) + " (the attention's config.pool)");
  detail::check_select_blob(
      who, {d, dv, tokens, pos}, dst.key_dim(), dst.value_dim(), pool, "the pool", pool,
      std::uint64_t(select_blob_max_width), [](std::uint64_t dk, std::uint64_t dvk) { return (dk + dvk + 1) * sizeof(Scalar); },
      r.at, size);
  if (attn.score().key_dim() > 0 && d != std::uint64_t(attn.score().key_dim()))
    blob_error("d is " + str(d) + ", expected " + str(attn.score().key_dim()) + " (the rows of the score's W_Q)");
  if (kind != std::uint32_t(attn.score().kind()) || model_dim != std::uint64_t(attn.score().model_dim()))
    blob_error("the score is kind " + str(kind) + " with model_dim " + str(model_dim) + ", expected kind " +
               str(std::uint32_t(attn.score().kind())) + " with model_dim " + str(attn.score().model_dim()) +
               " (the attention's score: the pool's scores were computed by it)");
  auto s = detail::TramsStateAccess::empty<Scalar>(Index(pool), Index(d), Index(dv));
  Vector<Scalar> k(static_cast<Index>(d)), v(static_cast<Index>(dv));
  const std::int64_t first = std::int64_t(pos - tokens);
  for (std::uint64_t age = 0; age < tokens; ++age) {
    for (Index j = 0; j < k.size(); ++j) k(j) = r.scalar<Scalar>();
    for (Index j = 0; j < v.size(); ++j) v(j) = r.scalar<Scalar>();
    const Scalar score = r.scalar<Scalar>();
    if (!(k.allFinite() && v.allFinite()))
      blob_error("the key or value of the token of age " + str(age) + " is not finite");
    if (std::isnan(score))
      blob_error("the score of the token of age " + str(age) + " is NaN (a key's score is never NaN)");
    detail::TramsStateAccess::append<Scalar>(s, k.data(), v.data(), score, first + std::int64_t(age));
  }
  detail::TramsStateAccess::set_position<Scalar>(s, std::int64_t(pos));
  dst = std::move(s);
}

/// As load_state(attn, data, size, dst), from a byte vector.
template <class Scalar>
void load_state(const TramsAttention<Scalar>& attn, const std::vector<std::uint8_t>& blob,
                typename TramsAttention<Scalar>::State& dst) {
  load_state(attn, blob.data(), blob.size(), dst);
}

/**
 * \brief Serialises the KV cache `state` of `attn` to a versioned, little-endian binary blob.
 *
 * Layout: the header of every abc state blob with the policy's tag (Policy::tag(), e.g.
 * "abc::select::HeavyHitters"); u64 selected, recent, d, dv, size (tokens kept), position (tokens
 * consumed); then the size() kept tokens, oldest first, each as key [d] and value [dv] (IEEE bit
 * patterns of the scalar), its score (f64) and its stream position (i64); u64 FNV-1a checksum of
 * everything before it.
 * \throws config_error if `state` is not a cache of this attention (its capacity is not the budget).
 */
template <class Policy>
std::vector<std::uint8_t> save_state(const KvCacheAttention<Policy>& attn,
                                     const typename KvCacheAttention<Policy>::State& state) {
  using Scalar = typename Policy::scalar_type;
  if (state.capacity() != attn.budget())
    detail::raise("abc::select::save_state",
                  detail::value_problem(Status::bad_config, "state.capacity()", state.capacity(), "", attn.budget(),
                                        "selected + recent: the state must come from make_state(d, dv) of this "
                                        "attention"));
  detail::Writer w;
  detail::write_blob_header(w, sizeof(Scalar), Policy::tag());
  for (const std::int64_t x : {std::int64_t(attn.policy().selected()), std::int64_t(attn.policy().recent()),
                               std::int64_t(state.key_dim()), std::int64_t(state.value_dim()),
                               std::int64_t(state.size()), state.position()})
    w.u64(std::uint64_t(x));
  for (Index age = 0; age < state.size(); ++age) {
    const auto k = state.key(age), v = state.value(age);
    for (Index j = 0; j < k.size(); ++j) w.scalar(k(j));
    for (Index j = 0; j < v.size(); ++j) w.scalar(v(j));
    w.scalar(state.score(age));
    w.u64(std::uint64_t(state.token_position(age)));
  }
  w.u64(detail::fnv1a(w.bytes.data(), w.bytes.size()));
  return std::move(w.bytes);
}

/**
 * \brief Restores a KV cache blob written by select::save_state into `dst`, for use with `attn`.
 *
 * Everything is checked before `dst` is touched: the header (the tag is the policy's), selected
 * and recent (the attention's policy's), the key and value widths (`dst`'s unless `dst` is
 * default-constructed; at most select_blob_max_width), the token count (at most the budget) and
 * position (< 2^62), the exact length, and that the tokens are ones this cache could hold: finite
 * keys and values, positions increasing and before the stream's position, the newest
 * min(recent, size) of them the stream's last tokens, and each score one the policy could have
 * given (Policy::score_problem; never NaN). Any mismatch throws config_error naming it, and `dst`
 * is left as it was.
 */
template <class Policy>
void load_state(const KvCacheAttention<Policy>& attn, const std::uint8_t* data, std::size_t size,
                typename KvCacheAttention<Policy>::State& dst) {
  using Scalar = typename Policy::scalar_type;
  constexpr const char* who = "abc::select::load_state";
  const auto blob_error = [](const std::string& what) { detail::blob_error(who, what); };
  const auto str = [](auto x) { return std::to_string(x); };
  detail::Reader r = detail::read_blob_header(who, data, size, sizeof(Scalar), Policy::tag());
  const std::uint64_t selected = r.u64(), recent = r.u64(), d = r.u64(), dv = r.u64(), tokens = r.u64(), pos = r.u64();
  if (!r.ok) blob_error("truncated header");
  const Policy& policy = attn.policy();
  if (selected != std::uint64_t(policy.selected()) || recent != std::uint64_t(policy.recent()))
    blob_error("selected is " + str(selected) + " and recent " + str(recent) + ", expected " +
               str(policy.selected()) + " and " + str(policy.recent()) + " (the attention's policy)");
  const std::uint64_t budget = std::uint64_t(attn.budget());
  detail::check_select_blob(
      who, {d, dv, tokens, pos}, dst.key_dim(), dst.value_dim(), budget, "selected + recent", budget + 1,
      std::uint64_t(select_blob_max_width),
      [](std::uint64_t dk, std::uint64_t dvk) { return (dk + dvk) * sizeof(Scalar) + 16; }, r.at, size);
  if (attn.rope() && d < std::uint64_t(attn.rope()->dims()))
    blob_error("d is " + str(d) + ", expected at least " + str(attn.rope()->dims()) +
               " (the attention's rope turns that many entries)");
  auto s = detail::KvCacheStateAccess::empty<Policy>(Index(budget), Index(d), Index(dv));
  Vector<Scalar> k(static_cast<Index>(d)), v(static_cast<Index>(dv));
  const std::uint64_t recent_kept = std::min(recent, tokens);
  std::int64_t previous = -1;
  for (std::uint64_t age = 0; age < tokens; ++age) {
    for (Index j = 0; j < k.size(); ++j) k(j) = r.scalar<Scalar>();
    for (Index j = 0; j < v.size(); ++j) v(j) = r.scalar<Scalar>();
    const double score = r.scalar<double>();
    const auto at = static_cast<std::int64_t>(r.u64());
    const std::string token = "the token of age " + str(age);
    if (!(k.allFinite() && v.allFinite())) blob_error("the key or value of " + token + " is not finite");
    if (at <= previous || at >= std::int64_t(pos))
      blob_error("the position of " + token + " is " + str(at) + ", expected in [" + str(previous + 1) + ", " +
                 str(pos) + ") (kept tokens are in stream order, before the stream's position)");
    if (age >= tokens - recent_kept && std::uint64_t(at) != pos - (tokens - age))
      blob_error("the position of " + token + " is " + str(at) + ", expected " + str(pos - (tokens - age)) +
                 " (the newest " + str(recent_kept) + " kept tokens are the stream's last: recent)");
    const char* why = score != score ? "expected a number" : policy.score_problem(score, at, std::int64_t(pos));
    if (why) blob_error("the score of " + token + " is " + str(score) + ", " + why);
    previous = at;
    detail::KvCacheStateAccess::append<Policy>(s, k.data(), v.data(), score, at);
  }
  detail::KvCacheStateAccess::set_position<Policy>(s, std::int64_t(pos));
  dst = std::move(s);
}

/// As load_state(attn, data, size, dst), from a byte vector.
template <class Policy>
void load_state(const KvCacheAttention<Policy>& attn, const std::vector<std::uint8_t>& blob,
                typename KvCacheAttention<Policy>::State& dst) {
  load_state(attn, blob.data(), blob.size(), dst);
}

}  // namespace select
ABC_NAMESPACE_END
