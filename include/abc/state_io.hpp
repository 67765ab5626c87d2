// SPDX-License-Identifier: MIT
// abc: bounded-memory attention. save_state / load_state: a State as a versioned binary blob.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "bounded_attention.hpp"
#include "detail/blob.hpp"
#include "detail/compose.hpp"
#include "detail/control_kind.hpp"
#include "detail/check.hpp"
#include "detail/state_access.hpp"
#include "state.hpp"

ABC_NAMESPACE_BEGIN
namespace detail {

// The control's tag as written in a blob: its explicit tag(), the same in every build.
template <class C>
std::string control_tag() {
  static_assert(has_tag<C>::value,
                "abc::save_state / abc::load_state: Control must provide `static std::string tag()`, the "
                "name its states carry in a blob (see abc/concepts.hpp)");
  return C::tag();
}

}  // namespace detail

/**
 * \brief Serialises `state` of `attn` to a versioned, little-endian binary blob.
 *
 * Layout (all integers little-endian): magic "ABCSTATE"; u32 version (2); u32 scalar size (4 or
 * 8); u32 length and bytes of the control's tag (`Control::tag()`, e.g. "abc::control::Mlp": the
 * same whichever compiler built the program); u64 n, d, dv, position; K̃ [n × d], Ṽ [n × dv] and
 * the per-slot state [2 × n] as IEEE bit patterns, row by row; n slot positions as two's-complement
 * i64; n bytes of written flags; u64 FNV-1a checksum of everything before it. Version 1 blobs (a
 * compiler-spelled control name, no slot positions) are refused.
 */
template <class Control>
std::vector<std::uint8_t> save_state(const BoundedAttention<Control>& attn,
                                     const State<typename Control::scalar_type>& state) {
  using T = typename Control::scalar_type;
  using Access = detail::StateAccess;
  (void)attn;
  detail::Writer w;
  detail::write_blob_header(w, sizeof(T), detail::control_tag<Control>());
  w.u64(std::uint64_t(state.num_slots()));
  w.u64(std::uint64_t(state.key_dim()));
  w.u64(std::uint64_t(state.value_dim()));
  w.u64(std::uint64_t(state.position()));
  // Row by row whatever the storage order (K̃ is column-major in memory).
  const auto put = [&w](const auto& m) {
    for (Index i = 0; i < m.rows(); ++i)
      for (Index j = 0; j < m.cols(); ++j) w.scalar(m(i, j));
  };
  put(state.keys());
  put(state.values());
  put(Access::slot_state(state));
  const PositionsRow& positions = Access::positions(state);
  for (Index l = 0; l < positions.size(); ++l) w.u64(static_cast<std::uint64_t>(positions(l)));
  const auto& written = Access::written(state);
  w.bytes.insert(w.bytes.end(), written.begin(), written.end());
  w.u64(detail::fnv1a(w.bytes.data(), w.bytes.size()));
  return std::move(w.bytes);
}

/**
 * \brief Restores a blob written by save_state into `dst`, for use with `attn`.
 *
 * Everything is checked before `dst` is touched: magic, version, scalar type, control tag, slot
 * count (the attention's), key and value widths (`dst`'s, unless `dst` is default-constructed),
 * the exact length, the checksum, and that the per-slot state is one the control can hold
 * (Control::slot_state_problem, or the default rule); any mismatch throws config_error naming it,
 * and `dst` is left as it was. Whatever save_state wrote, load_state reads back. The memory keeps
 * `dst`'s storage: a bfloat16 `dst` holds the blob's K̃ and Ṽ rounded to bfloat16 (exactly what a
 * bfloat16 state saved; a blob holds T whatever the storage it came from).
 */
template <class Control>
void load_state(const BoundedAttention<Control>& attn, const std::uint8_t* data, std::size_t size,
                State<typename Control::scalar_type>& dst) {
  using T = typename Control::scalar_type;
  using Access = detail::StateAccess;
  constexpr const char* who = "abc::load_state";
  const auto blob_error = [](const std::string& what) { detail::blob_error(who, what); };
  detail::Reader r = detail::read_blob_header(who, data, size, sizeof(T), detail::control_tag<Control>());
  const std::uint64_t n = r.u64(), d = r.u64(), dv = r.u64(), pos = r.u64();
  if (!r.ok) blob_error("truncated header");
  if (n != std::uint64_t(attn.num_slots()))
    blob_error("n is " + std::to_string(n) + ", expected " + std::to_string(attn.num_slots()) +
               " (the attention's num_slots())");
  if (dst.num_slots() > 0 && (d != std::uint64_t(dst.key_dim()) || dv != std::uint64_t(dst.value_dim())))
    blob_error("widths are d = " + std::to_string(d) + ", dv = " + std::to_string(dv) + ", expected d = " +
               std::to_string(dst.key_dim()) + ", dv = " + std::to_string(dst.value_dim()) + " (the destination's)");
  // Absurd shapes are refused before allocating, and positions no stream could continue from.
  if (d >= (std::uint64_t(1) << 40) || dv >= (std::uint64_t(1) << 40))
    blob_error("widths are d = " + std::to_string(d) + ", dv = " + std::to_string(dv) +
               ", expected each less than 2^40 (no state is that wide)");
  if (pos >= (std::uint64_t(1) << 62))
    blob_error("position is " + std::to_string(pos) + ", expected less than 2^62");
  const std::uint64_t payload = (n * d + n * dv + 2 * n) * sizeof(T) + n * 8 + n + 8;
  if (size - r.at != payload)
    blob_error("length is " + std::to_string(size) + " bytes, expected " + std::to_string(r.at + payload));
  State<T> s = Access::empty<T>(Index(n), Index(d), Index(dv), &detail::control_kind_v<Control>);
  const auto get = [&r](auto& m) {
    for (Index i = 0; i < m.rows(); ++i)
      for (Index j = 0; j < m.cols(); ++j) m(i, j) = r.scalar<T>();
  };
  get(Access::keys(s));
  get(Access::values(s));
  get(Access::slot_state(s));
  PositionsRow& positions = Access::positions(s);
  for (Index l = 0; l < positions.size(); ++l) positions(l) = static_cast<Index>(r.u64());
  auto& written = Access::written(s);
  for (auto& w : written) {
    w = data[r.at++];
    if (w > 1) blob_error("a written flag is " + std::to_string(int(w)) + ", expected 0 or 1");
  }
  if (!(Access::keys(s).allFinite() && Access::values(s).allFinite()))
    blob_error("the memory holds a non-finite value");
  if (const char* why = detail::slot_state_problem_of(attn.control(), Access::slot_state(s), positions, Index(pos)))
    blob_error(std::string("the per-slot state is invalid: ") + why);
  Access::position(s) = Index(pos);
  Access::scratch(s).resize(3, Index(n));
  Access::convert(s, dst.storage());  // a bfloat16 destination stays one
  dst = std::move(s);
}

/// As load_state(attn, data, size, dst), from a byte vector.
template <class Control>
void load_state(const BoundedAttention<Control>& attn, const std::vector<std::uint8_t>& blob,
                State<typename Control::scalar_type>& dst) {
  load_state(attn, blob.data(), blob.size(), dst);
}

ABC_NAMESPACE_END
