// SPDX-License-Identifier: MIT
// abc: bounded-memory attention. select::HeavyHitterAttention, a KV cache that keeps the recent
// tokens and the heavy hitters: the older tokens with the largest accumulated attention mass (H2O).
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "../detail/check.hpp"
#include "../detail/segment_check.hpp"
#include "../error.hpp"
#include "../kernel/kept_read.hpp"
#include "../options.hpp"
#include "../types.hpp"

ABC_NAMESPACE_BEGIN
namespace detail {
struct HeavyHitterStateAccess;  // serialisation's door to a cache (abc/select/state_io.hpp)
}  // namespace detail
namespace select {

/// Sizes of an H2O cache. The paper splits its budget equally between heavy hitters and recent
/// tokens; the defaults keep 128 of each.
struct HeavyHitterConfig {
  Index heavy = 128;   ///< older tokens kept by accumulated attention mass
  Index recent = 128;  ///< the newest tokens, always kept
  double scale = 0.0;  ///< softmax scale; 0 means 1/sqrt(d)
};

/**
 * \brief H2O (Zhang et al. 2023): a KV cache of at most `heavy + recent` tokens that keeps the
 * `recent` newest tokens and, among the older ones, the `heavy` with the largest accumulated
 * attention mass: the sum, over every query that has read a token, of the probability it gave it.
 *
 * A segment of n tokens reads as a prefill: query i attends to every kept token and to segment
 * tokens 0..i (exact softmax attention, kernel::kept_read); the probabilities of all n queries are
 * then added to the masses of the tokens they read (a new token's included), and the cache is cut
 * back to its budget. `step` is a segment of one token, so a decode loop reads `heavy + recent`
 * kept tokens and the new one, then evicts one. The cut keeps the `recent` newest tokens whatever
 * their mass; among the rest it drops the smallest masses, and of equal masses the older token
 * goes first. With `recent` = 0 a new token competes with the others at once.
 *
 * Masses are accumulated in double, so a float and a double cache fed the same probabilities rank
 * alike. Kept tokens stay in stream order; `token_position(age)` gives each one's original position
 * for the caller's positional encoding (keys are stored as given, e.g. already rotated).
 *
 * \tparam Scalar float or double.
 */
template <class Scalar = float>
class HeavyHitterAttention {
 public:
  /// float or double.
  using scalar_type = Scalar;

  /// The cache of one sequence and head: the kept tokens' keys, values, masses and positions, in
  /// stream order. O((heavy + recent) · (d + dv)), flat in the stream's length.
  class State {
   public:
    State() = default;
    Index size() const noexcept { return size_; }  ///< tokens kept, ≤ capacity
    /// heavy + recent, the budget; 0 for a default-constructed State.
    Index capacity() const noexcept { return budget_; }
    /// d, the key width.
    Index key_dim() const noexcept { return keys_.cols(); }
    /// dv, the value width.
    Index value_dim() const noexcept { return values_.cols(); }
    std::int64_t position() const noexcept { return next_; }  ///< tokens consumed so far
    /// The key [d] of the kept token of age `age` (0 = oldest); unchecked: 0 ≤ age < size().
    auto key(Index age) const { return keys_.row(age); }
    /// The value [dv] of the kept token of age `age`; unchecked: 0 ≤ age < size().
    auto value(Index age) const { return values_.row(age); }
    /// The attention mass the kept token of age `age` has accumulated.
    double mass(Index age) const { return mass_[std::size_t(age)]; }
    /// The stream position of the kept token of age `age`.
    std::int64_t token_position(Index age) const { return pos_[std::size_t(age)]; }
    /// Bytes of memory the cache holds, its read work space included.
    std::size_t bytes() const noexcept {
      return sizeof(Scalar) * std::size_t(keys_.size() + values_.size() + logits_.size()) +
             mass_.size() * sizeof(double) + pos_.size() * sizeof(std::int64_t) + keep_.size() +
             order_.size() * sizeof(Index) + sizeof(*this);
    }
    /// Empties the cache, back to position 0; the budget and widths are kept.
    void reset() noexcept {
      size_ = 0;
      next_ = 0;
    }

   private:
    friend class HeavyHitterAttention;
    friend struct detail::HeavyHitterStateAccess;
    // Room for the budget and one more token: a decode step appends, reads and evicts in place.
    State(Index budget, Index d, Index dv)
        : keys_(Matrix<Scalar>::Zero(budget + 1, d)), values_(Matrix<Scalar>::Zero(budget + 1, dv)),
          mass_(std::size_t(budget + 1)), pos_(std::size_t(budget + 1)), budget_(budget),
          logits_(1, budget + 1) {
      reserve(budget + 1);
    }

