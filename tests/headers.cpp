// SPDX-License-Identifier: MIT
// abc tests: the umbrella header compiles with everything else, and the public traits say what a
// control is. (Each header on its own is compiled by the abc_header_check target.)
#include <abc/abc.hpp>

#include "support/catch.hpp"

namespace headers_test {

TEST_CASE("the control traits recognise the built-in controls", "[concepts]") {
  STATIC_REQUIRE(abc::is_control_policy_v<abc::control::SlidingWindow<float>>);
  STATIC_REQUIRE(abc::is_control_policy_v<abc::control::Identity<double>>);
  STATIC_REQUIRE(abc::is_control_policy_v<abc::control::Mlp<float>>);
  STATIC_REQUIRE(abc::is_sparse_control_v<abc::control::SlidingWindow<float>>);
  STATIC_REQUIRE_FALSE(abc::is_sparse_control_v<abc::control::Mlp<float>>);
  STATIC_REQUIRE(abc::is_control_policy_v<abc::control::SlotGates<double>>);
  STATIC_REQUIRE_FALSE(abc::is_sparse_control_v<abc::control::SlotGates<float>>);
  STATIC_REQUIRE_FALSE(abc::is_control_policy_v<int>);
  // Class template argument deduction: float by default, the control's type for the attention.
  abc::BoundedAttention attn{abc::control::SlidingWindow{8}};
  STATIC_REQUIRE(std::is_same<decltype(attn)::scalar_type, float>::value);
  REQUIRE(attn.num_slots() == 8);
}

}  // namespace headers_test
