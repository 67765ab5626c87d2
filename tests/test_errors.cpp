// SPDX-License-Identifier: MIT
// abc tests: every error path of docs/design.md §5 that the core has: the exception type, a message that
// names the argument with the expected and actual value, validate() agreeing without throwing, and
// a state left unchanged by a failed call.
#include <abc/abc.hpp>

#include <limits>

#include "support/catch.hpp"
#include "support/reference.hpp"

namespace errors_test {

namespace {

using abc::Index;

template <class T>
struct Data {
  abc::Matrix<T> q = ref::random<T>(10, 8, 1), k = ref::random<T>(10, 8, 2), v = ref::random<T>(10, 3, 3);
};

}  // namespace

TEMPLATE_TEST_CASE("shape errors name the argument, the expected and the actual shape", "[errors][shape]",
                   float, double) {
  using T = TestType;
  Data<T> x;
  abc::BoundedAttention attn{abc::control::SlidingWindow<T>{4}};
  abc::Matrix<T> k_bad = ref::random<T>(10, 7, 4), v_bad = ref::random<T>(9, 3, 5), q_bad = ref::random<T>(11, 8, 6);

  REQUIRE_THROWS_AS(attn.forward(x.q, k_bad, x.v), abc::shape_error);
  REQUIRE_THROWS_WITH(attn.forward(x.q, k_bad, x.v),
                      ABC_CONTAINS("abc::BoundedAttention::forward: k is [10 x 7], expected [10 x 8]"));
  REQUIRE(attn.validate(x.q, k_bad, x.v) == abc::Status::shape_mismatch);

  REQUIRE_THROWS_AS(attn.forward(x.q, x.k, v_bad), abc::shape_error);
  REQUIRE_THROWS_WITH(attn.forward(x.q, x.k, v_bad), ABC_CONTAINS("v is [9 x 3], expected [10 x 3]"));

  REQUIRE_THROWS_AS(attn.forward_causal(q_bad, x.k, x.v), abc::shape_error);
  REQUIRE_THROWS_WITH(attn.forward_causal(q_bad, x.k, x.v),
                      ABC_CONTAINS("forward_causal: q is [11 x 8], expected [10 x 8]"));
  REQUIRE(attn.validate(q_bad, x.k, x.v) == abc::Status::ok);  // fine non-causally (cross attention)

  abc::Matrix<T> empty(10, 0);
  REQUIRE_THROWS_AS(attn.forward(empty, abc::Matrix<T>(10, 0), x.v), abc::shape_error);
  REQUIRE_THROWS_WITH(attn.forward(empty, abc::Matrix<T>(10, 0), x.v), ABC_CONTAINS("q.cols() is 0"));

  abc::Matrix<T> out(10, 4);
  REQUIRE_THROWS_AS(attn.forward_into(x.q, x.k, x.v, out), abc::shape_error);
  REQUIRE_THROWS_WITH(attn.forward_into(x.q, x.k, x.v, out), ABC_CONTAINS("out is [10 x 4], expected [10 x 3]"));

  abc::SoftmaxAttention<T> sm;
  REQUIRE_THROWS_AS(sm.forward(x.q, k_bad, x.v), abc::shape_error);
  REQUIRE_THROWS_WITH(sm.forward(x.q, k_bad, x.v), ABC_CONTAINS("k is [10 x 7], expected [10 x 8]"));
  REQUIRE_THROWS_AS(sm.forward_causal(q_bad, x.k, x.v), abc::shape_error);
  REQUIRE_THROWS_WITH(sm.forward_causal(q_bad, x.k, x.v),
                      ABC_CONTAINS("abc::SoftmaxAttention::forward_causal: q is [11 x 8], expected [10 x 8] (causal "
                                   "attention reads one query per key)"));
}

TEMPLATE_TEST_CASE("a control input of the wrong shape is named", "[errors][shape][input]", float, double) {
  using T = TestType;
  Data<T> x;
  abc::BoundedAttention mlp{abc::control::Mlp<T>(abc::Slots{4}, 5, abc::Seed{1})};  // input width 5
  // Without X the keys are the input: their width must be the control's input_dim().
  REQUIRE_THROWS_AS(mlp.forward(x.q, x.k, x.v), abc::shape_error);
  REQUIRE_THROWS_WITH(mlp.forward(x.q, x.k, x.v), ABC_CONTAINS("k is [10 x 8], expected [10 x 5]"));
  abc::Matrix<T> xin = ref::random<T>(9, 5, 7);
  REQUIRE_THROWS_WITH(mlp.forward(x.q, x.k, x.v, xin), ABC_CONTAINS("x is [9 x 5], expected [10 x 5]"));
  REQUIRE(mlp.validate(x.q, x.k, x.v, xin) == abc::Status::shape_mismatch);
  abc::Matrix<T> good = ref::random<T>(10, 5, 8);
  REQUIRE(mlp.validate(x.q, x.k, x.v, good) == abc::Status::ok);
}

TEMPLATE_TEST_CASE("non-finite inputs are reported, never spread into the state", "[errors][finite]", float, double) {
  using T = TestType;
  Data<T> x;
  abc::BoundedAttention attn{abc::control::SlidingWindow<T>{4}};
  for (T bad : {std::numeric_limits<T>::quiet_NaN(), std::numeric_limits<T>::infinity(),
                -std::numeric_limits<T>::infinity()}) {
    abc::Matrix<T> k = x.k, v = x.v, q = x.q;
    k(3, 2) = bad;
    REQUIRE_THROWS_AS(attn.forward(q, k, v), abc::config_error);
    REQUIRE_THROWS_WITH(attn.forward(q, k, v), ABC_CONTAINS("k holds a non-finite value at row 3, column 2"));
    REQUIRE(attn.validate(q, k, v) == abc::Status::non_finite);
    v(9, 0) = bad;
    REQUIRE_THROWS_WITH(attn.forward_causal(x.q, x.k, v), ABC_CONTAINS("v holds a non-finite value at row 9"));
    q(0, 0) = bad;
    REQUIRE_THROWS_WITH(attn.forward(q, x.k, x.v), ABC_CONTAINS("q holds a non-finite value"));

    auto state = attn.make_state(8, 3);
    attn.forward_causal(state, x.q.topRows(5), x.k.topRows(5), x.v.topRows(5));
    const auto before = state;
    abc::Vector<T> kt = x.k.row(5).transpose();
    kt(1) = bad;
    REQUIRE_THROWS_AS(attn.step(state, x.q.row(5).transpose(), kt, x.v.row(5).transpose()), abc::config_error);
    REQUIRE_THROWS_WITH(attn.step(state, x.q.row(5).transpose(), kt, x.v.row(5).transpose()),
                        ABC_CONTAINS("step: k_t holds a non-finite value"));
    REQUIRE(state == before);
    REQUIRE(attn.validate_step(state, x.q.row(5).transpose(), kt, x.v.row(5).transpose()) == abc::Status::non_finite);

    // A step checks its rows in one pass, then names the one that failed: each of q_t, v_t and a
    // control input x_t, at its first and last entry.
    abc::BoundedAttention mlp{abc::control::Mlp<T>(abc::Slots{4}, 5, abc::Seed{1})};
    auto mlp_state = mlp.make_state(8, 3);
    const abc::Vector<T> q5 = x.q.row(5).transpose(), k5 = x.k.row(5).transpose(), v5 = x.v.row(5).transpose();
    const abc::Vector<T> x5 = ref::random<T>(5, 1, 9);
    for (const Index at : {Index(0), Index(-1)}) {
      abc::Vector<T> qb = q5, vb = v5, xb = x5;
      qb(at < 0 ? qb.size() - 1 : at) = bad;
      vb(at < 0 ? vb.size() - 1 : at) = bad;
      xb(at < 0 ? xb.size() - 1 : at) = bad;
      const auto before_mlp = mlp_state;
      REQUIRE_THROWS_WITH(mlp.step(mlp_state, qb, k5, v5, xb), ABC_CONTAINS("step: q_t holds a non-finite value"));
      REQUIRE_THROWS_WITH(mlp.step(mlp_state, q5, k5, vb, x5), ABC_CONTAINS("step: v_t holds a non-finite value"));
      REQUIRE_THROWS_WITH(mlp.step(mlp_state, q5, k5, v5, xb), ABC_CONTAINS("step: x_t holds a non-finite value"));
      REQUIRE(mlp_state == before_mlp);
      REQUIRE(mlp.validate_step(mlp_state, q5, k5, v5, xb) == abc::Status::non_finite);
    }
    REQUIRE(mlp.validate_step(mlp_state, q5, k5, v5, x5) == abc::Status::ok);
    mlp.step(mlp_state, q5, k5, v5, x5);
    REQUIRE(mlp_state.position() == 1);
  }
}

TEMPLATE_TEST_CASE("a failed call leaves the state unchanged", "[errors][state]", float, double) {
  using T = TestType;
  Data<T> x;
  abc::BoundedAttention attn{abc::control::SlidingWindow<T>{4}};
  auto state = attn.make_state(8, 3);
  attn.forward_causal(state, x.q.topRows(6), x.k.topRows(6), x.v.topRows(6));
  const auto before = state;
  abc::Vector<T> short_k = x.k.row(6).head(7).transpose();
  REQUIRE_THROWS_AS(attn.step(state, x.q.row(6).transpose(), short_k, x.v.row(6).transpose()), abc::shape_error);
  REQUIRE_THROWS_WITH(attn.step(state, x.q.row(6).transpose(), short_k, x.v.row(6).transpose()),
                      ABC_CONTAINS("abc::BoundedAttention::step: k_t.size() is 7, expected 8 (k_t.size() must equal q_t.size())"));
  REQUIRE(state == before);
  abc::Vector<T> wide_v(5);
  wide_v.setOnes();
  REQUIRE_THROWS_WITH(attn.step(state, x.q.row(6).transpose(), x.k.row(6).transpose(), wide_v),
                      ABC_CONTAINS("state.values() is [4 x 3], expected [4 x 5]"));
  REQUIRE(state == before);
  abc::Vector<T> out(2);
  REQUIRE_THROWS_WITH(attn.step_into(state, x.q.row(6).transpose(), x.k.row(6).transpose(), x.v.row(6).transpose(), out),
                      ABC_CONTAINS("abc::BoundedAttention::step: out.size() is 2, expected 3"));
  REQUIRE(state == before);
  // A state of another attention (other slot count) is refused by name.
  abc::BoundedAttention other{abc::control::SlidingWindow<T>{5}};
  REQUIRE_THROWS_WITH(other.forward_causal(state, x.q, x.k, x.v),
                      ABC_CONTAINS("state.keys() is [4 x 8], expected [5 x 8]"));
  REQUIRE(other.validate(state, x.q, x.k, x.v) == abc::Status::shape_mismatch);
  REQUIRE(state == before);
  // The successful call after all that gives what an untouched state gives.
  auto fresh = before;
  const abc::Vector<T> a = attn.step(state, x.q.row(6).transpose(), x.k.row(6).transpose(), x.v.row(6).transpose());
  const abc::Vector<T> b = attn.step(fresh, x.q.row(6).transpose(), x.k.row(6).transpose(), x.v.row(6).transpose());
  REQUIRE(a == b);
}

TEMPLATE_TEST_CASE("configuration errors", "[errors][config]", float, double) {
  using T = TestType;
  Data<T> x;
  REQUIRE_THROWS_AS(abc::control::SlidingWindow<T>{0}, abc::config_error);
  REQUIRE_THROWS_WITH(abc::control::SlidingWindow<T>{0},
                      ABC_CONTAINS("abc::control::SlidingWindow: n is 0, expected at least 1"));
  REQUIRE_THROWS_AS(abc::control::Identity<T>{-3}, abc::config_error);
  REQUIRE_THROWS_WITH(abc::control::Identity<T>{-3},
                      ABC_CONTAINS("abc::control::Identity: n is -3, expected at least 1 (at least one slot)"));
  abc::Options bad;
  bad.scale = -1;
  REQUIRE_THROWS_AS((abc::BoundedAttention{abc::control::SlidingWindow<T>{2}, bad}), abc::config_error);
  REQUIRE_THROWS_WITH((abc::BoundedAttention{abc::control::SlidingWindow<T>{2}, bad}), ABC_CONTAINS("options.scale"));
  bad.scale = std::numeric_limits<double>::quiet_NaN();
  REQUIRE_THROWS_AS((abc::BoundedAttention{abc::control::SlidingWindow<T>{2}, bad}), abc::config_error);
  // NaN's spelling is the C library's: the message is checked around it.
  REQUIRE_THROWS_WITH((abc::BoundedAttention{abc::control::SlidingWindow<T>{2}, bad}),
                      ABC_CONTAINS("abc::BoundedAttention: options.scale is ") &&
                          ABC_CONTAINS(", expected a finite value > 0, or 0 for 1/sqrt(d)"));
  abc::Options chunk;
  chunk.chunk = 0;
  REQUIRE_THROWS_WITH((abc::BoundedAttention{abc::control::SlidingWindow<T>{2}, chunk}), ABC_CONTAINS("options.chunk is 0, expected at least 1"));
  REQUIRE_THROWS_AS(abc::SoftmaxAttention<T>{-2.0}, abc::config_error);
  REQUIRE_THROWS_WITH(abc::SoftmaxAttention<T>{-2.0},
                      ABC_CONTAINS("abc::SoftmaxAttention: scale is -2.000000, expected a finite value > 0, or 0 for "
                                   "1/sqrt(d)"));
  abc::BoundedAttention attn{abc::control::SlidingWindow<T>{2}};
  REQUIRE_THROWS_AS(attn.make_state(0, 3), abc::config_error);
  REQUIRE_THROWS_WITH(attn.make_state(0, 3),
                      ABC_CONTAINS("abc::BoundedAttention::make_state: d is 0, expected at least 1 (keys need a column)"));

  // Capacity: Identity holds n tokens; going past it, in one call or across calls, is refused.
  abc::BoundedAttention id{abc::control::Identity<T>{8}};
  REQUIRE_THROWS_AS(id.forward(x.q, x.k, x.v), abc::config_error);
  REQUIRE_THROWS_WITH(id.forward(x.q, x.k, x.v),
                      ABC_CONTAINS("the token count (state position + new tokens) is 10, expected at most 8"));
  REQUIRE(id.validate(x.q, x.k, x.v) == abc::Status::bad_config);
  auto state = id.make_state(8, 3);
  id.forward_causal(state, x.q.topRows(8), x.k.topRows(8), x.v.topRows(8));
  const auto before = state;
  REQUIRE_THROWS_AS(id.step(state, x.q.row(8).transpose(), x.k.row(8).transpose(), x.v.row(8).transpose()),
                    abc::config_error);
  REQUIRE_THROWS_WITH(id.step(state, x.q.row(8).transpose(), x.k.row(8).transpose(), x.v.row(8).transpose()),
                      ABC_CONTAINS("abc::BoundedAttention::step: the token count (state position + new tokens) is 9, "
                                   "expected at most 8 (the control's capacity, max_tokens())"));
  REQUIRE(state == before);
}

}  // namespace errors_test
