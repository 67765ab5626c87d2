// SPDX-License-Identifier: MIT
// abc examples and tools: a small .npy reader, shared by examples/pytorch_interop/compare.cpp and
// bench/compare.cpp (--npy). Not part of the library: abc itself reads no files.
//
// Format version 1.0 only: magic "\x93NUMPY", bytes 1 and 0, a little-endian uint16 header length,
// then a Python dict literal such as {'descr': '<f4', 'fortran_order': False, 'shape': (4, 37), }
// padded with spaces and a newline, then the data. Reads float32 ('<f4') and float64 ('<f8'),
// little-endian, C order; anything else is a std::runtime_error that names the file and says what
// it holds, so a caller can print e.what() as one line.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <vector>

#include <abc/types.hpp>

namespace npy {

struct Array {
  std::vector<abc::Index> shape;
  std::vector<double> data;  // float32 files are widened exactly

  abc::Index size() const noexcept { return static_cast<abc::Index>(data.size()); }
};

namespace detail {

[[noreturn]] inline void fail(const std::string& path, const std::string& what) {
  throw std::runtime_error(path + ": " + what);
}

// The position just after `'key':` and any spaces in the header dict.
inline std::size_t value_of(const std::string& path, const std::string& header, const std::string& key) {
  const std::string quoted = "'" + key + "'";
  std::size_t p = header.find(quoted);
  if (p == std::string::npos) fail(path, "the .npy header has no " + quoted + " entry: " + header);
  p = header.find(':', p + quoted.size());
  if (p == std::string::npos) fail(path, "malformed .npy header: " + header);
  ++p;
  while (p < header.size() && header[p] == ' ') ++p;
  return p;
}

}  // namespace detail

/// "[2, 3]" for a shape {2, 3}.
inline std::string shape_string(const std::vector<abc::Index>& s) {
  std::string out = "[";
  for (std::size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

/// The array in `path`. \throws std::runtime_error "<path>: <what is wrong>".
inline Array read(const std::string& path) {
  using detail::fail;
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(path, "cannot open");
  const std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto byte = [&](std::size_t i) { return static_cast<unsigned char>(bytes[i]); };

  static const char magic[] = "\x93NUMPY";
  if (bytes.size() < 10 || std::memcmp(bytes.data(), magic, 6) != 0) fail(path, "not a .npy file");
  if (byte(6) != 1 || byte(7) != 0)
    fail(path, "unsupported .npy format version " + std::to_string(byte(6)) + "." + std::to_string(byte(7)) +
                   " (only 1.0 is read; numpy writes 1.0 unless the header exceeds 64 KiB)");
  const std::size_t header_len = byte(8) | (std::size_t(byte(9)) << 8);
  if (bytes.size() < 10 + header_len) fail(path, "truncated .npy header");
  std::string header(bytes.data() + 10, header_len);
  header.erase(header.find_last_not_of(" \n") + 1);  // the padding, kept out of messages

  // 'descr': a quoted string such as '<f4'
  std::size_t p = detail::value_of(path, header, "descr");
  if (p >= header.size() || header[p] != '\'') fail(path, "malformed 'descr' in header: " + header);
  const std::size_t end = header.find('\'', p + 1);
  if (end == std::string::npos) fail(path, "malformed 'descr' in header: " + header);
  const std::string descr = header.substr(p + 1, end - p - 1);
  std::size_t item = 0;
  if (descr == "<f4")
    item = 4;
  else if (descr == "<f8")
    item = 8;
  else
    fail(path, "unsupported dtype '" + descr +
                   "': only little-endian float32 ('<f4') and float64 ('<f8') are read");

  // 'fortran_order': True / False
  p = detail::value_of(path, header, "fortran_order");
  if (header.compare(p, 5, "False") != 0)
    fail(path, "Fortran-order (column-major) arrays are not read; save a C-contiguous array "
               "(numpy.ascontiguousarray)");

  // 'shape': a tuple of integers, () for a scalar, (n,) for one dimension
  p = detail::value_of(path, header, "shape");
  if (p >= header.size() || header[p] != '(') fail(path, "malformed 'shape' in header: " + header);
  const std::size_t close = header.find(')', p);
  if (close == std::string::npos) fail(path, "malformed 'shape' in header: " + header);
  Array a;
  std::size_t count = 1;
  bool huge = false;
  for (std::size_t i = p + 1; i < close;) {
    if (header[i] == ' ' || header[i] == ',') {
      ++i;
      continue;
    }
    if (header[i] < '0' || header[i] > '9') fail(path, "malformed 'shape' in header: " + header);
    std::size_t dim = 0;
    for (; i < close && header[i] >= '0' && header[i] <= '9'; ++i) {
      if (dim > (std::size_t(1) << 40)) fail(path, "a dimension in 'shape' is too large: " + header);
      dim = dim * 10 + static_cast<std::size_t>(header[i] - '0');
    }
    a.shape.push_back(static_cast<abc::Index>(dim));
    // Stop the product before it wraps: no file holds 2^50 elements.
    if (dim != 0 && count > (std::size_t(1) << 50) / dim) huge = true;
    else count *= dim;
  }
  if (huge) fail(path, "its header describes more data than a file can hold: " + header);

  const std::size_t offset = 10 + header_len;
  if (bytes.size() - offset != count * item)
    fail(path, "holds " + std::to_string(bytes.size() - offset) + " data bytes, but its header (" + header +
                   ") says " + std::to_string(count * item));
  const std::uint16_t probe = 1;
  unsigned char first = 0;
  std::memcpy(&first, &probe, 1);
  if (first != 1) fail(path, "this reader assumes a little-endian host");

  a.data.resize(count);
  for (std::size_t i = 0; i < count; ++i) {
    const char* src = bytes.data() + offset + i * item;
    if (item == 4) {
      float f;
      std::memcpy(&f, src, 4);
      a.data[i] = f;
    } else {
      std::memcpy(&a.data[i], src, 8);
    }
  }
  return a;
}

}  // namespace npy
