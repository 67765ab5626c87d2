// SPDX-License-Identifier: MIT
// abc tests: Catch2 v2 / v3 shim.
#pragma once
#if __has_include(<catch2/catch_test_macros.hpp>)
#  include <catch2/catch_template_test_macros.hpp>
#  include <catch2/catch_test_macros.hpp>
#  include <catch2/matchers/catch_matchers_string.hpp>
#  define ABC_CONTAINS(s) Catch::Matchers::ContainsSubstring(s)
#else
#  include <catch2/catch.hpp>
#  define ABC_CONTAINS(s) Catch::Contains(s)
#endif
