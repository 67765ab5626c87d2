// SPDX-License-Identifier: MIT
// abc: bounded-memory attention. Error types thrown at the public boundary, and Status.
#pragma once

#include "config.hpp"

#include <stdexcept>
#include <string>

ABC_NAMESPACE_BEGIN

/// An argument has the wrong shape; the message names it, the expected and the actual shape.
class shape_error : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

/// A configuration or a value is not acceptable (n < 1, a capacity exceeded, a non-finite input).
class config_error : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

/// Result of the non-throwing `validate` calls.
enum class Status {
  ok,              ///< the call would succeed
  shape_mismatch,  ///< an argument has the wrong shape (forward would throw shape_error)
  bad_config,      ///< a configuration or capacity problem (config_error)
  non_finite,      ///< an input holds NaN or Inf (config_error)
  no_convergence,  ///< an iterative fit (k-means) stopped at its iteration cap; not an error
};

inline const char* to_string(Status s) noexcept {
  switch (s) {
    case Status::ok: return "ok";
    case Status::shape_mismatch: return "shape mismatch";
    case Status::bad_config: return "bad configuration";
    case Status::non_finite: return "non-finite input";
    case Status::no_convergence: return "no convergence";
  }
  return "unknown status";
}

ABC_NAMESPACE_END
