// SPDX-License-Identifier: MIT
// abc: bounded-memory attention. Version macros, ABC_ASSERT, ABC_THROW, exception detection.
#pragma once

#include <cstdio>
#include <cstdlib>

// The project's one version: CMakeLists.txt reads these three lines (keep their form).
#define ABC_VERSION_MAJOR 0
#define ABC_VERSION_MINOR 1
#define ABC_VERSION_PATCH 0

// Exceptions are on unless the compiler says otherwise or the user forces them off, as {fmt} does.
#ifndef ABC_NO_EXCEPTIONS
#  if !(defined(__cpp_exceptions) || defined(__EXCEPTIONS) || defined(_CPPUNWIND))
#    define ABC_NO_EXCEPTIONS
#  endif
#endif

// ABC_THROW(ex): throws at the public boundary; with exceptions off it prints what() and aborts.
#ifndef ABC_THROW
#  ifdef ABC_NO_EXCEPTIONS
#    define ABC_THROW(ex)                                   \
       do {                                                 \
         std::fprintf(stderr, "abc: %s\n", (ex).what());    \
         std::abort();                                      \
       } while (false)
#  else
#    define ABC_THROW(ex) throw ex
#  endif
#endif

// ABC_ASSERT(cond, msg): internal invariants the public checks already guarantee. Debug only, and
// redefinable (tests define it to throw), so functions that use it are not noexcept.
#ifndef ABC_ASSERT
#  if defined(NDEBUG) || defined(ABC_NO_DEBUG)
#    define ABC_ASSERT(cond, msg) static_cast<void>(0)
#  else
#    define ABC_ASSERT(cond, msg)                                                          \
       do {                                                                                \
         if (!(cond)) {                                                                    \
           std::fprintf(stderr, "%s:%d: abc assertion failed: %s (%s)\n", __FILE__, __LINE__, \
                        #cond, msg);                                                       \
           std::abort();                                                                   \
         }                                                                                 \
       } while (false)
#  endif
#endif
