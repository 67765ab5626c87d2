// SPDX-License-Identifier: MIT
// abc tests: weights files assembled field by field from docs/weights.md, independently of
// abc::Weights::to_bytes, so that a test can state the expected bytes and write files that
// to_bytes never would (a duplicate name, an unknown dtype, a rank of 9).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <abc/detail/blob.hpp>

namespace weights_file {

struct RawMeta {
  std::string key;
  std::uint32_t kind;                  // 1 integer, 2 float, 3 string
  std::vector<std::uint8_t> payload;   // the value's bytes as the file holds them
};

struct RawTensor {
  std::string name;
  std::uint32_t dtype;                 // 1 float32, 2 float64
  std::vector<std::uint64_t> dims;
  std::vector<std::uint8_t> data;
};

inline void put_u32(std::vector<std::uint8_t>& b, std::uint32_t x) {
  for (int i = 0; i < 4; ++i) b.push_back(std::uint8_t(x >> (8 * i)));
}
inline void put_u64(std::vector<std::uint8_t>& b, std::uint64_t x) {
  for (int i = 0; i < 8; ++i) b.push_back(std::uint8_t(x >> (8 * i)));
}
inline void put_text(std::vector<std::uint8_t>& b, const std::string& s) {
  put_u32(b, std::uint32_t(s.size()));
  b.insert(b.end(), s.begin(), s.end());
}

// Appends the CRC-32 of everything in `b`.
inline void seal(std::vector<std::uint8_t>& b) { put_u32(b, abc::detail::crc32(b.data(), b.size())); }

// Drops the last 4 bytes (a checksum) and seals again: after an edit, only the edit is wrong.
inline void reseal(std::vector<std::uint8_t>& b) {
  b.resize(b.size() - 4);
  seal(b);
}

inline std::vector<std::uint8_t> file(const std::vector<RawMeta>& meta, const std::vector<RawTensor>& tensors,
                                      std::uint32_t version = 1) {
  std::vector<std::uint8_t> b = {'A', 'B', 'C', 'W', 'G', 'H', 'T', 'S'};
  put_u32(b, version);
  put_u32(b, std::uint32_t(meta.size()));
  for (const RawMeta& m : meta) {
    put_text(b, m.key);
    put_u32(b, m.kind);
    b.insert(b.end(), m.payload.begin(), m.payload.end());
  }
  put_u32(b, std::uint32_t(tensors.size()));
  for (const RawTensor& t : tensors) {
    put_text(b, t.name);
    put_u32(b, t.dtype);
    put_u32(b, std::uint32_t(t.dims.size()));
    for (const std::uint64_t d : t.dims) put_u64(b, d);
    b.insert(b.end(), t.data.begin(), t.data.end());
  }
  seal(b);
  return b;
}

}  // namespace weights_file
