// SPDX-License-Identifier: MIT
// abc: bounded-memory attention. select::KvCacheAttention, a KV cache of a fixed number of tokens
// for softmax attention, kept by a policy's score (H2O, attention sinks, SnapKV).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "../detail/check.hpp"
#include "../detail/segment_check.hpp"
#include "../error.hpp"
#include "../kernel/kept_read.hpp"
#include "../options.hpp"
#include "../types.hpp"
#include "rope.hpp"

ABC_NAMESPACE_BEGIN
namespace detail {
struct KvCacheStateAccess;  // serialisation's door to a cache (abc/select/state_io.hpp)
// A cache policy's config_type, or a type no caller can name when it has none.
struct NoCacheConfig {};
template <class P, class = void>
struct cache_config_of {
  using type = NoCacheConfig;
};
template <class P>
struct cache_config_of<P, std::void_t<typename P::config_type>> {
  using type = typename P::config_type;
};
}  // namespace detail
namespace select {
template <class Attention>
class MultiHeadCache;

/**
 * \brief What a cache policy sees after a read: the probabilities `p` [n × (m + n)] of the
 * segment's n queries over the m kept tokens and the segment's own (row i reads columns
 * [0, m + i]; the rest are 0), and the stream positions of those m + n tokens, in stream order.
 */
template <class Scalar>
struct CacheRead {
  /// The probabilities, one row per query of the segment.
  Eigen::Map<const Matrix<Scalar>> p;
  /// Kept tokens before the segment (its first column of the segment's own tokens).
  Index kept;
  /// Tokens in the segment.
  Index segment;
  /// The stream position of each of the kept + segment tokens.
  const std::int64_t* positions;
};

/**
 * \brief A KV cache of at most `selected + recent` tokens for exact softmax attention, kept by a
 * policy's score: the `recent` newest tokens always, and among the older ones the `selected` with
 * the highest score.
 *
 * A segment of n tokens reads as a prefill: query i attends to every kept token and to segment
 * tokens 0..i (kernel::kept_read). The policy then updates the scores of all kept and segment
 * tokens from the read's probabilities (a segment token starts at 0), and the cache is cut back to
 * its budget: the `recent` newest stay, of the older tokens the lowest scores go, and of equal
 * scores the older token goes first. `step` is a segment of one token, so a decode loop reads the
 * kept tokens and the new one, then evicts one.
 *
 * The policy states its rule and nothing else (select/heavy_hitters.hpp, attention_sinks.hpp,
 * snap_kv.hpp; docs/operators/kv_cache.md): `using scalar_type`; `Index selected() const` and
 * `Index recent() const`; `void update(const CacheRead<scalar_type>&, double* scores) const`,
 * which rewrites the scores of the kept + segment tokens after a read;
 * `const char* score_problem(double score, std::int64_t token, std::int64_t stream) const`, the
 * rule a saved score must satisfy (nullptr when it does); and `static std::string tag()`, its name
 * in blobs.
 *
 * Scores are doubles, so a float and a double cache rank alike. Kept tokens stay in stream order;
 * `token_position(age)` gives each one's original position for the caller's positional encoding
 * (keys are stored as given, e.g. already rotated).
 *
 * \tparam Policy the cache policy, e.g. HeavyHitters<float>.
 */
template <class Policy>
class KvCacheAttention {
 public:
  /// float or double.
  using Scalar = typename Policy::scalar_type;
  /// float or double.
  using scalar_type = Scalar;
  /// The policy.
  using policy_type = Policy;

  /// The cache of one sequence and head: the kept tokens' keys, values, scores and positions, in
  /// stream order. O((selected + recent) · (d + dv)), flat in the stream's length.
  class State {
   public:
    State() = default;
    Index size() const noexcept { return size_; }  ///< tokens kept, ≤ capacity
    /// selected + recent, the budget; 0 for a default-constructed State.
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
    /// The policy's score of the kept token of age `age` (H2O: its accumulated attention mass).
    double score(Index age) const { return score_[std::size_t(age)]; }
    /// The stream position of the kept token of age `age`.
    std::int64_t token_position(Index age) const { return pos_[std::size_t(age)]; }
    /// Bytes of memory the cache holds, its read work space included.
    std::size_t bytes() const noexcept {
      return sizeof(Scalar) * std::size_t(keys_.size() + values_.size() + logits_.size() + group_.size()) +
             score_.size() * sizeof(double) + pos_.size() * sizeof(std::int64_t) + keep_.size() +
             order_.size() * sizeof(Index) + sizeof(*this);
    }
    /// Empties the cache, back to position 0; the budget and widths are kept.
    void reset() noexcept {
      size_ = 0;
      next_ = 0;
    }

