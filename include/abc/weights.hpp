// SPDX-License-Identifier: MIT
// abc: bounded-memory attention. Weights: a layer's named tensors and its configuration, as a
// versioned little-endian binary file (docs/weights.md) that C++ reads and writes without Python.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "config.hpp"
#include "detail/blob.hpp"
#include "error.hpp"
#include "types.hpp"

ABC_NAMESPACE_BEGIN

/**
 * \brief Named tensors (float32 or float64, any rank up to 8, row-major) and named metadata
 * (integers, floats, strings): the weights and configuration of a layer, as one file.
 *
 * The file format (docs/weights.md): magic "ABCWGHTS", u32 version (1), the metadata entries, the
 * tensors, each with its name, dtype, shape and data, and a CRC-32 of everything before it; all
 * little-endian. Python writes the same bytes (`abc_weights.save_weights`, docs/python.md).
 *
 * Tensors keep the order they were added in, and a file that loads writes back byte for byte.
 * Lookups are strict: a tensor is returned only as the scalar type it is stored in and, where the
 * call gives one, the shape it has; anything else throws, naming the tensor, the expected and the
 * actual value. Every call that throws leaves the object as it was.
 */
class Weights {
 public:
  /// The scalar type of a tensor, as the file stores it.
  enum class DType : std::uint32_t {
    float32 = 1,  ///< IEEE binary32
    float64 = 2,  ///< IEEE binary64
  };

  /// The kind of a metadata value, as the file stores it.
  enum class MetaKind : std::uint32_t {
    int64 = 1,    ///< a signed 64-bit integer
    float64 = 2,  ///< an IEEE binary64
    string = 3,   ///< bytes (UTF-8 by convention)
  };

  static constexpr std::uint32_t format_version = 1;  ///< the version this header reads and writes
  static constexpr std::uint32_t max_rank = 8;        ///< the most dimensions a tensor may have

  // ---- tensors ---------------------------------------------------------------------------------

  /**
   * \brief Adds a matrix as a 2-D tensor [rows, cols] (row by row), or a vector (an Eigen type with
   * one column at compile time) as a 1-D tensor [size]. Scalar float or double.
   * \throws config_error when `name` is empty or already taken.
   */
  template <class Derived>
  void add(const std::string& name, const Eigen::MatrixBase<Derived>& m) {
    using T = typename Derived::Scalar;
    static_assert(is_scalar_v<T>, "abc::Weights::add: tensors are float or double");
    std::vector<T> values;
    values.reserve(std::size_t(m.size()));
    for (Index i = 0; i < m.rows(); ++i)
      for (Index j = 0; j < m.cols(); ++j) values.push_back(m(i, j));
    if constexpr (Derived::ColsAtCompileTime == 1)
      add(name, {m.rows()}, values);
    else
      add(name, {m.rows(), m.cols()}, values);
  }

  /**
   * \brief Adds a tensor of any rank up to max_rank: `values` in C order (the last index fastest).
   * \throws config_error when `name` is empty or taken, a dimension is negative or the rank exceeds
   *   max_rank; shape_error when `values.size()` is not the product of `shape`.
   */
  template <class T>
  void add(const std::string& name, const std::vector<Index>& shape, const std::vector<T>& values) {
    static_assert(is_scalar_v<T>, "abc::Weights::add: tensors are float or double");
    constexpr const char* who = "abc::Weights::add";
    check_new_name(who, name);
    if (shape.size() > max_rank)
      fail(who, "tensor '" + name + "' has rank " + std::to_string(shape.size()) + ", expected at most " +
                    std::to_string(max_rank));
    std::vector<std::uint64_t> dims;
    for (const Index d : shape) dims.push_back(d < 0 ? ~std::uint64_t(0) : std::uint64_t(d));
    std::uint64_t bytes = 0;
    if (!data_bytes(dims, sizeof(T), bytes))
      fail(who, "tensor '" + name + "' is " + shape_text(shape) + ", " + size_rule);
    const std::uint64_t count = bytes / sizeof(T);
    if (count != values.size())
      ABC_THROW(shape_error(std::string(who) + ": tensor '" + name + "' is " + shape_text(shape) + ", which holds " +
                            std::to_string(count) + " values, but " + std::to_string(values.size()) +
                            " were given (expected exactly the product of the shape)"));
    Tensor t{dtype_of<T>(), shape, {}};
    detail::Writer w;
    w.bytes.reserve(values.size() * sizeof(T));
    for (const T x : values) w.scalar(x);
    t.data = std::move(w.bytes);
    insert_tensor(name, std::move(t));
  }

