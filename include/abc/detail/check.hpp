// SPDX-License-Identifier: MIT
// abc: bounded-memory attention. Argument checks shared by validate() and the throwing calls.
#pragma once

#include <cmath>
#include <limits>
#include <string>

#include "../config.hpp"
#include "../error.hpp"
#include "../kernel/finite.hpp"
#include "../types.hpp"

ABC_NAMESPACE_BEGIN
namespace detail {

// A failed check, kept allocation-free so validate() can be noexcept; the message is built only
// when a throwing call reports it. `rule` is a string literal giving the reason for the expected
// shape or value. Every Problem is made by one of the functions below, which set its Kind: the kind alone picks
// the message's form, so a count is never printed as a shape.
struct Problem {
  enum class Kind {
    shape,       // a matrix's shape: "<arg> is [r x c], expected [er x ec]"
    size,        // a vector's length: "<arg>.size() is <n>, expected <m>"
    value,       // a count or size against a bound: "<arg> is <v>, expected <relation><bound>"
    non_finite,  // "<arg> holds a non-finite value at row <i>, column <j>, expected finite values"
    wrong_kind,  // "<arg> comes from <actual>, expected <expected>"
    overflow,    // a size that would not fit Index: "<arg> overflows (<a><relation><b>)"
  };
  Status status = Status::ok;
  Kind kind = Kind::shape;
  const char* arg = "";
  const char* rule = "";
  Index rows = 0, cols = 0;                    // shape: the actual shape; size, value: the value in
                                               // rows; non_finite: the offending entry
  Index expected_rows = 0, expected_cols = 0;  // shape: the expected shape; size, value: the bound in rows
  const char* relation = "";                   // value: "at least ", "at most ", or "" (equal);
                                               // overflow: the operation, " + " or " × "
  // wrong_kind: the names of what the argument is and of what was expected, computed only when
  // the message is built.
  std::string (*actual_name)() = nullptr;
  std::string (*expected_name)() = nullptr;
  explicit operator bool() const noexcept { return status != Status::ok; }
};

inline std::string shape_string(Index r, Index c) {
  return "[" + std::to_string(r) + " x " + std::to_string(c) + "]";
}

inline std::string message(const char* where, const Problem& p) {
  std::string m = std::string(where) + ": " + p.arg;
  switch (p.kind) {
    case Problem::Kind::shape:
      m += " is " + shape_string(p.rows, p.cols) + ", expected " + shape_string(p.expected_rows, p.expected_cols);
      break;
    case Problem::Kind::size:
      m += ".size() is " + std::to_string(p.rows) + ", expected " + std::to_string(p.expected_rows);
      break;
    case Problem::Kind::value:
      m += " is " + std::to_string(p.rows) + ", expected " + p.relation + std::to_string(p.expected_rows);
      break;
    case Problem::Kind::non_finite:
      m += " holds a non-finite value at row " + std::to_string(p.rows) + ", column " + std::to_string(p.cols) +
           ", expected finite values";
      break;
    case Problem::Kind::wrong_kind:
      m += " comes from " + (p.actual_name ? p.actual_name() : std::string("nothing")) + ", expected " +
           (p.expected_name ? p.expected_name() : std::string("nothing"));
      break;
    case Problem::Kind::overflow:
      m += " overflows (" + std::to_string(p.rows) + p.relation + std::to_string(p.expected_rows) + ")";
      break;
  }
  if (*p.rule) m += std::string(" (") + p.rule + ")";
  return m;
}

[[noreturn]] inline void raise(const char* where, const Problem& p) {
  if (p.status == Status::shape_mismatch) ABC_THROW(shape_error(message(where, p)));
  ABC_THROW(config_error(message(where, p)));
}

// A matrix argument of shape [r x c] where [er x ec] is expected; empty when they agree.
inline Problem shape_problem(const char* arg, Index r, Index c, Index er, Index ec,
                             const char* rule) noexcept {
  Problem p;
  if (r == er && c == ec) return p;
  p.status = Status::shape_mismatch;
  p.kind = Problem::Kind::shape;
  p.arg = arg;
  p.rule = rule;
  p.rows = r;
  p.cols = c;
  p.expected_rows = er;
  p.expected_cols = ec;
  return p;
}

// A vector argument of n entries where `expected` are; empty when they agree. Reported by its
// size: a vector has no second dimension to print.
inline Problem size_problem(const char* arg, Index n, Index expected, const char* rule) noexcept {
  Problem p;
  if (n == expected) return p;
  p.status = Status::shape_mismatch;
  p.kind = Problem::Kind::size;
  p.arg = arg;
  p.rule = rule;
  p.rows = n;
  p.expected_rows = expected;
  return p;
}

// A value outside its bound: "<arg> is <value>, expected <relation><expected> (<rule>)". The
// caller has decided it fails: this only records it.
inline Problem value_problem(Status s, const char* arg, Index value, const char* relation,
                             Index expected, const char* rule) noexcept {
  Problem p;
  p.status = s;
  p.kind = Problem::Kind::value;
  p.arg = arg;
  p.rule = rule;
  p.rows = value;
  p.expected_rows = expected;
  p.relation = relation;
  return p;
}

// An argument that belongs to the wrong kind of thing (a State made by another control type).
// NOLINTNEXTLINE(bugprone-easily-swappable-parameters): internal: the two names of one kind pair
inline Problem wrong_kind_problem(Status s, const char* arg, std::string (*actual_name)(),
                                  std::string (*expected_name)(), const char* rule) noexcept {
  Problem p;
  p.status = s;
  p.kind = Problem::Kind::wrong_kind;
  p.arg = arg;
  p.rule = rule;
  p.actual_name = actual_name;
  p.expected_name = expected_name;
  return p;
}

// A size formed from a and b (`op` " + " or " × ") that would not fit Index.
inline Problem overflow_problem(const char* arg, Index a, const char* op, Index b) noexcept {
  Problem p;
  p.status = Status::bad_config;
  p.kind = Problem::Kind::overflow;
  p.arg = arg;
  p.rows = a;
  p.relation = op;
  p.expected_rows = b;
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
  if (!fits) raise(who, overflow_problem(what, a, op, b));
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
  constexpr bool contiguous_rows = (Derived::Flags & Eigen::DirectAccessBit) && (Derived::Flags & Eigen::RowMajorBit) &&
                                   Derived::InnerStrideAtCompileTime == 1;
  if constexpr (contiguous_rows) {
    // By the row kernels (Eigen's reduction of a short dynamic row costs several times more): rows
    // that follow one another in memory as one pass, others reduced together.
    const Derived& d = m.derived();
    if (d.rows() == 1 || d.outerStride() == d.cols())
      acc = kernel::finite_residue(d.data(), d.rows() * d.cols());
    else
      acc = kernel::finite_residue_rows(d.data(), d.rows(), d.cols(), d.outerStride());
  } else {
    for (Index i = 0; i < m.rows(); ++i) acc += (m.row(i).array() * T(0)).sum();
  }
  if (acc == T(0)) return {};
  for (Index i = 0; i < m.rows(); ++i)
    for (Index j = 0; j < m.cols(); ++j)
      if (!std::isfinite(m(i, j))) {
        Problem p;
        p.status = Status::non_finite;
        p.kind = Problem::Kind::non_finite;
        p.arg = arg;
        p.rows = i;
        p.cols = j;
        return p;
      }
  return {};
}

}  // namespace detail
ABC_NAMESPACE_END