   private:
    friend class KvCacheAttention;
    friend struct detail::KvCacheStateAccess;
    // Room for the budget and one more token: a decode step appends, reads and evicts in place.
    State(Index budget, Index d, Index dv)
        : keys_(Matrix<Scalar>::Zero(budget + 1, d)), values_(Matrix<Scalar>::Zero(budget + 1, dv)),
          score_(std::size_t(budget + 1)), pos_(std::size_t(budget + 1)), budget_(budget),
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
      if (Index(score_.size()) < rows) {
        score_.resize(std::size_t(rows));
        pos_.resize(std::size_t(rows));
      }
    }

    // After a prefill: the work space a segment of n tokens grew (n + budget rows, an n × (n +
    // budget) read) goes back to what a step needs, so a cache holds O(budget) between calls.
    // Shrinking is only an economy: if an allocation fails, the larger buffers stay.
    void shrink() noexcept {
      const Index rows = budget_ + 1;
      if (keys_.rows() <= rows && logits_.size() <= rows && group_.size() <= rows) return;
      try {
        keys_.conservativeResize(rows, keys_.cols());
        values_.conservativeResize(rows, values_.cols());
        score_.resize(std::size_t(rows));
        score_.shrink_to_fit();
        pos_.resize(std::size_t(rows));
        pos_.shrink_to_fit();
        logits_.resize(1, rows);
        if (group_.size() > 0) group_.resize(1, rows);
        keep_.clear();
        keep_.shrink_to_fit();
        order_.clear();
        order_.shrink_to_fit();
        keep_.reserve(std::size_t(rows));
        order_.reserve(std::size_t(rows));
      } catch (...) {  // a failed shrink leaves larger, valid buffers
      }
    }

    // Rows [0, size_) are the kept tokens, oldest first; the rows after them are work space.
    Matrix<Scalar> keys_, values_;
    std::vector<double> score_;
    std::vector<std::int64_t> pos_;
    Index budget_ = 0, size_ = 0;
    std::int64_t next_ = 0;
    // Work space of a read and of a cut, kept so a step allocates nothing; not part of the value.
    Matrix<Scalar> logits_;
    Matrix<Scalar> group_;  // the other query heads' probabilities, when several read the cache
    std::vector<std::uint8_t> keep_;
    std::vector<Index> order_;
  };

  /// \throws config_error if the budget (selected + recent) is less than 1 or overflows, or the
  /// scale is not finite and positive (0: 1/sqrt(d)).
  explicit KvCacheAttention(Policy policy, double scale = 0.0) : policy_(std::move(policy)), scale_(scale) {
    constexpr const char* who = "abc::select::KvCacheAttention";
    const Index budget = detail::require_sum(who, "selected + recent", policy_.selected(), policy_.recent());
    if (budget < 1)
      detail::raise(who, detail::at_least(Status::bad_config, "selected + recent", budget, 1,
                                          "the cache holds at least one token"));
    detail::require_scale(who, "scale", scale_);
  }
  /// From the policy's configuration: `HeavyHitterAttention<float>(HeavyHitterConfig{64, 64})`.
  explicit KvCacheAttention(const typename detail::cache_config_of<Policy>::type& config, double scale = 0.0)
      : KvCacheAttention(Policy(config), scale) {}
  /// With rotary keys at compacted positions: the kept token of age a sits at position a, so the
  /// caller rotates a segment's queries and keys at positions size(), size() + 1, … (its tokens'
  /// ages), and whenever a cut moves a kept key from age a to age a′ < a the cache turns it by
  /// a′ − a (`rope.rotate`), as StreamingLLM's sink cache does. make_state then needs d ≥
  /// rope.dims().
  KvCacheAttention(Policy policy, double scale, Rope<Scalar> rope) : KvCacheAttention(std::move(policy), scale) {
    rope_.emplace(std::move(rope));
  }
  /// As KvCacheAttention(Policy, scale, rope), from the policy's configuration.
  KvCacheAttention(const typename detail::cache_config_of<Policy>::type& config, double scale, Rope<Scalar> rope)
      : KvCacheAttention(Policy(config), scale, std::move(rope)) {}