  /// Whether a tensor `name` is held.
  bool has(const std::string& name) const { return index_.count(name) != 0; }

  /// The tensors' names, in the order they were added (or stored in the file).
  std::vector<std::string> names() const { return keys_of(tensors_); }

  /// The scalar type of tensor `name`. \throws config_error when there is none.
  DType dtype(const std::string& name) const { return find("abc::Weights::dtype", name).dtype; }

  /// The shape of tensor `name`. \throws config_error when there is none.
  std::vector<Index> shape(const std::string& name) const { return find("abc::Weights::shape", name).shape; }

  /**
   * \brief Tensor `name`, of any shape, as its values in C order.
   * \throws config_error when there is none, or it is not stored as T.
   */
  template <class T>
  std::vector<T> values(const std::string& name) const {
    const Tensor& t = typed<T>("abc::Weights::values", name);
    std::vector<T> out(t.data.size() / sizeof(T));
    decode(t, out.data());
    return out;
  }

  /**
   * \brief The 2-D tensor `name` as a [rows × cols] matrix of T (an `nn.Linear` weight is
   * [out, in]).
   * \throws config_error when there is none or it is not stored as T; shape_error when it is not 2-D.
   */
  template <class T>
  Matrix<T> matrix(const std::string& name) const {
    const Tensor& t = ranked<T>("abc::Weights::matrix", name, 2);
    Matrix<T> m(t.shape[0], t.shape[1]);
    decode(t, m.data());
    return m;
  }

  /// As matrix(name), and the shape must be [rows × cols]. \throws shape_error naming both shapes.
  template <class T>
  Matrix<T> matrix(const std::string& name, Index rows, Index cols) const {
    constexpr const char* who = "abc::Weights::matrix";
    const Tensor& t = typed<T>(who, name);
    expect_shape(who, name, t, {rows, cols});
    return matrix<T>(name);
  }

  /// The 1-D tensor `name` as a vector of T. \throws as matrix(name), for 1 dimension.
  template <class T>
  Vector<T> vector(const std::string& name) const {
    const Tensor& t = ranked<T>("abc::Weights::vector", name, 1);
    Vector<T> v(t.shape[0]);
    decode(t, v.data());
    return v;
  }

  /// As vector(name), and the length must be `size`. \throws shape_error naming both shapes.
  template <class T>
  Vector<T> vector(const std::string& name, Index size) const {
    constexpr const char* who = "abc::Weights::vector";
    expect_shape(who, name, typed<T>(who, name), {size});
    return vector<T>(name);
  }

  // ---- metadata --------------------------------------------------------------------------------

  /// Sets metadata `key` to an integer (replacing any value it had). \throws config_error for an empty key.
  void set_int(const std::string& key, std::int64_t value) { set("abc::Weights::set_int", key, Meta{MetaKind::int64, value, 0.0, {}}); }
  /// Sets metadata `key` to a float64. \throws config_error for an empty key.
  void set_float(const std::string& key, double value) { set("abc::Weights::set_float", key, Meta{MetaKind::float64, 0, value, {}}); }
  /// Sets metadata `key` to a string (bytes, UTF-8 by convention). \throws config_error for an empty key.
  void set_string(const std::string& key, std::string value) {
    set("abc::Weights::set_string", key, Meta{MetaKind::string, 0, 0.0, std::move(value)});
  }

  /// Whether metadata `key` is held.
  bool has_meta(const std::string& key) const { return meta_index_.count(key) != 0; }

