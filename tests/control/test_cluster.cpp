// SPDX-License-Identifier: MIT
// abc tests: control::Cluster (ABC paper Eq. 6): each token joins its nearest centroid and slot c holds
// the running mean of its members (decay cnt−1/cnt, write 1/cnt); non-causal k-means on the
// control input; k-means itself (determinism, exactness, non-convergence); errors.
#include <abc/bounded_attention.hpp>
#include <abc/control/cluster.hpp>

#include <algorithm>
#include <limits>
#include <map>

#include "support/approx.hpp"
#include "support/catch.hpp"
#include "support/reference.hpp"
#include "support/schedule_reference.hpp"

namespace cluster_test {

namespace {

using abc::Index;
const Index kSizes[] = {1, 7, 63, 65, 100};

// Nearest centroid in double, lower index on ties.
size_t nearest(const ref::Mat& c, const std::vector<double>& x) {
  size_t best = 0;
  double best_d = std::numeric_limits<double>::infinity();
  for (size_t j = 0; j < c.size(); ++j) {
    double dist = 0;
    for (size_t i = 0; i < x.size(); ++i) dist += (c[j][i] - x[i]) * (c[j][i] - x[i]);
    if (dist < best_d) {
      best_d = dist;
      best = j;
    }
  }
  return best;
}

// The running-mean schedule of a fixed assignment of tokens to slots.
ref::ScheduleFn running_mean(std::vector<size_t> assign, size_t n) {
  return [assign, n](size_t t) {
    size_t cnt = 0;
    for (size_t i = 0; i <= t; ++i) cnt += assign[i] == assign[t];
    return ref::one_hot(n, long(assign[t]), 1.0 / double(cnt), double(cnt - 1) / double(cnt));
  };
}

// Well-separated blobs: cluster j is centred at 10·e_j (j < d) with noise of ±0.5.
template <class T>
abc::Matrix<T> blobs(Index per, Index clusters, Index d, std::uint64_t seed, std::vector<Index>& truth) {
  abc::Matrix<T> x = ref::random<T>(per * clusters, d, seed, 0.5);
  truth.clear();
  for (Index i = 0; i < x.rows(); ++i) {
    const Index j = (i * 7) % clusters;  // interleaved, so the order says nothing
    x(i, j) += T(10);
    truth.push_back(j);
  }
  return x;
}

}  // namespace

TEMPLATE_TEST_CASE("Cluster with given centroids matches the float64 reference in every form", "[control][cluster]", float,
                   double) {
  using T = TestType;
  const Index d = 6, dv = 4, dx = 3, n = 5;
  for (Index n_tok : kSizes) {
    const std::uint64_t seed = 100 + std::uint64_t(n_tok);
    auto q = ref::random<T>(n_tok, d, seed + 1), k = ref::random<T>(n_tok, d, seed + 2);
    auto v = ref::random<T>(n_tok, dv, seed + 3), x = ref::random<T>(n_tok, dx, seed + 4);
    const abc::Matrix<T> centroids = ref::random<T>(n, dx, seed + 5);
    abc::control::Cluster<T> control(centroids);
    const auto rc = ref::from(centroids), rx = ref::from(x);
    std::vector<size_t> assign;
    for (const auto& xi : rx) assign.push_back(nearest(rc, xi));
    const auto sched = running_mean(assign, size_t(n));
    const double scale = 1 / std::sqrt(double(d));
    const auto rq = ref::from(q), rk = ref::from(k), rv = ref::from(v);
    INFO("N = " << n_tok);
    abc::BoundedAttention attn{control};
    ref::require_close(attn.forward(q, k, v, x), ref::recurrence_noncausal(sched, size_t(n), rq, rk, rv, scale));
    ref::require_causal_forms(control, q, k, v, ref::recurrence_causal(sched, size_t(n), rq, rk, rv, scale), &x);
  }
}

TEMPLATE_TEST_CASE("Cluster memory rows are the member means and the counts sit in the normaliser (ABC paper Eq. 6)",
                   "[control][cluster][identity]", float, double) {
  using T = TestType;
  const Index d = 4, dv = 3, n = 6, n_tok = 80;
  auto q = ref::random<T>(n_tok, d, 111), k = ref::random<T>(n_tok, d, 112), v = ref::random<T>(n_tok, dv, 113);
  abc::Matrix<T> centroids = ref::random<T>(n, d, 114);
  centroids.row(5).setConstant(T(50));  // far from every key: never joined, stays empty
  abc::BoundedAttention attn{abc::control::Cluster<T>(centroids)};
  auto state = attn.make_state(d, dv);
  attn.forward_causal(state, q, k, v);  // keys are the control input
  const auto rc = ref::from(centroids), rk = ref::from(k);
  ref::Mat mean = ref::zeros(n, d);
  std::vector<double> cnt(size_t(n), 0.0);
  for (const auto& ki : rk) {
    const size_t c = nearest(rc, ki);
    cnt[c] += 1;
    for (Index j = 0; j < d; ++j) mean[c][size_t(j)] += ki[size_t(j)];
  }
  for (Index l = 0; l < n; ++l)
    for (Index j = 0; j < d; ++j)
      if (cnt[size_t(l)] > 0) mean[size_t(l)][size_t(j)] /= cnt[size_t(l)];
  ref::require_close(state.keys(), mean);
  for (Index l = 0; l < n; ++l) {
    REQUIRE(double(state.slot_state()(1, l)) == cnt[size_t(l)]);
    REQUIRE(state.written(l) == (cnt[size_t(l)] > 0));
  }
  REQUIRE(state.slot_state()(0, 5) == -std::numeric_limits<T>::infinity());
  REQUIRE(state.slot_state()(0, 0) == T(0));
}

TEMPLATE_TEST_CASE("Cluster without centroids runs k-means on the control input non-causally", "[control][cluster]", float,
                   double) {
  using T = TestType;
  const Index d = 5, dv = 3, dx = 4, n = 4;
  for (Index n_tok : kSizes) {
    auto q = ref::random<T>(n_tok + 3, d, 121), k = ref::random<T>(n_tok, d, 122), v = ref::random<T>(n_tok, dv, 123);
    auto x = ref::random<T>(n_tok, dx, 124);
    abc::BoundedAttention attn{abc::control::Cluster<T>(abc::Slots{n}, dx, abc::Seed{9}, 100)};
    const auto fit = abc::control::Cluster<T>::kmeans(x, abc::Slots{n}, abc::Seed{9}, 100);
    REQUIRE(fit.status == abc::Status::ok);
    std::vector<size_t> assign(fit.assignments.begin(), fit.assignments.end());
    // The memory is the mean of each fitted cluster: the running mean's final state.
    const auto sched = running_mean(assign, size_t(n));
    INFO("N = " << n_tok);
    ref::require_close(attn.forward(q, k, v, x),
                       ref::recurrence_noncausal(sched, size_t(n), ref::from(q), ref::from(k), ref::from(v), 1 / std::sqrt(double(d))));
    // Causal use needs fixed centroids.
    REQUIRE_THROWS_AS(attn.forward_causal(q.topRows(n_tok), k, v, x), abc::config_error);
    REQUIRE_THROWS_WITH(attn.forward_causal(q.topRows(n_tok), k, v, x),
                        ABC_CONTAINS("forward_causal: centroids.rows() is 0, expected at least 4"));
    auto state = attn.make_state(d, dv);
    REQUIRE_THROWS_WITH(attn.step(state, k.row(0).transpose(), k.row(0).transpose(), v.row(0).transpose(), x.row(0).transpose()),
                        ABC_CONTAINS("abc::BoundedAttention::step: centroids.rows() is 0"));
    REQUIRE(attn.validate(state, q.topRows(n_tok), k, v, x) == abc::Status::bad_config);
    REQUIRE(state.position() == 0);
  }
}

TEMPLATE_TEST_CASE("k-means is deterministic, exact on separated clusters, and reports non-convergence",
                   "[control][cluster][kmeans]", float, double) {
  using T = TestType;
  using C = abc::control::Cluster<T>;
  std::vector<Index> truth;
  const abc::Matrix<T> x = blobs<T>(30, 5, 6, 131, truth);
  const auto a = C::kmeans(x, abc::Slots{5}, abc::Seed{1}, 50), b = C::kmeans(x, abc::Slots{5}, abc::Seed{1}, 50);
  REQUIRE(a.centroids == b.centroids);
  REQUIRE(a.assignments == b.assignments);
  REQUIRE(a.status == abc::Status::ok);
  REQUIRE(a.iterations >= 1);
  // The partition is the true one (labels up to a permutation), and centroids are the blob means.
  std::map<Index, Index> label;
  for (size_t i = 0; i < truth.size(); ++i) {
    auto it = label.emplace(truth[i], a.assignments[i]).first;
    REQUIRE(it->second == a.assignments[i]);
  }
  REQUIRE(label.size() == 5);
  ref::Mat want = ref::zeros(5, 6);
  for (size_t i = 0; i < truth.size(); ++i)
    for (Index j = 0; j < 6; ++j) want[size_t(label[truth[i]])][size_t(j)] += double(x(Index(i), j)) / 30.0;
  ref::require_close(a.centroids, want);

  // Overlapping uniform data needs several Lloyd updates: a cap of 1 reports it, without throwing.
  const abc::Matrix<T> u = ref::random<T>(300, 2, 132);
  const auto capped = C::kmeans(u, abc::Slots{8}, abc::Seed{3}, 1);
  REQUIRE(capped.status == abc::Status::no_convergence);
  REQUIRE(capped.iterations == 1);
  const auto full = C::kmeans(u, abc::Slots{8}, abc::Seed{3}, 500);
  REQUIRE(full.status == abc::Status::ok);
  REQUIRE(full.iterations > 1);
  // Another seed starts elsewhere.
  REQUIRE(C::kmeans(u, abc::Slots{8}, abc::Seed{4}, 1).centroids != capped.centroids);
  // More clusters than points: duplicates stay empty, nothing breaks.
  const auto tiny = C::kmeans(u.topRows(3), abc::Slots{5}, abc::Seed{1}, 10);
  REQUIRE(tiny.status == abc::Status::ok);
  REQUIRE(tiny.centroids.allFinite());
}

TEMPLATE_TEST_CASE("Cluster errors: centroid width against the control input, bad sizes", "[control][cluster][errors]",
                   float, double) {
  using T = TestType;
  abc::BoundedAttention attn{abc::control::Cluster<T>(ref::random<T>(4, 3, 1))};
  REQUIRE(attn.control().input_dim() == 3);
  auto q = ref::random<T>(10, 5, 2), k = ref::random<T>(10, 5, 3), v = ref::random<T>(10, 2, 4);
  REQUIRE_THROWS_AS(attn.forward(q, k, v), abc::shape_error);
  REQUIRE_THROWS_WITH(attn.forward(q, k, v), ABC_CONTAINS("abc::BoundedAttention::forward: k is [10 x 5], expected [10 x 3] "
                                                         "(the control reads the keys as its input"));
  REQUIRE_THROWS_WITH(attn.forward_causal(q, k, v), ABC_CONTAINS("k is [10 x 5], expected [10 x 3]"));
  auto x_bad = ref::random<T>(10, 4, 5);
  REQUIRE_THROWS_AS(attn.forward(q, k, v, x_bad), abc::shape_error);
  REQUIRE_THROWS_WITH(attn.forward(q, k, v, x_bad), ABC_CONTAINS("x is [10 x 4], expected [10 x 3]"));
  REQUIRE_NOTHROW(attn.forward(q, k, v, ref::random<T>(10, 3, 6)));
  REQUIRE_THROWS_WITH(abc::control::Cluster<T>(abc::Matrix<T>(0, 3)), ABC_CONTAINS("centroids.rows() (slots) is 0"));
  REQUIRE_THROWS_WITH(abc::control::Cluster<T>(abc::Slots{4}, 3, abc::Seed{1}, 0), ABC_CONTAINS("max_iter is 0, expected at least 1"));
  REQUIRE_THROWS_WITH(abc::control::Cluster<T>::kmeans(q, abc::Slots{0}, abc::Seed{1}, 5), ABC_CONTAINS("kmeans: n is 0"));
}

}  // namespace cluster_test
