// SPDX-License-Identifier: MIT
// abc: bounded-memory attention. select::save_state / select::load_state: a TRAMS pool as a
// versioned binary blob.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "../detail/blob.hpp"
#include "../detail/check.hpp"
#include "../detail/trams_state_access.hpp"
#include "../error.hpp"
#include "../types.hpp"
#include "key_score.hpp"
#include "trams_attention.hpp"

ABC_NAMESPACE_BEGIN
namespace select {

/// The tag a TRAMS pool carries in a blob (where a BoundedAttention state carries its control's).
inline constexpr const char* trams_state_tag = "abc::select::TramsAttention";

/// The widest key or value a pool blob may hold: a loaded pool allocates config().pool rows of
/// this width before any token is read, so the width is bounded by what a head can be, not by the
/// blob's length.
inline constexpr Index trams_blob_max_width = Index(1) << 16;

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
 * trams_blob_max_width), the score's kind and model_dim (the attention's), the token count (at most
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
  const std::uint64_t max_width = std::uint64_t(trams_blob_max_width);
  if (d < 1 || dv < 1 || d > max_width || dv > max_width)
    blob_error("widths are d = " + str(d) + ", dv = " + str(dv) + ", expected each in [1, " + str(max_width) +
               "] (a loaded pool holds config.pool rows of that width)");
  if (dst.capacity() > 0 && (d != std::uint64_t(dst.key_dim()) || dv != std::uint64_t(dst.value_dim())))
    blob_error("widths are d = " + str(d) + ", dv = " + str(dv) + ", expected d = " + str(dst.key_dim()) +
               ", dv = " + str(dst.value_dim()) + " (the destination's)");
  if (attn.score().key_dim() > 0 && d != std::uint64_t(attn.score().key_dim()))
    blob_error("d is " + str(d) + ", expected " + str(attn.score().key_dim()) + " (the rows of the score's W_Q)");
  if (kind != std::uint32_t(attn.score().kind()) || model_dim != std::uint64_t(attn.score().model_dim()))
    blob_error("the score is kind " + str(kind) + " with model_dim " + str(model_dim) + ", expected kind " +
               str(std::uint32_t(attn.score().kind())) + " with model_dim " + str(attn.score().model_dim()) +
               " (the attention's score: the pool's scores were computed by it)");
  if (tokens > pool)
    blob_error("size is " + str(tokens) + ", expected at most " + str(pool) + " (the pool)");
  if (pos >= (std::uint64_t(1) << 62) || pos < tokens)
    blob_error("position is " + str(pos) + ", expected in [" + str(tokens) +
               ", 2^62) (at least the tokens held: the pool keeps the stream's last tokens)");
  Index cells = 0;  // pool × (d + dv): what the pool allocates, refused by name if not an Index
  if (!detail::checked_mul(Index(pool), Index(d + dv), cells))
    blob_error("config.pool × (d + dv) overflows (" + str(pool) + " × " + str(d + dv) + ")");
  const std::uint64_t payload = tokens * (d + dv + 1) * sizeof(Scalar) + 8;  // tokens ≤ pool: no overflow
  if (size - r.at != payload)
    blob_error("length is " + str(size) + " bytes, expected " + str(r.at + payload));
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

}  // namespace select
ABC_NAMESPACE_END