  /// The metadata keys, in the order they were first set (or stored in the file).
  std::vector<std::string> meta_keys() const { return keys_of(meta_); }

  /// The kind of metadata `key`. \throws config_error when there is none.
  MetaKind meta_kind(const std::string& key) const { return entry("abc::Weights::meta_kind", key).kind; }

  /// Integer metadata `key`. \throws config_error when there is none, or it is not an integer.
  std::int64_t get_int(const std::string& key) const { return meta("abc::Weights::get_int", key, MetaKind::int64).i; }
  /// Float metadata `key`. \throws config_error when there is none, or it is not a float.
  double get_float(const std::string& key) const { return meta("abc::Weights::get_float", key, MetaKind::float64).f; }
  /// String metadata `key`. \throws config_error when there is none, or it is not a string.
  const std::string& get_string(const std::string& key) const {
    return meta("abc::Weights::get_string", key, MetaKind::string).s;
  }

  // ---- bytes and files -------------------------------------------------------------------------

  /// The file's bytes (docs/weights.md): what save_weights writes.
  std::vector<std::uint8_t> to_bytes() const {
    detail::Writer w;
    w.bytes.insert(w.bytes.end(), magic, magic + 8);
    w.u32(format_version);
    w.u32(std::uint32_t(meta_.size()));
    for (const auto& [key, m] : meta_) {
      w.text(key);
      w.u32(std::uint32_t(m.kind));
      if (m.kind == MetaKind::int64) w.u64(std::uint64_t(m.i));
      if (m.kind == MetaKind::float64) w.scalar(m.f);
      if (m.kind == MetaKind::string) w.text(m.s);
    }
    w.u32(std::uint32_t(tensors_.size()));
    for (const auto& [name, t] : tensors_) {
      w.text(name);
      w.u32(std::uint32_t(t.dtype));
      w.u32(std::uint32_t(t.shape.size()));
      for (const Index d : t.shape) w.u64(std::uint64_t(d));
      w.bytes.insert(w.bytes.end(), t.data.begin(), t.data.end());
    }
    w.u32(detail::crc32(w.bytes.data(), w.bytes.size()));
    return std::move(w.bytes);
  }

  /**
   * \brief Reads a weights file's bytes. Everything is checked (magic, version, checksum, every
   * length, dtype, rank and shape, unique names, nothing after the last tensor) before a Weights is
   * returned.
   * \throws config_error "abc::Weights::from_bytes: <what is wrong>", naming the entry, the
   *   expected and the actual value.
   */
  static Weights from_bytes(const std::uint8_t* data, std::size_t size) {
    return parse("abc::Weights::from_bytes", data, size);
  }
  /// As from_bytes(data, size), from a byte vector.
  static Weights from_bytes(const std::vector<std::uint8_t>& bytes) { return from_bytes(bytes.data(), bytes.size()); }

  /// Same tensors and metadata, in the same order, bit for bit (a NaN equals itself here).
  friend bool operator==(const Weights& a, const Weights& b) { return a.to_bytes() == b.to_bytes(); }
  /// Not operator==.
  friend bool operator!=(const Weights& a, const Weights& b) { return !(a == b); }

 private:
  struct Meta {
    MetaKind kind;
    std::int64_t i;
    double f;
    std::string s;
  };
  struct Tensor {
    DType dtype;
    std::vector<Index> shape;
    std::vector<std::uint8_t> data;  // little-endian, as in the file
  };

  static constexpr char magic[8] = {'A', 'B', 'C', 'W', 'G', 'H', 'T', 'S'};
  static constexpr std::uint64_t max_dim = std::uint64_t(1) << 40, max_bytes = std::uint64_t(1) << 62;
  static constexpr const char* size_rule = "expected dimensions from 0 to 2^40 and, zeros left out, at most 2^62 bytes";