    // Room for `rows` tokens, and for a cut of as many, so that nothing after it allocates; the
    // kept rows are preserved.
    void reserve(Index rows) {
      keep_.reserve(std::size_t(rows));
      order_.reserve(std::size_t(rows));
      if (keys_.rows() < rows) {
        keys_.conservativeResize(rows, keys_.cols());
        values_.conservativeResize(rows, values_.cols());
      }
      if (Index(mass_.size()) < rows) {
        mass_.resize(std::size_t(rows));
        pos_.resize(std::size_t(rows));
      }
    }

    // Rows [0, size_) are the kept tokens, oldest first; the rows after them are work space.
    Matrix<Scalar> keys_, values_;
    std::vector<double> mass_;
    std::vector<std::int64_t> pos_;
    Index budget_ = 0, size_ = 0;
    std::int64_t next_ = 0;
    // Work space of a read and of a cut, kept so a step allocates nothing once warm; not part of
    // the value.
    Matrix<Scalar> logits_;
    std::vector<std::uint8_t> keep_;
    std::vector<Index> order_;
  };

  /// \throws config_error if heavy or recent < 0, heavy + recent < 1, or the scale is not finite
  /// and positive (0: 1/sqrt(d)).
  explicit HeavyHitterAttention(HeavyHitterConfig config) : cfg_(config) {
    constexpr const char* who = "abc::select::HeavyHitterAttention";
    detail::Problem p;
    if (cfg_.heavy < 0)
      p = detail::at_least(Status::bad_config, "config.heavy", cfg_.heavy, 0, "a token count");
    else if (cfg_.recent < 0)
      p = detail::at_least(Status::bad_config, "config.recent", cfg_.recent, 0, "a token count");
    else if (detail::require_sum(who, "config.heavy + config.recent", cfg_.heavy, cfg_.recent) < 1)
      p = detail::at_least(Status::bad_config, "config.heavy + config.recent", cfg_.heavy + cfg_.recent, 1,
                           "the cache holds at least one token");
    if (p) detail::raise(who, p);
    detail::require_scale(who, "config.scale", cfg_.scale);
  }

  /// The cache sizes, as given to the constructor.
  const HeavyHitterConfig& config() const noexcept { return cfg_; }
  /// heavy + recent: the most tokens a cache keeps between calls.
  Index budget() const noexcept { return cfg_.heavy + cfg_.recent; }
  /// The scale a read with keys of width `d` uses.
  Scalar scale(Index d) const noexcept { return detail::read_scale<Scalar>(cfg_.scale, d); }

  /// An empty cache for keys of width d and values of width dv. \throws config_error if d or dv < 1
  /// or (budget + 1) × (d + dv) overflows.
  State make_state(Index d, Index dv) const {
    constexpr const char* who = "abc::select::HeavyHitterAttention::make_state";
    detail::Problem p;
    if (d < 1) p = detail::at_least(Status::bad_config, "d", d, 1, "keys need a column");
    else if (dv < 1) p = detail::at_least(Status::bad_config, "dv", dv, 1, "values need a column");
    if (p) detail::raise(who, p);
    const Index rows = detail::require_sum(who, "config.heavy + config.recent + 1", budget(), Index(1));
    detail::require_product(who, "(config.heavy + config.recent + 1) × (d + dv)", rows,
                            detail::require_sum(who, "d + dv", d, dv));
    return State(budget(), d, dv);
  }

  /**
   * \brief One segment of n tokens: query i attends to the kept tokens and to segment tokens 0..i;
   * the masses are updated and the cache is cut back to its budget.
   * \param s a cache from make_state(d, dv) of this attention
   * \param q [n × d], \param k [n × d], \param v [n × dv]; \return [n × dv]
   * \throws shape_error, config_error; a call that throws leaves the cache unchanged.
   */
  Matrix<Scalar> segment(State& s, MatrixRef<Scalar> q, MatrixRef<Scalar> k, MatrixRef<Scalar> v) const {
    Matrix<Scalar> out(q.rows(), v.cols());
    run(s, q, k, v, out, false);
    return out;
  }
  /// As segment(s, q, k, v), into a caller-owned `out` [n × dv].
  void segment_into(State& s, MatrixRef<Scalar> q, MatrixRef<Scalar> k, MatrixRef<Scalar> v,
                    MatrixOut<Scalar> out) const {
    run(s, q, k, v, out, false);
  }

