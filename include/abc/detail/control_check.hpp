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

}  // namespace detail
ABC_NAMESPACE_END