  // The bytes of a tensor of shape `dims` and element size `item` into `bytes`; false when a
  // dimension exceeds max_dim, or the product of the nonzero ones times `item` exceeds max_bytes
  // (zeros are left out so that the rule does not depend on their place, and so that every shape
  // it allows fits numpy's sizes too). The bounds keep every product from wrapping.
  static bool data_bytes(const std::vector<std::uint64_t>& dims, std::uint64_t item, std::uint64_t& bytes) {
    bytes = item;
    bool empty = false;
    for (const std::uint64_t d : dims) {
      if (d > max_dim || (d != 0 && bytes > max_bytes / d)) return false;
      bytes = d == 0 ? bytes : bytes * d;
      empty = empty || d == 0;
    }
    bytes = empty ? 0 : bytes;
    return true;
  }

  template <class T>
  static constexpr bool is_scalar_v = std::is_same_v<T, float> || std::is_same_v<T, double>;

  template <class T>
  static constexpr DType dtype_of() {
    return std::is_same_v<T, float> ? DType::float32 : DType::float64;
  }

  static const char* dtype_name(DType d) { return d == DType::float32 ? "float32" : "float64"; }

  static const char* kind_name(MetaKind k) {
    return k == MetaKind::int64 ? "an integer" : k == MetaKind::float64 ? "a float" : "a string";
  }

