// SPDX-License-Identifier: MIT
// abc tests: editing state blobs. A test that edits a field recomputes the checksum, so that only
// the edit is wrong and the loader's check of that field is reached.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include <abc/detail/blob.hpp>

namespace blob {

// Recomputes the trailing FNV-1a checksum after an edit.
inline void reseal(std::vector<std::uint8_t>& b) {
  const std::uint64_t h = abc::detail::fnv1a(b.data(), b.size() - 8);
  for (int i = 0; i < 8; ++i) b[b.size() - 8 + std::size_t(i)] = std::uint8_t(h >> (8 * i));
}

// Writes x little-endian at byte `at`, which must leave room for it. Through at(): g++ -O3 folds
// the eight stores of a constant into a memset whose bound it cannot see, and warns
// (-Wstringop-overflow) about the copy of a blob it was given.
inline void put_u64(std::vector<std::uint8_t>& b, std::size_t at, std::uint64_t x) {
  for (int i = 0; i < 8; ++i) b.at(at + std::size_t(i)) = std::uint8_t(x >> (8 * i));
}

}  // namespace blob
