// SPDX-License-Identifier: MIT
// abc: bounded-memory attention. The byte level of state blobs and weights files: little-endian
// writer and reader, checksums, and the header every state blob starts with (abc/state_io.hpp,
// abc/select/state_io.hpp, abc/weights.hpp).
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "../config.hpp"
#include "../error.hpp"

ABC_NAMESPACE_BEGIN
namespace detail {

// Little-endian byte writer / bounds-checked reader. Integers and IEEE scalars go through their
// bit patterns, so the format does not depend on the host's byte order.
struct Writer {
  std::vector<std::uint8_t> bytes;
  void u64(std::uint64_t x) {
    for (int i = 0; i < 8; ++i) bytes.push_back(static_cast<std::uint8_t>(x >> (8 * i)));
  }
  void u32(std::uint32_t x) {
    for (int i = 0; i < 4; ++i) bytes.push_back(static_cast<std::uint8_t>(x >> (8 * i)));
  }
  // u32 length, then the bytes.
  void text(const std::string& s) {
    u32(std::uint32_t(s.size()));
    bytes.insert(bytes.end(), s.begin(), s.end());
  }
  template <class T>
  void scalar(T x) {
    if constexpr (sizeof(T) == 8) {
      std::uint64_t b;
      std::memcpy(&b, &x, 8);
      u64(b);
    } else {
      std::uint32_t b;
      std::memcpy(&b, &x, 4);
      u32(b);
    }
  }
};

struct Reader {
  const std::uint8_t* data;
  std::size_t size, at = 0;
  bool ok = true;
  bool need(std::size_t n) {
    if (size - at < n) ok = false;
    return ok;
  }
  std::uint64_t u64() {
    if (!need(8)) return 0;
    std::uint64_t x = 0;
    for (int i = 0; i < 8; ++i) x |= std::uint64_t(data[at + std::size_t(i)]) << (8 * i);
    at += 8;
    return x;
  }
  std::uint32_t u32() {
    if (!need(4)) return 0;
    std::uint32_t x = 0;
    for (int i = 0; i < 4; ++i) x |= std::uint32_t(data[at + std::size_t(i)]) << (8 * i);
    at += 4;
    return x;
  }
  // `n` bytes as a string (the caller has checked need(n)).
  std::string chars(std::size_t n) {
    std::string s(reinterpret_cast<const char*>(data + at), n);
    at += n;
    return s;
  }
  template <class T>
  T scalar() {
    T x{};
    if constexpr (sizeof(T) == 8) {
      const std::uint64_t b = u64();
      std::memcpy(&x, &b, 8);
    } else {
      const std::uint32_t b = u32();
      std::memcpy(&x, &b, 4);
    }
    return x;
  }
};

// FNV-1a, 64 bit: detects truncation and corruption (not an adversary: no cryptographic claim).
inline std::uint64_t fnv1a(const std::uint8_t* p, std::size_t n) noexcept {
  std::uint64_t h = 0xcbf29ce484222325ULL;
  for (std::size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 0x100000001b3ULL;
  return h;
}

// CRC-32 (IEEE 802.3, reflected, as zlib's crc32): the weights file's checksum, which Python
// computes in C (zlib.crc32) where FNV-1a would be a loop over every byte in the interpreter.
inline std::uint32_t crc32(const std::uint8_t* p, std::size_t n) noexcept {
  static const auto table = [] {
    struct Table {
      std::uint32_t v[256];
    } t{};
    for (std::uint32_t i = 0; i < 256; ++i) {
      std::uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xedb88320u ^ (c >> 1) : c >> 1;
      t.v[i] = c;
    }
    return t;
  }();
  std::uint32_t c = 0xffffffffu;
  for (std::size_t i = 0; i < n; ++i) c = table.v[(c ^ p[i]) & 0xffu] ^ (c >> 8);
  return c ^ 0xffffffffu;
}

inline constexpr char state_magic[8] = {'A', 'B', 'C', 'S', 'T', 'A', 'T', 'E'};
inline constexpr std::uint32_t state_version = 2;

// A blob error: config_error "<who>: <what>".
[[noreturn]] inline void blob_error(const char* who, const std::string& what) {
  ABC_THROW(config_error(std::string(who) + ": " + what));
}

// The header of every state blob: magic "ABCSTATE", u32 version, u32 scalar size, u32 length and
// bytes of the tag naming what the state belongs to.
inline void write_blob_header(Writer& w, std::size_t scalar_size, const std::string& tag) {
  w.bytes.insert(w.bytes.end(), state_magic, state_magic + 8);
  w.u32(state_version);
  w.u32(std::uint32_t(scalar_size));
  w.text(tag);
}

// Checks the magic, then the trailing checksum (so corruption is reported as such), the version,
// the scalar size and the tag; returns a reader just past the tag, over everything but the checksum
// (its `size` still the whole blob's). Throws blob_error(who, …) naming the first mismatch.
inline Reader read_blob_header(const char* who, const std::uint8_t* data, std::size_t size,
                               std::size_t scalar_size, const std::string& tag) {
  if (size < 8 + 8 || std::memcmp(data, state_magic, 8) != 0)
    blob_error(who, "not a state blob (magic \"ABCSTATE\" missing, " + std::to_string(size) + " bytes)");
  const std::uint64_t stored = [&] {
    Reader tail{data + size - 8, 8};
    return tail.u64();
  }();
  if (fnv1a(data, size - 8) != stored) blob_error(who, "checksum mismatch: the blob is truncated or corrupt");
  Reader r{data, size};
  r.at = 8;
  const std::uint32_t version = r.u32();
  if (version != state_version)
    blob_error(who, "version is " + std::to_string(version) + ", expected " + std::to_string(state_version));
  const std::uint32_t scalar = r.u32();
  if (scalar != scalar_size)
    blob_error(who, "scalar size is " + std::to_string(scalar) + " bytes, expected " + std::to_string(scalar_size));
  const std::uint32_t tag_len = r.u32();
  if (!r.need(tag_len)) blob_error(who, "truncated control tag");
  const std::string got = r.chars(tag_len);
  if (got != tag) blob_error(who, "control kind is " + got + ", expected " + tag);
  return r;
}

}  // namespace detail
ABC_NAMESPACE_END