  // "[2 x 3]", "[5]", "[]" (a scalar).
  static std::string shape_text(const std::vector<Index>& shape) {
    std::string s = "[";
    for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? " x " : "") + std::to_string(shape[i]);
    return s + "]";
  }

  [[noreturn]] static void fail(const std::string& who, const std::string& what) {
    detail::blob_error(who.c_str(), what);
  }

  void check_new_name(const char* who, const std::string& name) const {
    if (name.empty()) fail(who, "a tensor name is empty, expected at least one character");
    if (has(name)) fail(who, "tensor '" + name + "' exists already, expected a new name");
  }

  void insert_tensor(const std::string& name, Tensor t) {
    index_.emplace(name, tensors_.size());
    tensors_.emplace_back(name, std::move(t));
  }

  void set(const char* who, const std::string& key, Meta m) {
    if (key.empty()) fail(who, "a metadata key is empty, expected at least one character");
    const auto it = meta_index_.find(key);
    if (it != meta_index_.end()) {
      meta_[it->second].second = std::move(m);
      return;
    }
    meta_index_.emplace(key, meta_.size());
    meta_.emplace_back(key, std::move(m));
  }

  // The names of (name, value) entries, in order.
  template <class Entries>
  static std::vector<std::string> keys_of(const Entries& entries) {
    std::vector<std::string> out;
    for (const auto& e : entries) out.push_back(e.first);
    return out;
  }

  // The names held, for a message about one that is not: "a, b, c" or "none".
  template <class Entries>
  static std::string listed(const Entries& entries) {
    std::string s;
    for (const std::string& k : keys_of(entries)) s += (s.empty() ? "" : ", ") + k;
    return s.empty() ? "none" : s;
  }

  const Tensor& find(const char* who, const std::string& name) const {
    const auto it = index_.find(name);
    if (it == index_.end()) fail(who, "no tensor '" + name + "' (the tensors are: " + listed(tensors_) + ")");
    return tensors_[it->second].second;
  }

  template <class T>
  const Tensor& typed(const char* who, const std::string& name) const {
    static_assert(is_scalar_v<T>, "abc::Weights: tensors are float or double");
    const Tensor& t = find(who, name);
    if (t.dtype != dtype_of<T>())
      fail(who, std::string("tensor '") + name + "' is " + dtype_name(t.dtype) + ", expected " +
                    dtype_name(dtype_of<T>()) + " (the scalar type asked for)");
    return t;
  }

  // Tensor `name` as T, of `rank` dimensions.
  template <class T>
  const Tensor& ranked(const char* who, const std::string& name, std::size_t rank) const {
    const Tensor& t = typed<T>(who, name);
    if (t.shape.size() != rank)
      ABC_THROW(shape_error(std::string(who) + ": tensor '" + name + "' is " + shape_text(t.shape) + ", expected " +
                            std::to_string(rank) + (rank == 1 ? " dimension" : " dimensions")));
    return t;
  }

  static void expect_shape(const char* who, const std::string& name, const Tensor& t, const std::vector<Index>& want) {
    if (t.shape != want)
      ABC_THROW(shape_error(std::string(who) + ": tensor '" + name + "' is " + shape_text(t.shape) + ", expected " +
                            shape_text(want)));
  }

  const Meta& entry(const char* who, const std::string& key) const {
    const auto it = meta_index_.find(key);
    if (it == meta_index_.end()) fail(who, "no metadata '" + key + "' (the keys are: " + listed(meta_) + ")");
    return meta_[it->second].second;
  }

  const Meta& meta(const char* who, const std::string& key, MetaKind kind) const {
    const Meta& m = entry(who, key);
    if (m.kind != kind)
      fail(who, std::string("metadata '") + key + "' is " + kind_name(m.kind) + ", expected " + kind_name(kind));
    return m;
  }

  template <class T>
  static void decode(const Tensor& t, T* out) {
    detail::Reader r{t.data.data(), t.data.size()};
    for (std::size_t i = 0; i < t.data.size() / sizeof(T); ++i) out[i] = r.scalar<T>();
  }

  static Weights parse(const std::string& who, const std::uint8_t* data, std::size_t size) {
    if (size < 8 + 4 + 4 || std::memcmp(data, magic, 8) != 0)
      fail(who, "not a weights file (magic \"ABCWGHTS\" missing, " + std::to_string(size) + " bytes)");
    detail::Reader r{data, size - 4};
    r.at = 8;
    // The version first: a later version may lay out the rest, checksum included, differently.
    const std::uint32_t version = r.u32();
    if (version != format_version)
      fail(who, "version is " + std::to_string(version) + ", expected " + std::to_string(format_version));
    const std::uint32_t stored = [&] {
      detail::Reader tail{data + size - 4, 4};
      return tail.u32();
    }();
    if (detail::crc32(data, size - 4) != stored) fail(who, "checksum mismatch: the file is truncated or corrupt");

    // Past the checksum only a file written wrongly (not one damaged later) can fail these checks.
    const auto need = [&](std::uint64_t n, const std::string& what) {
      if (r.size - r.at < n)
        fail(who, "truncated: " + what + " needs " + std::to_string(n) + " bytes at byte " + std::to_string(r.at) +
                      ", expected at most the " + std::to_string(r.size - r.at) + " before the checksum");
    };
    const auto text = [&](const std::string& what) {
      need(4, "the length of " + what);
      const std::uint32_t n = r.u32();
      need(n, what);
      return r.chars(n);
    };
    // Entry e's name ("metadata key 3", "tensor name 0"): not empty, and not `taken` already.
    const auto new_name = [&](const char* kind, const char* noun, std::uint32_t e, const auto& taken) {
      const std::string label = std::string(kind) + " " + noun + " " + std::to_string(e);
      std::string name = text(label);
      if (name.empty()) fail(who, label + " is empty, expected at least one character");
      if (taken(name)) fail(who, std::string(kind) + " '" + name + "' appears twice, expected unique " + noun + "s");
      return name;
    };

    Weights w;
    need(4, "the metadata count");
    const std::uint32_t meta_count = r.u32();
    for (std::uint32_t e = 0; e < meta_count; ++e) {
      const std::string key = new_name("metadata", "key", e, [&](const std::string& k) { return w.has_meta(k); });
      need(4, "the kind of metadata '" + key + "'");
      const std::uint32_t kind = r.u32();
      Meta m{MetaKind(kind), 0, 0.0, {}};
      if (kind == std::uint32_t(MetaKind::int64)) {
        need(8, "metadata '" + key + "'");
        m.i = std::int64_t(r.u64());
      } else if (kind == std::uint32_t(MetaKind::float64)) {
        need(8, "metadata '" + key + "'");
        m.f = r.scalar<double>();
      } else if (kind == std::uint32_t(MetaKind::string)) {
        m.s = text("metadata '" + key + "'");
      } else {
        fail(who, "metadata '" + key + "' has kind " + std::to_string(kind) +
                      ", expected 1 (integer), 2 (float) or 3 (string)");
      }
      w.set(who.c_str(), key, std::move(m));
    }

    need(4, "the tensor count");
    const std::uint32_t tensor_count = r.u32();
    for (std::uint32_t e = 0; e < tensor_count; ++e) {
      const std::string name = new_name("tensor", "name", e, [&](const std::string& n) { return w.has(n); });
      need(8, "the dtype and rank of tensor '" + name + "'");
      const std::uint32_t dtype = r.u32(), rank = r.u32();
      if (dtype != std::uint32_t(DType::float32) && dtype != std::uint32_t(DType::float64))
        fail(who, "tensor '" + name + "' has dtype " + std::to_string(dtype) +
                      ", expected 1 (float32) or 2 (float64)");
      if (rank > max_rank)
        fail(who, "tensor '" + name + "' has rank " + std::to_string(rank) + ", expected at most " +
                      std::to_string(max_rank));
      need(8 * std::uint64_t(rank), "the shape of tensor '" + name + "'");
      Tensor t{DType(dtype), {}, {}};
      std::vector<std::uint64_t> dims(rank);
      for (auto& d : dims) d = r.u64();
      std::uint64_t bytes = 0;
      if (!data_bytes(dims, dtype == std::uint32_t(DType::float32) ? 4 : 8, bytes)) {
        std::string s;
        for (const std::uint64_t d : dims) s += (s.empty() ? "" : " x ") + std::to_string(d);
        fail(who, "tensor '" + name + "' is [" + s + "], " + size_rule);
      }
      for (const std::uint64_t d : dims) t.shape.push_back(Index(d));
      need(bytes, "the data of tensor '" + name + "' (" + shape_text(t.shape) + " " + dtype_name(t.dtype) + ")");
      t.data.assign(data + r.at, data + r.at + bytes);
      r.at += std::size_t(bytes);
      w.insert_tensor(name, std::move(t));
    }
    if (r.at != r.size)
      fail(who, "length is " + std::to_string(size) + " bytes, expected " + std::to_string(r.at + 4) +
                    " (the checksum follows the last tensor)");
    return w;
  }

  friend Weights load_weights(const std::string& path);

  std::vector<std::pair<std::string, Tensor>> tensors_;
  std::map<std::string, std::size_t> index_;
  std::vector<std::pair<std::string, Meta>> meta_;
  std::map<std::string, std::size_t> meta_index_;
};

