// SPDX-License-Identifier: MIT
// abc: bounded-memory attention. Constructor checks shared by the built-in controls.
#pragma once

#include "check.hpp"

ABC_NAMESPACE_BEGIN
namespace detail {

// Throws config_error "<who>: <arg> is <value>, expected at least <least> (<rule>)" when value < least.
inline void require_at_least(const char* who, const char* arg, Index value, Index least,
                             const char* rule) {
  if (value < least) raise(who, at_least(Status::bad_config, arg, value, least, rule));
}

// Throws config_error "<who>: <arg> is <value>, expected at most <most> (<rule>)" when value > most.
inline void require_at_most(const char* who, const char* arg, Index value, Index most, const char* rule) {
  if (value > most) raise(who, value_problem(Status::bad_config, arg, value, "at most ", most, rule));
}

}  // namespace detail
ABC_NAMESPACE_END
