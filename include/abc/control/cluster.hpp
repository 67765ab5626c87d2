// SPDX-License-Identifier: MIT
// abc: bounded-memory attention. control::Cluster, memory rows are cluster means (k-means).
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "../detail/check.hpp"
#include "../detail/control_check.hpp"
#include "../detail/random.hpp"
#include "../error.hpp"
#include "../schedule.hpp"
#include "../seed.hpp"
#include "../slots.hpp"
#include "../types.hpp"

ABC_NAMESPACE_BEGIN

/// What Cluster::kmeans returns. `status` is Status::ok when the assignments stopped changing and
/// Status::no_convergence when the iteration cap was hit first (a result, not an error).
template <class Scalar>
struct KMeansResult {
  Matrix<Scalar> centroids;       ///< [n × d_x]
  std::vector<Index> assignments;  ///< nearest centroid of each row of x, under `centroids`
  Index iterations = 0;           ///< Lloyd updates done
  /// Status::ok if the assignments stopped changing, Status::no_convergence if `max_iter` updates
  /// were done first.
  Status status = Status::ok;
};

namespace control {

/**
 * \brief Clustering control (ABC paper §3.2, Eq. 6): slot c holds the mean of the keys
 * (and values) of the tokens in cluster c.
 *
 * Token t joins its nearest centroid c (squared Euclidean distance on the control input x_t, the
 * key by default; ties go to the lower index). Slot c keeps the running mean of its members:
 *     decay cnt_{t−1}/cnt_t on slot c, write e_c / cnt_t,
 * which after all N tokens is Eq. 6's mean over the whole sequence, so non-causal, causal and
 * split runs share one schedule. The member count cnt of slot c lives in the State's slot_state():
 * row 1 is the count (float counts are exact up to 2^24 tokens per slot), row 0 is set to 0 at the
 * first member, so State::log_norm() reads log cnt and an empty slot stays (−∞, 0).
 *
 * Two ways to build it:
 * - `Cluster(centroids)`: given centroids C [n × d_x]; every form works (streaming clustering).
 * - `Cluster(Slots{n}, d_x, Seed{seed}, max_iter)`: the non-causal form fits the centroids itself by k-means on
 *   the whole control input (k-means++ seeded from `seed`, Lloyd, at most max_iter updates), the
 *   paper's setting. Causal calls and step need centroids fixed in advance and are refused with a
 *   config_error; fit them once with kmeans() and construct from its centroids.
 */
template <class Scalar = float>
class Cluster {
 public:
  /// float or double.
  using scalar_type = Scalar;
  /// The control's name in state blobs.
  static std::string tag() { return "abc::control::Cluster"; }
  /// One write per token, into the slot of its nearest centroid.
  static constexpr int max_writes = 1;
  /// No parameters, and piecewise constant in x: no gradient flows through the schedule.
  static constexpr bool constant_schedule = true;
  static constexpr bool has_decay_all = false;  ///< only the joined slot decays

  /// From given centroids [n × d_x]. \throws config_error if empty or not finite.
  explicit Cluster(Matrix<Scalar> centroids)
      : centroids_(std::move(centroids)), n_(centroids_.rows()), dx_(centroids_.cols()) {
    detail::require_at_least(kWho, "centroids.rows() (slots)", n_, 1, "at least one cluster");
    detail::require_at_least(kWho, "centroids.cols() (input width)", dx_, 1,
                             "the control input needs at least one column");
    if (auto p = detail::finite_problem("centroids", centroids_)) detail::raise(kWho, p);
  }

  /// n clusters fitted non-causally on control inputs of width d_x. \throws config_error if n,
  /// d_x or max_iter is < 1.
  Cluster(Slots n, Index d_x, Seed seed, Index max_iter = 100)
      : n_(n.value), dx_(d_x), seed_(seed.value), max_iter_(max_iter) {
    detail::require_at_least(kWho, "n", n_, 1, "at least one cluster");
    detail::require_at_least(kWho, "d_x", d_x, 1, "the control input needs at least one column");
    detail::require_at_least(kWho, "max_iter", max_iter, 1, "k-means needs at least one update");
    // The centroids are fitted in non-causal forward: refuse their shape now, not there.
    detail::require_product(kWho, "n × d_x (the centroids' entries)", n_, d_x);
  }

