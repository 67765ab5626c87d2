// SPDX-License-Identifier: MIT
// abc fuzz: abc::Weights (abc/weights.hpp) on hostile files and hostile calls. The input is either a
// raw file or (more useful, since a random file fails the checksum) a real file of fuzz-chosen
// tensors and metadata, edited at fuzz-chosen bytes and maybe cut short, with its checksum maybe
// recomputed so that the parser behind it is reached. Invariants (trap on violation, besides any
// sanitizer report):
//  - from_bytes and load_weights only throw abc::config_error;
//  - a file that loads writes back byte for byte (to_bytes, save_weights), and loads equal;
//  - every tensor it holds reads back at its dtype and shape (values, matrix or vector by rank)
//    with product(shape) values, and is refused as the other dtype or another shape;
//  - every metadata entry reads back as its own kind and is refused as the two others;
//  - string metadata read as an ABC-MLP activation or normalisation name gives one or a library error;
//  - add and set_* with fuzz-chosen names, shapes and value counts either succeed or throw a
//    library error and leave the weights byte for byte as they were.
#include <abc/control/mlp.hpp>
#include <abc/weights.hpp>

#include "fuzz.hpp"

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <unistd.h>
#include <vector>

namespace {

using abc::Index;
using abc::Weights;
using abc_fuzz::Reader;

template <class T>
bool same_bits(T a, T b) {
  return std::memcmp(&a, &b, sizeof(T)) == 0;
}

// A short name from the input: empty, one of a few shared ones (so that names collide), or bytes.
std::string name(Reader& in) {
  const std::uint8_t kind = in.byte();
  if (kind < 16) return "";
  if (kind < 128) return std::string(1, char('a' + kind % 4));
  std::string s;
  for (int i = 0, n = in.byte() % 6; i < n; ++i) s += char(in.byte());
  return s;
}

// A shape of rank 0 to 9 (9 is refused), dimensions mostly small, sometimes negative or huge.
std::vector<Index> shape(Reader& in) {
  std::vector<Index> s(in.byte() % 10);
  for (Index& d : s) {
    const std::uint8_t b = in.byte();
    d = b < 240 ? Index(b % 4) : b < 248 ? -Index(b % 3 + 1) : Index(1) << (b % 8 + 38);
  }
  return s;
}

template <class T>
void add_tensor(Weights& w, Reader& in) {
  const std::string n = name(in);
  const std::vector<Index> s = shape(in);
  std::vector<T> values(in.byte() % 40);
  for (T& x : values) x = in.value<T>();
  const std::vector<std::uint8_t> before = w.to_bytes();
  if (abc_fuzz::throws([&] { w.add<T>(n, s, values); })) ABC_FUZZ_REQUIRE(w.to_bytes() == before);
}

// An Eigen matrix, or the same values as a vector, through add(name, MatrixBase): the tensor holds
// them row by row, bit for bit, with the matrix's shape or [size].
template <class T>
void add_eigen(Weights& w, Reader& in) {
  const std::string n = name(in);
  const Index rows = in.index(0, 3), cols = in.index(0, 3);
  const abc::Matrix<T> m = in.matrix<T>(rows, cols);  // row-major: data() is in C order
  const Eigen::Map<const abc::Vector<T>> flat(m.data(), m.size());
  const bool as_vector = in.byte() & 1;
  const std::vector<std::uint8_t> before = w.to_bytes();
  if (abc_fuzz::throws([&] { as_vector ? w.add(n, flat) : w.add(n, m); })) {
    ABC_FUZZ_REQUIRE(w.to_bytes() == before);
    return;
  }
  ABC_FUZZ_REQUIRE(w.shape(n) == (as_vector ? std::vector<Index>{m.size()} : std::vector<Index>{rows, cols}));
  const std::vector<T> values = w.values<T>(n);
  for (Index i = 0; i < m.size(); ++i) ABC_FUZZ_REQUIRE(same_bits(values[std::size_t(i)], m.data()[i]));
}

// Weights built by calls: tensors of either dtype and metadata of every kind, every call checked.
Weights built(Reader& in) {
  Weights w;
  for (int e = 0, n = in.byte() % 6; e < n; ++e) {
    const std::uint8_t what = in.byte() % 6;
    const std::vector<std::uint8_t> before = w.to_bytes();
    bool threw = false;
    switch (what) {
      case 0: add_tensor<float>(w, in); break;
      case 1: add_tensor<double>(w, in); break;
      case 2: threw = abc_fuzz::throws([&] { w.set_int(name(in), std::int64_t(in.u64())); }); break;
      case 3: threw = abc_fuzz::throws([&] { w.set_float(name(in), in.value<double>()); }); break;
      case 4: add_eigen<float>(w, in); break;
      default: threw = abc_fuzz::throws([&] { w.set_string(name(in), name(in)); });
    }
    if (threw) ABC_FUZZ_REQUIRE(w.to_bytes() == before);
  }
  return w;
}

void corrupt(std::vector<std::uint8_t>& file, Reader& in) {
  for (int e = 0, edits = in.byte() % 4; e < edits && !file.empty(); ++e) {
    const std::size_t at = (std::size_t(in.byte()) << 8 | in.byte()) % file.size();
    file[at] ^= in.byte();
  }
  if ((in.byte() & 1) && file.size() > 12) file.resize(file.size() - 1 - in.byte() % (file.size() - 12));
}

void reseal(std::vector<std::uint8_t>& file) {
  if (file.size() < 16) return;
  const std::uint32_t c = abc::detail::crc32(file.data(), file.size() - 4);
  for (int i = 0; i < 4; ++i) file[file.size() - 4 + std::size_t(i)] = std::uint8_t(c >> (8 * i));
}

// Tensor `n` reads back as stored, and is refused as anything else.
template <class T, class Other>
void check_tensor(const Weights& w, const std::string& n) {
  const std::vector<Index> s = w.shape(n);
  // Zero first: the other dimensions of an empty tensor may multiply past any integer type.
  Index count = 1;
  for (const Index d : s) count = d == 0 ? 0 : count;
  for (const Index d : s) count *= d;
  const std::vector<T> values = w.values<T>(n);
  ABC_FUZZ_REQUIRE(Index(values.size()) == count);
  ABC_FUZZ_REQUIRE(abc_fuzz::throws([&] { (void)w.values<Other>(n); }));
  if (s.size() == 2) {
    const abc::Matrix<T> m = w.matrix<T>(n, s[0], s[1]);
    for (Index i = 0; i < m.size(); ++i) ABC_FUZZ_REQUIRE(same_bits(m.data()[i], values[std::size_t(i)]));
    ABC_FUZZ_REQUIRE(abc_fuzz::throws([&] { (void)w.matrix<T>(n, s[0] + 1, s[1]); }));
    ABC_FUZZ_REQUIRE(abc_fuzz::throws([&] { (void)w.vector<T>(n); }));
  } else if (s.size() == 1) {
    const abc::Vector<T> v = w.vector<T>(n, s[0]);
    for (Index i = 0; i < v.size(); ++i) ABC_FUZZ_REQUIRE(same_bits(v(i), values[std::size_t(i)]));
    ABC_FUZZ_REQUIRE(abc_fuzz::throws([&] { (void)w.vector<T>(n, s[0] + 1); }));
    ABC_FUZZ_REQUIRE(abc_fuzz::throws([&] { (void)w.matrix<T>(n); }));
  } else {
    ABC_FUZZ_REQUIRE(abc_fuzz::throws([&] { (void)w.matrix<T>(n); }));
  }
}

void check_loaded(const Weights& w, const std::vector<std::uint8_t>& file) {
  ABC_FUZZ_REQUIRE(w.to_bytes() == file);
  for (const std::string& n : w.names()) {
    ABC_FUZZ_REQUIRE(w.has(n));
    if (w.dtype(n) == Weights::DType::float32)
      check_tensor<float, double>(w, n);
    else
      check_tensor<double, float>(w, n);
  }
  using Kind = Weights::MetaKind;
  for (const std::string& k : w.meta_keys()) {
    ABC_FUZZ_REQUIRE(w.has_meta(k));
    const Kind kind = w.meta_kind(k);
    ABC_FUZZ_REQUIRE(abc_fuzz::throws([&] { (void)w.get_int(k); }) == (kind != Kind::int64));
    ABC_FUZZ_REQUIRE(abc_fuzz::throws([&] { (void)w.get_float(k); }) == (kind != Kind::float64));
    ABC_FUZZ_REQUIRE(abc_fuzz::throws([&] { (void)w.get_string(k); }) == (kind != Kind::string));
    if (kind == Kind::string) {  // a configuration read from a file: a name, or a library error
      (void)abc_fuzz::throws([&] { (void)abc::control::activation_from_name(w.get_string(k)); });
      (void)abc_fuzz::throws([&] { (void)abc::control::normalization_from_name(w.get_string(k)); });
    }
  }
  ABC_FUZZ_REQUIRE(abc_fuzz::throws([&] { (void)w.values<float>(std::string("\xff-absent")); }));
}

// Through a file, now and then (it costs a write and a read).
void check_file(const Weights& w) {
  static const std::string path = "fuzz_weights_" + std::to_string(::getpid()) + ".abcw";
  abc::save_weights(w, path);
  const Weights back = abc::load_weights(path);
  std::remove(path.c_str());
  ABC_FUZZ_REQUIRE(back == w);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  Reader in(data, size);
  const std::uint8_t mode = in.byte();
  std::vector<std::uint8_t> file;
  if (mode & 1) {
    file.assign(in.rest(), in.rest() + in.rest_size());
  } else {
    Weights w = built(in);
    file = w.to_bytes();
    ABC_FUZZ_REQUIRE(!(Weights::from_bytes(file) != w));
    if (mode & 8) check_file(w);
    corrupt(file, in);
  }
  if (mode & 2) reseal(file);
  Weights loaded;
  const std::vector<std::uint8_t> empty = loaded.to_bytes();
  if (abc_fuzz::throws([&] { loaded = Weights::from_bytes(file); })) {
    ABC_FUZZ_REQUIRE(loaded.to_bytes() == empty);
    return 0;
  }
  check_loaded(loaded, file);
  if (mode & 4) add_tensor<float>(loaded, in);  // calls on a loaded object: changed only by success
  return 0;
}