  /// One token: a segment of length 1. q, k [d], v [dv]; allocates nothing (make_state sized the
  /// cache for a step).
  Vector<Scalar> step(State& s, VectorRef<Scalar> q, VectorRef<Scalar> k, VectorRef<Scalar> v) const {
    Vector<Scalar> out(v.size());
    step_into(s, q, k, v, out);
    return out;
  }
  /// As step(s, q, k, v), into a caller-owned `out` of dv entries.
  void step_into(State& s, VectorRef<Scalar> q, VectorRef<Scalar> k, VectorRef<Scalar> v,
                 VectorOut<Scalar> out) const {
    using RowMap = Eigen::Map<const Matrix<Scalar>>;
    Eigen::Map<Matrix<Scalar>> o(out.data(), 1, out.size());
    run(s, RowMap(q.data(), 1, q.size()), RowMap(k.data(), 1, k.size()), RowMap(v.data(), 1, v.size()), o, true);
  }

 private:
  detail::Problem check(const State& s, const MatrixRef<Scalar>& q, const MatrixRef<Scalar>& k,
                        const MatrixRef<Scalar>& v, Index out_rows, Index out_cols, bool vectors) const noexcept {
    if (s.capacity() != budget())  // a count: reported as a value
      return detail::value_problem(Status::shape_mismatch, "state.capacity()", s.capacity(), "", budget(),
                                   "config.heavy + config.recent: the state must come from make_state(d, dv) of "
                                   "this attention");
    return detail::segment_problem(q, k, v, out_rows, out_cols, s.key_dim(), s.value_dim(), vectors);
  }

  void run(State& s, const MatrixRef<Scalar>& q, const MatrixRef<Scalar>& k, const MatrixRef<Scalar>& v,
           MatrixOut<Scalar> out, bool vectors) const {
    if (auto p = check(s, q, k, v, out.rows(), out.cols(), vectors))
      detail::raise("abc::select::HeavyHitterAttention", p);
    const Index n = q.rows(), m = s.size_, total = m + n;
    // The segment's tokens go after the kept ones, in rows that are not yet part of the value (an
    // allocation failure here leaves the cache as it was).
    s.reserve(total);
    s.keys_.middleRows(m, n) = k;
    s.values_.middleRows(m, n) = v;
    const auto p = kernel::kept_read<Scalar>(q, s.keys_, s.values_, m, scale(s.key_dim()), s.logits_, out,
                                             kernel::NoBias{});
    for (Index i = 0; i < n; ++i) {
      s.mass_[std::size_t(m + i)] = 0;
      s.pos_[std::size_t(m + i)] = s.next_ + i;
    }
    for (Index i = 0; i < n; ++i)
      for (Index j = 0; j < m + i + 1; ++j) s.mass_[std::size_t(j)] += double(p(i, j));
    s.next_ += n;
    cut(s, total);
  }

  // Back to the budget: the newest `recent` rows stay; of the older rows the `heavy` largest masses
  // stay, of equal masses the newer.
  void cut(State& s, Index total) const {
    const Index budget = this->budget();
    if (total <= budget) {
      s.size_ = total;
      return;
    }
    const Index older = total - std::min(cfg_.recent, total), drop = total - budget;
    // Row a goes before row b: smaller mass, then older (a smaller row is an older token).
    const auto goes_first = [&s](Index a, Index b) {
      const double ma = s.mass_[std::size_t(a)], mb = s.mass_[std::size_t(b)];
      return ma != mb ? ma < mb : a < b;
    };
    if (drop == 1) {  // a decode step: one victim, the rows after it move up by one
      Index victim = 0;
      for (Index r = 1; r < older; ++r)
        if (goes_first(r, victim)) victim = r;
      remove_rows(s, total, [victim](Index r) { return r != victim; });
    } else {
      s.order_.resize(std::size_t(older));
      for (Index r = 0; r < older; ++r) s.order_[std::size_t(r)] = r;
      std::nth_element(s.order_.begin(), s.order_.begin() + (drop - 1), s.order_.end(), goes_first);
      s.keep_.assign(std::size_t(total), 1);
      for (Index i = 0; i < drop; ++i) s.keep_[std::size_t(s.order_[std::size_t(i)])] = 0;
      remove_rows(s, total, [&s](Index r) { return s.keep_[std::size_t(r)] != 0; });
    }
    s.size_ = budget;
  }

  // Compacts rows [0, total) to those `kept`, in order.
  template <class Kept>
  static void remove_rows(State& s, Index total, const Kept& kept) {
    Index w = 0;
    for (Index r = 0; r < total; ++r) {
      if (!kept(r)) continue;
      if (w != r) {
        s.keys_.row(w) = s.keys_.row(r);
        s.values_.row(w) = s.values_.row(r);
        s.mass_[std::size_t(w)] = s.mass_[std::size_t(r)];
        s.pos_[std::size_t(w)] = s.pos_[std::size_t(r)];
      }
      ++w;
    }
  }

  HeavyHitterConfig cfg_;
};

}  // namespace select
ABC_NAMESPACE_END
