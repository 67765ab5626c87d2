// SPDX-License-Identifier: MIT
// abc fuzz: what the harnesses share: the trap on a broken invariant, the fuzz-input reader, the
// check that only library errors are thrown, a NaN-aware magnitude, and a state compared bit for bit.
#pragma once

#include <abc/error.hpp>
#include <abc/state.hpp>
#include <abc/types.hpp>

#include <algorithm>
#include <cmath>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>

// A broken invariant traps, so libFuzzer reports it as a crash with the input that caused it.
#define ABC_FUZZ_REQUIRE(cond)     \
  do {                             \
    if (!(cond)) __builtin_trap(); \
  } while (0)

namespace abc_fuzz {

using abc::Index;

// Reads the fuzz input front to back; past its end every byte reads as 0.
class Reader {
 public:
  Reader(const std::uint8_t* data, std::size_t size) : p_(data), n_(size) {}
  std::uint8_t byte() { return n_ ? (--n_, *p_++) : std::uint8_t{0}; }
  // The bytes not read yet.
  const std::uint8_t* rest() const noexcept { return p_; }
  std::size_t rest_size() const noexcept { return n_; }
  Index index(Index lo, Index hi) { return lo + Index(byte()) % (hi - lo + 1); }  // [lo, hi]
  std::uint64_t u64() {
    std::uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v = (v << 8) | byte();
    return v;
  }
  // A value: mostly moderate (multiples of 1/64 in [−4, 4)), sometimes a hostile one.
  template <class T>
  T value() {
    const std::uint8_t kind = byte();
    if (kind < 200) return T(int(kind) - 100) / T(25) + T(byte()) / T(4096);
    switch (kind % 12) {
      case 0: return std::numeric_limits<T>::quiet_NaN();
      case 1: return std::numeric_limits<T>::infinity();
      case 2: return -std::numeric_limits<T>::infinity();
      case 3: return std::numeric_limits<T>::denorm_min();
      case 4: return -std::numeric_limits<T>::denorm_min() * T(byte());
      case 5: return T(1e30);  // float: 1e30 is finite (max 3.4e38)
      case 6: return T(-1e30);
      case 7: return T(0) * T(-1);
      case 8: return T(1e4) * T(int(byte()) - 128);
      case 9: return std::numeric_limits<T>::min();
      case 10: return T(1e15);
      default: return T(int(byte()) - 128) * T(1e-3);
    }
  }
  template <class T>
  abc::Matrix<T> matrix(Index r, Index c) {
    abc::Matrix<T> m(r, c);
    for (Index i = 0; i < m.size(); ++i) m.data()[i] = value<T>();
    return m;
  }

 private:
  const std::uint8_t* p_;
  std::size_t n_;
};

// Runs f; true when it threw a library error (abc::shape_error or abc::config_error), traps on any
// other exception.
template <class F>
bool throws(F&& f) {
  try {
    f();
  } catch (const abc::shape_error&) {
    return true;
  } catch (const abc::config_error&) {
    return true;
  } catch (...) {
    __builtin_trap();
  }
  return false;
}

// The largest |entry|, NaN-aware: a NaN or an infinity gives +inf.
template <class T>
double max_abs(const abc::Matrix<T>& m) {
  double r = 0;
  for (Index i = 0; i < m.size(); ++i) {
    const double a = std::abs(double(m.data()[i]));
    r = std::isnan(a) ? std::numeric_limits<double>::infinity() : std::max(r, a);
  }
  return r;
}

// "Unchanged" means bit for bit. operator== compares IEEE values, and a state may legitimately
// hold ±inf or NaN after finite inputs whose products overflow the type (1e30 · 1e30 in float).
template <class T>
bool same_bits(const abc::State<T>& a, const abc::State<T>& b) {
  auto eq = [](const auto& x, const auto& y) {  // one storage order on both sides
    return x.rows() == y.rows() && x.cols() == y.cols() &&
           (x.size() == 0 || std::memcmp(x.data(), y.data(), sizeof(T) * std::size_t(x.size())) == 0);
  };
  if (a.position() != b.position() || !eq(a.keys(), b.keys()) || !eq(a.values(), b.values()) ||
      !eq(a.slot_state(), b.slot_state()))
    return false;
  for (Index l = 0; l < a.num_slots(); ++l)
    if (a.written(l) != b.written(l) || a.slot_position(l) != b.slot_position(l)) return false;
  return true;
}

}  // namespace abc_fuzz
