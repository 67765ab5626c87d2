// SPDX-License-Identifier: MIT
// abc tests: the blocked online-softmax baseline against the float64 reference.
#include <abc/softmax_attention.hpp>

#include "support/approx.hpp"
#include "support/catch.hpp"
#include "support/reference.hpp"

namespace softmax_attention_test {

using abc::Index;

TEMPLATE_TEST_CASE("SoftmaxAttention matches the reference across block boundaries", "[softmax_attention]",
                   float, double) {
  using T = TestType;
  // 1, 7: inside one block; 63/65: around the query block; 257, 300: past the key block.
  for (Index n : {Index(1), Index(7), Index(63), Index(65), Index(100), Index(257), Index(300)}) {
    const Index d = 10, dv = 6;
    auto q = ref::random<T>(n, d, 91), k = ref::random<T>(n, d, 92), v = ref::random<T>(n, dv, 93);
    auto qc = ref::random<T>(n / 2 + 1, d, 94);
    abc::SoftmaxAttention<T> attn;
    INFO("N = " << n);
    const double scale = 1 / std::sqrt(10.0);
    ref::require_close(attn.forward_causal(q, k, v), ref::attention(ref::from(q), ref::from(k), ref::from(v), scale, true));
    ref::require_close(attn.forward(qc, k, v), ref::attention(ref::from(qc), ref::from(k), ref::from(v), scale, false));
  }
}

TEMPLATE_TEST_CASE("SoftmaxAttention is stable for large logits and reads zero without keys", "[softmax_attention]",
                   float, double) {
  using T = TestType;
  const Index n = 130, d = 4, dv = 3;
  // Logits up to ±100 (float) or ±3600 (double): exp overflows the type without the max shift.
  const double mag = std::is_same<T, float>::value ? 5.0 : 30.0;
  auto q = ref::random<T>(n, d, 95, mag), k = ref::random<T>(n, d, 96, mag), v = ref::random<T>(n, dv, 97);
  abc::SoftmaxAttention<T> attn(1.0);
  ref::require_close(attn.forward_causal(q, k, v), ref::attention(ref::from(q), ref::from(k), ref::from(v), 1.0, true));
  abc::Matrix<T> none_k(0, d), none_v(0, dv);
  REQUIRE(attn.forward(q, none_k, none_v).isZero(0));
}

}  // namespace softmax_attention_test