  /// n, the number of clusters (one slot each).
  Index num_slots() const noexcept { return n_; }
  /// d_x, the width of the control input the distances are measured on.
  Index input_dim() const noexcept { return dx_; }
  /// Whether centroids are fixed (given, or fitted by noncausal_form); false: fitted per call.
  bool has_centroids() const noexcept { return centroids_.rows() == n_; }
  /// The centroids C [n × d_x]; empty (0 × 0) for a Cluster(Slots{n}, d_x, seed, max_iter), which fits
  /// them in noncausal_form().
  const Matrix<Scalar>& centroids() const noexcept { return centroids_; }

  /// Non-causal: a Cluster built without centroids fits them on the whole input x by k-means.
  Cluster noncausal_form(MatrixRef<Scalar> x) const {
    if (has_centroids()) return *this;
    Cluster c = *this;
    c.centroids_ = kmeans(x, Slots{n_}, Seed{seed_}, max_iter_).centroids;
    return c;
  }

  /// Causal and step need fixed centroids: a Cluster without them reports why.
  detail::Problem causal_problem() const noexcept {
    if (has_centroids()) return {};
    return detail::at_least(Status::bad_config, "centroids.rows()", centroids_.rows(), n_,
                            "a Cluster(Slots{n}, d_x, seed, max_iter) fits its centroids only in "
                            "non-causal forward; build it from centroids, e.g. "
                            "Cluster::kmeans(...).centroids, for causal attention and step");
  }

  /// The token with control input x [d_x] joins its nearest centroid c: slot c gets decay
  /// cnt_{t−1}/cnt_t and write 1/cnt_t, and its count cnt_t in row 1 of `slot_state`. Needs centroids
  /// (has_centroids()), which BoundedAttention ensures through causal_problem() and noncausal_form().
  void schedule(Index /*t*/, VectorRef<Scalar> x, MatrixOut<Scalar> slot_state,
                SparseWrite<Scalar, 1>& w) const noexcept {
    const Index c = nearest(centroids_, x);
    const Scalar cnt = slot_state(1, c) + Scalar(1);
    slot_state(0, c) = Scalar(0);
    slot_state(1, c) = cnt;
    w.add(c, (cnt - Scalar(1)) / cnt, Scalar(1) / cnt);
  }

  /**
   * \brief k-means on the rows of x [N × d_x] into n clusters: k-means++ seeding (counter-based
   * draws from `seed`, so deterministic everywhere), then Lloyd updates until the assignments stop
   * changing or `max_iter` updates are done. An empty cluster keeps its previous centroid. Never
   * throws for non-convergence: see KMeansResult::status.
   * \throws config_error if n or max_iter is < 1.
   */
  static KMeansResult<Scalar> kmeans(MatrixRef<Scalar> x, Slots slots, Seed seed, Index max_iter) {
    const Index n = slots.value;
    detail::require_at_least("abc::control::Cluster::kmeans", "n", n, 1, "at least one cluster");
    detail::require_at_least("abc::control::Cluster::kmeans", "max_iter", max_iter, 1,
                             "at least one update");
    detail::require_product("abc::control::Cluster::kmeans", "n × x.cols() (the centroids' entries)", n, x.cols());
    const Index rows = x.rows();
    KMeansResult<Scalar> r;
    r.centroids = Matrix<Scalar>::Zero(n, x.cols());
    r.assignments.assign(static_cast<std::size_t>(rows), 0);
    if (rows == 0) return r;  // nothing to fit: every slot stays empty
    seed_plus_plus(x, seed.value, r.centroids);
    assign(x, r.centroids, r.assignments);
    bool changed = true;
    while (changed && r.iterations < max_iter) {
      update(x, r.assignments, r.centroids);
      ++r.iterations;
      changed = assign(x, r.centroids, r.assignments);
    }
    r.status = changed ? Status::no_convergence : Status::ok;
    return r;
  }

