// SPDX-License-Identifier: MIT
// abc: bounded-memory attention. Argument checks shared by validate() and the throwing calls.
#pragma once

#include <cmath>
#include <limits>
#include <string>

#include "../config.hpp"
#include "../error.hpp"
#include "../types.hpp"

namespace abc {
namespace detail {

// A failed check, kept allocation-free so validate() can be noexcept; the message is built only
// when a throwing call reports it. `rule` is a string literal saying why the shape is expected.
struct Problem {
  Status status = Status::ok;
  const char* arg = "";
  const char* rule = "";
  Index rows = 0, cols = 0;                  // actual shape (or value in `rows` for scalars)
  Index expected_rows = 0, expected_cols = 0;
  const char* relation = "";                 // for values: "at least ", "at most ", or "" (equal)
  bool value = false;                        // a value against a bound, not a shape
  // For an argument that belongs to the wrong kind of thing (a State of another control): the
  // names of what it is and of what was expected, computed only when the message is built.
  std::string (*actual_name)() = nullptr;
  std::string (*expected_name)() = nullptr;
  explicit operator bool() const noexcept { return status != Status::ok; }
};

inline std::string shape_string(Index r, Index c) {
  return "[" + std::to_string(r) + " x " + std::to_string(c) + "]";
}

inline std::string message(const char* where, const Problem& p) {
  std::string m = std::string(where) + ": ";
  if (p.expected_name) {  // an argument of the wrong kind
    m += std::string(p.arg) + " comes from " + (p.actual_name ? p.actual_name() : std::string("nothing")) +
         ", expected " + p.expected_name();
  } else if (p.value) {  // a value against its bound
    m += std::string(p.arg) + " is " + std::to_string(p.rows) + ", expected " + p.relation +
         std::to_string(p.expected_rows);
  } else if (p.status == Status::non_finite) {
    m += std::string(p.arg) + " holds a non-finite value at row " + std::to_string(p.rows) +
         ", column " + std::to_string(p.cols) + ", expected finite values";
  } else {
    m += std::string(p.arg) + " is " + shape_string(p.rows, p.cols) + ", expected " +
         shape_string(p.expected_rows, p.expected_cols);
  }
  if (*p.rule) m += std::string(" (") + p.rule + ")";
  return m;
}

[[noreturn]] inline void raise(const char* where, const Problem& p) {
  if (p.status == Status::shape_mismatch) ABC_THROW(shape_error(message(where, p)));
  ABC_THROW(config_error(message(where, p)));
}

inline Problem shape_problem(const char* arg, Index r, Index c, Index er, Index ec,
                             const char* rule) noexcept {
  Problem p;
  if (r != er || c != ec) p = Problem{Status::shape_mismatch, arg, rule, r, c, er, ec};
  return p;
}

// A value outside its bound: "<arg> is <value>, expected <relation><expected> (<rule>)".
inline Problem value_problem(Status s, const char* arg, Index value, const char* relation,
                             Index expected, const char* rule) noexcept {
  Problem p{s, arg, rule, value, 0, expected, 0, relation};
  p.value = true;
  return p;
}

// a + b and a · b, or false where the result would overflow Index (sizes from a caller are checked
// before they are formed: signed overflow is undefined behaviour).
inline bool checked_add(Index a, Index b, Index& out) noexcept {
  constexpr Index hi = std::numeric_limits<Index>::max(), lo = std::numeric_limits<Index>::min();
  if ((b > 0 && a > hi - b) || (b < 0 && a < lo - b)) return false;
  out = a + b;
  return true;
}
inline bool checked_mul(Index a, Index b, Index& out) noexcept {
  constexpr Index hi = std::numeric_limits<Index>::max(), lo = std::numeric_limits<Index>::min();
  if (a != 0 && b != 0) {
    const bool fits = a > 0 ? (b > 0 ? a <= hi / b : b >= lo / a) : (b > 0 ? a >= lo / b : a >= hi / b);
    if (!fits) return false;
  }
  out = a * b;
  return true;
}

// Throws config_error "<who>: <what> overflows (<a> <op> <b>)" unless the operation fit.
inline void require_fits(bool fits, const char* who, const char* what, Index a, const char* op, Index b) {
  if (!fits)
    ABC_THROW(config_error(std::string(who) + ": " + what + " overflows (" + std::to_string(a) + op +
                           std::to_string(b) + ")"));
}

// The sum or product of two sizes, which must fit in Index.
inline Index require_sum(const char* who, const char* what, Index a, Index b) {
  Index r = 0;
  require_fits(checked_add(a, b, r), who, what, a, " + ", b);
  return r;
}
inline Index require_product(const char* who, const char* what, Index a, Index b) {
  Index r = 0;
  require_fits(checked_mul(a, b, r), who, what, a, " × ", b);
  return r;
}

inline Problem at_least(Status s, const char* arg, Index value, Index least, const char* rule) noexcept {
  return value_problem(s, arg, value, "at least ", least, rule);
}

// A real-valued setting outside its range: "<where>: <arg> is <value>, expected <expected>".
inline void require_real(bool ok, const char* where, const char* arg, double value, const char* expected) {
  if (ok) return;
  const std::string m = std::string(where) + ": " + arg + " is " + std::to_string(value) + ", expected " + expected;
  ABC_THROW(config_error(m));
}

// A scale that must be finite and positive (0 allowed: it means 1/sqrt(d)).
inline void require_scale(const char* where, const char* arg, double value) {
  require_real(std::isfinite(value) && value >= 0, where, arg, value,
               "a finite value > 0, or 0 for 1/sqrt(d)");
}

template <class Derived>
Problem finite_problem(const char* arg, const Eigen::MatrixBase<Derived>& m) noexcept {
  // x·0 is 0 for finite x and NaN for ±inf and NaN, so one vectorised sum per row decides; it is
  // several times cheaper than allFinite() on strided views. The scan only locates the offender.
  using T = typename Derived::Scalar;
  T acc = T(0);
  for (Index i = 0; i < m.rows(); ++i) acc += (m.row(i).array() * T(0)).sum();
  if (acc == T(0)) return {};
  for (Index i = 0; i < m.rows(); ++i)
    for (Index j = 0; j < m.cols(); ++j)
      if (!std::isfinite(m(i, j))) return Problem{Status::non_finite, arg, "", i, j, 0, 0};
  return {};
}

}  // namespace detail
}  // namespace abc