/**
 * \brief Reads the weights file at `path` (as Weights::from_bytes).
 * \throws config_error "abc::load_weights: <path>: <what is wrong>", or "cannot read" when the file
 *   cannot be opened or read.
 */
inline Weights load_weights(const std::string& path) {
  const std::string who = "abc::load_weights: " + path;
  // C stdio, not a std::ifstream: a read that fails (a directory opens, then its reads fail) is an
  // error flag here, where libstdc++'s filebuf throws std::ios_base::failure with its own message.
  const std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!f) Weights::fail(who, "cannot read the file");
  std::vector<std::uint8_t> bytes;
  for (std::size_t got = 1; got > 0;) {
    const std::size_t at = bytes.size(), chunk = 1 << 16;
    bytes.resize(at + chunk);
    got = std::fread(bytes.data() + at, 1, chunk, f.get());
    bytes.resize(at + got);
  }
  if (std::ferror(f.get())) Weights::fail(who, "cannot read the file");
  return Weights::parse(who, bytes.data(), bytes.size());
}

/// Writes `w` to the file at `path` (Weights::to_bytes). \throws config_error "abc::save_weights:
/// <path>: cannot write the file" when it cannot be written.
inline void save_weights(const Weights& w, const std::string& path) {
  const std::vector<std::uint8_t> bytes = w.to_bytes();
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  f.close();
  if (!f) detail::blob_error(("abc::save_weights: " + path).c_str(), "cannot write the file");
}

ABC_NAMESPACE_END