 private:
  static constexpr const char* kWho = "abc::control::Cluster";

  // Nearest centroid by squared distance; ties go to the lower index (strict <).
  template <class Row>
  static Index nearest(const Matrix<Scalar>& c, const Row& x) noexcept {
    Index best = 0;
    Scalar best_d = std::numeric_limits<Scalar>::infinity();
    for (Index j = 0; j < c.rows(); ++j) {
      const Scalar dist = (c.row(j) - x.transpose()).squaredNorm();
      if (dist < best_d) {
        best_d = dist;
        best = j;
      }
    }
    return best;
  }

  // Returns whether any assignment changed.
  static bool assign(const MatrixRef<Scalar>& x, const Matrix<Scalar>& c, std::vector<Index>& a) {
    bool changed = false;
    for (Index i = 0; i < x.rows(); ++i) {
      const Index j = nearest(c, x.row(i).transpose());
      changed |= a[static_cast<std::size_t>(i)] != j;
      a[static_cast<std::size_t>(i)] = j;
    }
    return changed;
  }

  // Centroids as the means of their members, summed in double; empty clusters keep theirs.
  static void update(const MatrixRef<Scalar>& x, const std::vector<Index>& a, Matrix<Scalar>& c) {
    Eigen::MatrixXd sum = Eigen::MatrixXd::Zero(c.rows(), c.cols());
    std::vector<Index> cnt(static_cast<std::size_t>(c.rows()), 0);
    for (Index i = 0; i < x.rows(); ++i) {
      const Index j = a[static_cast<std::size_t>(i)];
      sum.row(j) += x.row(i).template cast<double>();
      ++cnt[static_cast<std::size_t>(j)];
    }
    for (Index j = 0; j < c.rows(); ++j)
      if (cnt[static_cast<std::size_t>(j)] > 0)
        c.row(j) = (sum.row(j) / double(cnt[static_cast<std::size_t>(j)])).template cast<Scalar>();
  }

  // k-means++: the first centroid uniformly, each next one with probability ∝ D², the squared
  // distance to the nearest chosen centroid (uniformly again if every point is already chosen).
  static void seed_plus_plus(const MatrixRef<Scalar>& x, std::uint64_t seed, Matrix<Scalar>& c) {
    const Index rows = x.rows();
    auto uniform_row = [&](std::uint64_t k) {
      return std::min<Index>(rows - 1, static_cast<Index>(detail::uniform(seed, k) * double(rows)));
    };
    c.row(0) = x.row(uniform_row(0));
    std::vector<double> d2(static_cast<std::size_t>(rows), std::numeric_limits<double>::infinity());
    for (Index j = 1; j < c.rows(); ++j) {
      double total = 0;
      for (Index i = 0; i < rows; ++i) {
        auto& di = d2[static_cast<std::size_t>(i)];
        di = std::min(di, (x.row(i) - c.row(j - 1)).template cast<double>().squaredNorm());
        total += di;
      }
      Index pick = rows - 1;
      if (total > 0) {
        const double target = detail::uniform(seed, static_cast<std::uint64_t>(j)) * total;
        double acc = 0;
        for (Index i = 0; i < rows; ++i) {
          acc += d2[static_cast<std::size_t>(i)];
          if (acc > target) {
            pick = i;
            break;
          }
        }
      } else {
        pick = uniform_row(static_cast<std::uint64_t>(j));
      }
      c.row(j) = x.row(pick);
    }
  }

  Matrix<Scalar> centroids_;
  Index n_, dx_;
  std::uint64_t seed_ = 0;
  Index max_iter_ = 0;
};

}  // namespace control
ABC_NAMESPACE_END