  /// The policy.
  const Policy& policy() const noexcept { return policy_; }
  /// The rotation kept keys get when they move (compacted positions), or nullptr.
  const Rope<Scalar>* rope() const noexcept { return rope_ ? &*rope_ : nullptr; }
  /// selected + recent: the most tokens a cache keeps between calls.
  Index budget() const noexcept { return policy_.selected() + policy_.recent(); }
  /// The scale a read with keys of width `d` uses.
  Scalar scale(Index d) const noexcept { return detail::read_scale<Scalar>(scale_, d); }

  /// An empty cache for keys of width d and values of width dv. \throws config_error if d or dv < 1
  /// or (budget + 1) × (d + dv) overflows.
  State make_state(Index d, Index dv) const {
    if (auto p = make_problem(d, dv)) detail::raise("abc::select::KvCacheAttention::make_state", p);
    return State(budget(), d, dv);
  }

  /**
   * \brief One segment of n tokens: query i attends to the kept tokens and to segment tokens 0..i;
   * the policy rescores, and the cache is cut back to its budget.
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
  template <class>
  friend class MultiHeadCache;

  detail::Problem check(const State& s, const MatrixRef<Scalar>& q, const MatrixRef<Scalar>& k,
                        const MatrixRef<Scalar>& v, Index out_rows, Index out_cols, bool vectors,
                        bool inputs_finite = false) const noexcept {
    if (s.capacity() != budget())  // a count: reported as a value
      return detail::value_problem(Status::shape_mismatch, "state.capacity()", s.capacity(), "", budget(),
                                   "selected + recent: the state must come from make_state(d, dv) of this attention");
    if (rope_ && s.key_dim() < rope_->dims())
      return detail::at_least(Status::bad_config, "state.key_dim()", s.key_dim(), rope_->dims(),
                              "the rope's dims(): the state must come from make_state(d, dv) of this attention");
    return detail::segment_problem(q, k, v, out_rows, out_cols, s.key_dim(), s.value_dim(), vectors,
                                   inputs_finite);
  }

  void run(State& s, const MatrixRef<Scalar>& q, const MatrixRef<Scalar>& k, const MatrixRef<Scalar>& v,
           MatrixOut<Scalar> out, bool vectors) const {
    if (auto p = check(s, q, k, v, out.rows(), out.cols(), vectors)) detail::raise("abc::select::KvCacheAttention", p);
    advance(s, 1, [&q](Index) { return q; }, [&out](Index) { return out; }, k, v);
  }

  // The checks of make_state(d, dv), without throwing.
  detail::Problem make_problem(Index d, Index dv) const noexcept {
    if (d < 1) return detail::at_least(Status::bad_config, "d", d, 1, "keys need a column");
    if (dv < 1) return detail::at_least(Status::bad_config, "dv", dv, 1, "values need a column");
    if (rope_ && d < rope_->dims())
      return detail::at_least(Status::bad_config, "d", d, rope_->dims(), "the rope's dims(): the entries it turns");
    Index rows = 0, width = 0, cells = 0;
    if (!detail::checked_add(budget(), Index(1), rows))
      return detail::overflow_problem("selected + recent + 1", budget(), " + ", 1);
    if (!detail::checked_add(d, dv, width)) return detail::overflow_problem("d + dv", d, " + ", dv);
    if (!detail::checked_mul(rows, width, cells))
      return detail::overflow_problem("(selected + recent + 1) × (d + dv)", rows, " × ", width);
    return {};
  }

  // Room in a cache for the mean probabilities of `heads` query heads reading it in one step
  // (MultiHeadCache), so that a grouped decode step allocates nothing either.
  static void prepare_heads(State& s, Index heads) {
    if (heads > 1) s.group_.resize(1, s.budget_ + 1);
  }

  // A checked segment read by `heads` query heads (query(h) [n × d], output(h) [n × dv]) over one
  // cache: each reads as a single head would, and the policy rescores from their mean
  // probabilities (the sum over heads in order, then divided by their count: one head's are its
  // own, bit for bit).
  template <class Query, class Output>
  void advance(State& s, Index heads, const Query& query, const Output& output, const MatrixRef<Scalar>& k,
               const MatrixRef<Scalar>& v) const {
    const Index n = k.rows(), m = s.size_, total = m + n;
    if (n == 0) return;  // no query reads, no token arrives: a policy must not rescore on nothing
    // The segment's tokens go after the kept ones, in rows that are not yet part of the value (an
    // allocation failure here leaves the cache as it was).
    s.reserve(total);
    s.keys_.middleRows(m, n) = k;
    s.values_.middleRows(m, n) = v;
    const Scalar sc = scale(s.key_dim());
    auto p = kernel::kept_read<Scalar>(query(0), s.keys_, s.values_, m, sc, s.logits_, output(0), kernel::NoBias{});
    if (heads > 1) {
      for (Index h = 1; h < heads; ++h)
        p += kernel::kept_read<Scalar>(query(h), s.keys_, s.values_, m, sc, s.group_, output(h), kernel::NoBias{});
      p /= Scalar(heads);
    }
    for (Index i = 0; i < n; ++i) {
      s.score_[std::size_t(m + i)] = 0;
      s.pos_[std::size_t(m + i)] = s.next_ + i;
    }
    policy_.update(CacheRead<Scalar>{Eigen::Map<const Matrix<Scalar>>(p.data(), n, total), m, n, s.pos_.data()},
                   s.score_.data());
    s.next_ += n;
    cut(s, total);
    if (n > 1) s.shrink();
  }

  // Back to the budget: the newest `recent` rows stay; of the older rows the `selected` highest
  // scores stay, of equal scores the newer.
  void cut(State& s, Index total) const {
    const Index budget = this->budget();
    if (total <= budget) {
      s.size_ = total;
      return;
    }
    const Index older = total - std::min(policy_.recent(), total), drop = total - budget;
    // Row a goes before row b: lower score, then older (a smaller row is an older token).
    const auto goes_first = [&s](Index a, Index b) {
      const double sa = s.score_[std::size_t(a)], sb = s.score_[std::size_t(b)];
      return sa != sb ? sa < sb : a < b;
    };
    if (drop == 1) {  // a decode step: one victim, the rows after it move up by one
      Index victim = 0;
      for (Index r = 1; r < older; ++r)
        if (goes_first(r, victim)) victim = r;
      remove_rows(s, total, [victim](Index r) { return r != victim; }, rope());
    } else {
      s.order_.resize(std::size_t(older));
      for (Index r = 0; r < older; ++r) s.order_[std::size_t(r)] = r;
      std::nth_element(s.order_.begin(), s.order_.begin() + (drop - 1), s.order_.end(), goes_first);
      s.keep_.assign(std::size_t(total), 1);
      for (Index i = 0; i < drop; ++i) s.keep_[std::size_t(s.order_[std::size_t(i)])] = 0;
      remove_rows(s, total, [&s](Index r) { return s.keep_[std::size_t(r)] != 0; }, rope());
    }
    s.size_ = budget;
  }

  // Compacts rows [0, total) to those `kept`, in order; with a rope, a key that moves up turns
  // with it (its compacted position is its row).
  template <class Kept>
  static void remove_rows(State& s, Index total, const Kept& kept, const Rope<Scalar>* rope) {
    Index w = 0;
    for (Index r = 0; r < total; ++r) {
      if (!kept(r)) continue;
      if (w != r) {
        s.keys_.row(w) = s.keys_.row(r);
        s.values_.row(w) = s.values_.row(r);
        s.score_[std::size_t(w)] = s.score_[std::size_t(r)];
        s.pos_[std::size_t(w)] = s.pos_[std::size_t(r)];
        if (rope) rope->rotate(s.keys_.row(w).data(), std::int64_t(w - r));
      }
      ++w;
    }
  }

  Policy policy_;
  double scale_;
  std::optional<Rope<Scalar>> rope_;
};

}  // namespace select
ABC_NAMESPACE_END
