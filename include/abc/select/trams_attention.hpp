// SPDX-License-Identifier: MIT
// abc: bounded-memory attention. select::TramsAttention, a FIFO KV pool read through a top-k
// selection by a query-independent score (TRAMS).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "../detail/check.hpp"
#include "../detail/segment_check.hpp"
#include "../kernel/census.hpp"
#include "../kernel/kept_read.hpp"
#include "../error.hpp"
#include "../options.hpp"
#include "../types.hpp"
#include "key_score.hpp"

ABC_NAMESPACE_BEGIN
namespace detail {
struct TramsStateAccess;  // serialisation's door to a pool (abc/select/state_io.hpp)
}  // namespace detail
namespace select {
template <class Attention>
class MultiHeadCache;

/// Which distance a position term sees for a kept key; the released TRAMS code uses compacted ones.
enum class PositionMode {
  compacted,  ///< the released code: kept keys get the distances of a contiguous sequence (default)
  original,   ///< the true distance between the query's and the key's positions
};

/// Sizes of a TRAMS cache. Released configuration: pool 400, recent 150, topk 50.
struct TramsConfig {
  Index pool = 400;    ///< M: the last M tokens are kept (FIFO), O(M · (d + dv)) state
  Index recent = 150;  ///< R: the newest R pool tokens are always attended
  Index topk = 50;     ///< K: attended among the M − R older ones, by score; K ≤ M − R
  /// The distance a position term sees for a kept key (see TramsAttention::distances()).
  PositionMode positions = PositionMode::compacted;
  double scale = 0.0;  ///< softmax scale; 0 means 1/sqrt(d)
};

/**
 * \brief TRAMS (Yu et al. 2023): every query attends to the `recent` newest pool tokens and to the
 * `topk` older pool tokens with the highest query-independent score, in temporal order, plus (for
 * a segment) the segment's own tokens causally.
 *
 * The pool is a FIFO of the last `pool` tokens with each key's score, computed once at insertion
 * (KeyScore). Selection is recomputed for every segment from the pool as it was before the segment
 * (an O(M) partial sort); ties go to the higher score, then to the newer token. The segment is then
 * pushed into the pool. A pool not yet full is read as it is (no zero memories): the selection
 * takes at most the tokens that exist.
 *
 * The read is exact softmax attention over the kept set: the gathered keys are one-hot slots of an
 * ABC memory, read by the core's softmax over slots (kernel::softmax_slots) with the segment's
 * causal limit as the readable range. `step` is a segment of one token (it reselects every token).
 *
 * Position terms (Transformer-XL) are the caller's: `distances` reports, per query and kept key,
 * the compacted or the original distance, and `segment(…, bias)` adds bias(i, distance) to the
 * logits.
 *
 * \tparam Scalar float or double.
 */
template <class Scalar = float>
class TramsAttention {
 public:
  /// float or double.
  using scalar_type = Scalar;

 private:
  // An older pool token as the top-k selection ranks it: its score and age.
  struct Ranked {
    Scalar score;
    Index age;
  };

 public:
  /// The pool of one sequence and head: a ring of the last `pool` keys, values, scores and
  /// positions. O(pool · (d + dv)), flat in the stream's length.
  class State {
   public:
    State() = default;
    Index size() const noexcept { return size_; }          ///< tokens in the pool, ≤ capacity
    /// M, the pool size (config().pool); 0 for a default-constructed State.
    Index capacity() const noexcept { return keys_.rows(); }
    /// d, the key width.
    Index key_dim() const noexcept { return keys_.cols(); }
    /// dv, the value width.
    Index value_dim() const noexcept { return values_.cols(); }
    std::int64_t position() const noexcept { return next_; }  ///< tokens consumed so far
    /// The key [d] of the pool token of age `age` (0 = oldest); unchecked: 0 ≤ age < size().
    auto key(Index age) const { return keys_.row(slot(age)); }
    /// The value [dv] of the pool token of age `age`; unchecked: 0 ≤ age < size().
    auto value(Index age) const { return values_.row(slot(age)); }
    /// The score of the pool token of age `age`, computed when it entered the pool.
    Scalar score(Index age) const { return scores_[std::size_t(slot(age))]; }
    /// The stream position of the pool token of age `age`.
    std::int64_t token_position(Index age) const { return pos_[std::size_t(slot(age))]; }
    /// Bytes of memory the pool holds, its read work space included: O(pool · (d + dv)).
    std::size_t bytes() const noexcept {
      return sizeof(Scalar) * std::size_t(keys_.size() + values_.size() + gather_keys_.size() +
                                           gather_values_.size() + logits_.size()) +
             scores_.size() * sizeof(Scalar) + pos_.size() * sizeof(std::int64_t) +
             order_.size() * sizeof(Index) + rank_.size() * sizeof(Ranked) + sizeof(*this);
    }
    /// Empties the pool, back to position 0; capacity and widths are kept.
    void reset() noexcept {
      head_ = size_ = 0;
      next_ = 0;
    }

   private:
    friend class TramsAttention;
    friend struct detail::TramsStateAccess;
    State(Index pool, Index d, Index dv)
        : keys_(Matrix<Scalar>::Zero(pool, d)), values_(Matrix<Scalar>::Zero(pool, dv)),
          scores_(std::size_t(pool)), pos_(std::size_t(pool)) {}
    // head_ and age are below the capacity: one conditional subtraction, not a division.
    Index slot(Index age) const noexcept {
      const Index r = head_ + age, cap = keys_.rows();
      return r < cap ? r : r - cap;
    }
    // After a segment: the read's work space (m + n gathered rows, an n × (m + n) read) goes back
    // to what a step needs (no gathered rows: a step reads the ring in place), so a pool holds
    // O(pool) between calls. Only an economy: if an allocation fails, the larger buffers stay.
    void shrink(Index step_rows) noexcept {
      if (gather_keys_.rows() == 0 && logits_.size() <= step_rows) return;
      try {
        gather_keys_.resize(0, gather_keys_.cols());
        gather_values_.resize(0, gather_values_.cols());
        logits_.resize(1, step_rows);
      } catch (...) {  // a failed shrink leaves larger, valid buffers
      }
    }
    // NOLINTNEXTLINE(bugprone-easily-swappable-parameters): private: a kept token's key, value and score
    void push(const Scalar* k, const Scalar* v, Scalar s) {
      const Index cap = keys_.rows();
      Index r;
      if (size_ < cap) {
        r = (head_ + size_) % cap;
        ++size_;
      } else {  // full: the oldest token leaves
        r = head_;
        head_ = (head_ + 1) % cap;
      }
      keys_.row(r) = Eigen::Map<const Eigen::Matrix<Scalar, 1, Eigen::Dynamic>>(k, keys_.cols());
      values_.row(r) = Eigen::Map<const Eigen::Matrix<Scalar, 1, Eigen::Dynamic>>(v, values_.cols());
      scores_[std::size_t(r)] = s;
      pos_[std::size_t(r)] = next_++;
    }

    Matrix<Scalar> keys_, values_;
    std::vector<Scalar> scores_;
    std::vector<std::int64_t> pos_;
    Index head_ = 0, size_ = 0;
    std::int64_t next_ = 0;
    // Work space of a read, kept so a step allocates nothing once warm; not part of the value.
    Matrix<Scalar> gather_keys_, gather_values_, logits_;
    std::vector<Index> order_;
    std::vector<Ranked> rank_;
    // The last selection's K-th best older score: where the next one looks first (a hint, not part
    // of the value; any value is correct, a near one is fast).
    Scalar cut_ = Scalar(0);
  };

  /// \throws config_error if pool < 1, recent or topk < 0, recent + topk > pool, or the scale is
  /// not finite and positive (0: 1/sqrt(d)).
  TramsAttention(TramsConfig config, KeyScore<Scalar> score) : cfg_(config), score_(std::move(score)) {
    constexpr const char* who = "abc::select::TramsAttention";
    using detail::at_least;
    detail::Problem p;
    if (cfg_.pool < 1)
      p = at_least(Status::bad_config, "config.pool", cfg_.pool, 1, "the pool holds at least one token");
    else if (cfg_.recent < 0)
      p = at_least(Status::bad_config, "config.recent", cfg_.recent, 0, "a token count");
    else if (cfg_.topk < 0)
      p = at_least(Status::bad_config, "config.topk", cfg_.topk, 0, "a token count");
    else if (detail::require_sum(who, "config.recent + config.topk", cfg_.recent, cfg_.topk) > cfg_.pool)
      p = detail::value_problem(Status::bad_config, "config.recent + config.topk", cfg_.recent + cfg_.topk,
                                "at most ", cfg_.pool,
                                "config.pool: the attended tokens are chosen from the pool");
    if (p) detail::raise(who, p);
    detail::require_scale(who, "config.scale", cfg_.scale);
  }

  /// The cache sizes, as given to the constructor.
  const TramsConfig& config() const noexcept { return cfg_; }
  /// The score that ranks the older pool tokens.
  const KeyScore<Scalar>& score() const noexcept { return score_; }
  /// The scale a read with keys of width `d` uses.
  Scalar scale(Index d) const noexcept { return detail::read_scale<Scalar>(cfg_.scale, d); }

  /// An empty pool for keys of width d and values of width dv. \throws config_error if d or dv < 1
  /// (sizes, not data: zero-width q, k or v in a call are shape_errors naming them), shape_error if
  /// d is not the score's key_dim() (> 0).
  State make_state(Index d, Index dv) const {
    if (auto p = make_problem(d, dv)) detail::raise("abc::select::TramsAttention::make_state", p);
    return State(cfg_.pool, d, dv);
  }

  /**
   * \brief The pool ages (0 = oldest) a segment starting now attends to before its own tokens:
   * the selected old ones, then the recent ones, ascending (temporal order).
   */
  std::vector<Index> attended(const State& s) const {
    std::vector<Index> a;
    std::vector<Ranked> rank;
    select_into(s, a, rank, s.cut_);
    return a;
  }

  /**
   * \brief One segment of n tokens: query i attends to the selected and recent pool tokens and to
   * segment tokens 0..i; then the segment enters the pool.
   * \param s a pool from make_state(d, dv) of this attention; the segment enters it
   * \param q [n × d], \param k [n × d], \param v [n × dv]; \return [n × dv]
   * \throws shape_error, config_error; a call that throws leaves the pool unchanged.
   */
  Matrix<Scalar> segment(State& s, MatrixRef<Scalar> q, MatrixRef<Scalar> k, MatrixRef<Scalar> v) const {
    Matrix<Scalar> out(q.rows(), v.cols());
    run(s, q, k, v, out, NoBias{});
    return out;
  }
  /// As segment(s, q, k, v), adding `bias(i, distance)` to the logit of query i and each kept key
  /// (a relative-position term), the distance as `config().positions` says (see distances()).
  template <class Bias>
  Matrix<Scalar> segment(State& s, MatrixRef<Scalar> q, MatrixRef<Scalar> k, MatrixRef<Scalar> v,
                         const Bias& bias) const {
    Matrix<Scalar> out(q.rows(), v.cols());
    run(s, q, k, v, out, bias);
    return out;
  }
  /// As segment(s, q, k, v), into a caller-owned `out` [n × dv].
  void segment_into(State& s, MatrixRef<Scalar> q, MatrixRef<Scalar> k, MatrixRef<Scalar> v,
                    MatrixOut<Scalar> out) const {
    run(s, q, k, v, out, NoBias{});
  }

  /// One token: a segment of length 1 (the selection is redone for every token). q, k [d], v [dv].
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
    run(s, RowMap(q.data(), 1, q.size()), RowMap(k.data(), 1, k.size()), RowMap(v.data(), 1, v.size()), o,
        NoBias{}, true);
  }

  /**
   * \brief The distance each query of an n-token segment starting now sees for each key it may
   * read: [n × (m′ + n)], m′ = attended(s).size(), keys in read order (kept, then the segment).
   * Compacted: m′ + i − a for list index a (the released code's contiguous positions); original:
   * the query's position minus the key's. Negative entries are the segment's future (masked).
   * \throws config_error if n < 0, or if m′ + n or n · (m′ + n) overflows Index.
   */
  Eigen::Matrix<std::int64_t, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor> distances(const State& s,
                                                                                        Index n) const {
    constexpr const char* who = "abc::select::TramsAttention::distances";
    if (n < 0) detail::raise(who, detail::at_least(Status::bad_config, "n", n, 0, "a token count"));
    const std::vector<Index> a = attended(s);
    // The shape is checked before it is formed: a count from the caller may be absurd.
    const Index width = detail::require_sum(who, "attended(state).size() + n", Index(a.size()), n);
    detail::require_product(who, "n × (attended(state).size() + n)", n, width);
    Eigen::Matrix<std::int64_t, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor> dist(n, width);
    fill_distances(s, a, n, dist);
    return dist;
  }

 private:
  template <class>
  friend class MultiHeadCache;
  struct NoBias {};

  using Census = kernel::Census<Scalar>;

  // The older tokens (ages 0 … old − 1) lie in the ring as two runs: ages [0, first) from slot
  // head_ on, the rest from slot 0.
  static Index first_run(const State& s, Index old) noexcept { return std::min(old, s.capacity() - s.head_); }

  // f(score, age) for the older tokens, ages ascending.
  template <class F>
  static void for_older(const State& s, Index old, const F& f) {
    const Scalar* score = s.scores_.data();
    const Index first = first_run(s, old);
    for (Index a = 0; a < first; ++a) f(score[s.head_ + a], a);
    for (Index a = first; a < old; ++a) f(score[a - first], a);
  }

  // How the older tokens' scores fall about θ (kernel::add_census over the ring's two runs).
  static Census census(const State& s, Index old, Scalar theta) {
    Census c;
    const Index first = first_run(s, old);
    kernel::add_census(s.scores_.data() + s.head_, first, theta, c);
    kernel::add_census(s.scores_.data(), old - first, theta, c);
    return c;
  }

  // The K-th best older score, looked for at `cut` (the last selection's) and then at the nearest
  // score on the side the K-th moved to: between two steps one token joins the older ones and at
  // most one leaves, so one of the two is it unless the scores changed more. On success `cut` is it
  // and `c` its census; false when a score is NaN or neither was it.
  static bool find_cut(const State& s, Index old, Index k, Scalar& cut, Census& c) {
    c = census(s, old, cut);
    if (c.above + c.at + c.below != old) return false;
    if (c.above < k && k <= c.above + c.at) return true;
    cut = c.above >= k ? c.up : c.down;
    c = census(s, old, cut);
    return c.above < k && k <= c.above + c.at;
  }

  // Ages of the selected old tokens (top-k by score, ties to the newer), then the recent ones, into
  // `out`; `rank` is work space. Returns the K-th best older score (the next selection's hint,
  // `cut` this one's). With that score θ the selection is every older score above θ and the newest
  // of those at θ, found in order by one pass: two counting passes and that one replace a partial
  // sort in most steps of a stream. Otherwise (a far hint, or a NaN score) the older tokens'
  // (score, age) pairs are copied out of the ring once and partially sorted, and the selected ages
  // come out ascending by one pass of marks.
  Scalar select_into(const State& s, std::vector<Index>& out, std::vector<Ranked>& rank, Scalar cut) const {
    const Index recent = std::min(cfg_.recent, s.size_), old = s.size_ - recent;
    const Index k = std::min(cfg_.topk, old);
    out.clear();
    Census c;
    if (k == old) {
      for (Index a = 0; a < old; ++a) out.push_back(a);
    } else if (k > 0 && find_cut(s, old, k, cut, c)) {
      // Every score above the cut, and the last k − above of the c.at at it (the newest).
      out.resize(std::size_t(old));
      Index kept = 0, ties = 0;
      const Index skip = c.at - (k - c.above);
      for_older(s, old, [&](Scalar x, Index a) {
        const bool tie = x == cut;
        out[std::size_t(kept)] = a;
        kept += (x > cut) | (tie & (ties >= skip));
        ties += tie;
      });
      out.resize(std::size_t(kept));
    } else if (k > 0) {
      rank.resize(std::size_t(old));
      for (Index a = 0; a < old; ++a) rank[std::size_t(a)] = Ranked{s.score(a), a};
      // A strict total order: score, then newer (larger age).
      const auto better = [](const Ranked& x, const Ranked& y) {
        return x.score != y.score ? x.score > y.score : x.age > y.age;
      };
      std::nth_element(rank.begin(), rank.begin() + (k - 1), rank.end(), better);
      cut = rank[std::size_t(k - 1)].score;
      out.assign(std::size_t(old), 0);
      for (Index i = 0; i < k; ++i) out[std::size_t(rank[std::size_t(i)].age)] = 1;
      Index kept = 0;
      for (Index a = 0; a < old; ++a)
        if (out[std::size_t(a)] != 0) out[std::size_t(kept++)] = a;
      out.resize(std::size_t(kept));
    }
    for (Index a = old; a < s.size_; ++a) out.push_back(a);
    return cut;
  }

  template <class Dist>
  void fill_distances(const State& s, const std::vector<Index>& a, Index n, Dist& dist) const {
    const Index m = Index(a.size());
    for (Index i = 0; i < n; ++i) {
      for (Index j = 0; j < m; ++j)
        dist(i, j) = cfg_.positions == PositionMode::compacted
                         ? std::int64_t(m + i - j)
                         : s.next_ + std::int64_t(i) - s.token_position(a[std::size_t(j)]);
      for (Index j = 0; j < n; ++j) dist(i, m + j) = std::int64_t(i - j);
    }
  }

  // The pool's own checks, then the segment's (detail::segment_problem).
  detail::Problem check(const State& s, const MatrixRef<Scalar>& q, const MatrixRef<Scalar>& k,
                        const MatrixRef<Scalar>& v, Index out_rows, Index out_cols, bool vectors,
                        bool inputs_finite = false) const noexcept {
    const Index d = s.key_dim(), dv = s.value_dim();
    if (s.capacity() != cfg_.pool)  // a count: reported as a value, not as a [capacity x d] shape
      return detail::value_problem(Status::shape_mismatch, "state.capacity()", s.capacity(), "", cfg_.pool,
                                   "config.pool: the state must come from make_state(d, dv) of this attention");
    if (score_.key_dim() > 0 && score_.key_dim() != d)
      return detail::value_problem(Status::shape_mismatch, "score.key_dim()", score_.key_dim(), "", d,
                                   "the score's W_Q has one row per key entry: the state's key width");
    return detail::segment_problem(q, k, v, out_rows, out_cols, d, dv, vectors, inputs_finite);
  }

  template <class Bias>
  void run(State& s, const MatrixRef<Scalar>& q, const MatrixRef<Scalar>& k, const MatrixRef<Scalar>& v,
           MatrixOut<Scalar> out, const Bias& bias, bool vectors = false) const {
    if (auto p = check(s, q, k, v, out.rows(), out.cols(), vectors)) detail::raise("abc::select::TramsAttention", p);
    advance(s, 1, [&q](Index) { return q; }, [&out](Index) { return out; }, k, v, bias);
  }

  // The checks of make_state(d, dv), without throwing.
  detail::Problem make_problem(Index d, Index dv) const noexcept {
    if (d < 1) return detail::at_least(Status::bad_config, "d", d, 1, "keys need a column");
    if (dv < 1) return detail::at_least(Status::bad_config, "dv", dv, 1, "values need a column");
    if (score_.key_dim() > 0 && d != score_.key_dim())
      return detail::value_problem(Status::shape_mismatch, "d", d, "exactly ", score_.key_dim(),
                                   "the key width must be the rows of the score's W_Q");
    Index width = 0, cells = 0;  // config.pool × (d + dv) entries
    if (!detail::checked_add(d, dv, width)) return detail::overflow_problem("d + dv", d, " + ", dv);
    if (!detail::checked_mul(cfg_.pool, width, cells))
      return detail::overflow_problem("config.pool × (d + dv)", cfg_.pool, " × ", width);
    return {};
  }

  // A pool's selection needs no room per query head.
  static void prepare_heads(State&, Index) noexcept {}

  // A checked segment read by `heads` query heads (query(h) [n × d], output(h) [n × dv]): the
  // selection is the keys' (query-independent), so every head reads the same gathered tokens.
  template <class Query, class Output, class Bias = NoBias>
  void advance(State& s, Index heads, const Query& query, const Output& output, const MatrixRef<Scalar>& k,
               const MatrixRef<Scalar>& v, const Bias& bias = {}) const {
    const Index n = k.rows(), d = s.key_dim(), dv = s.value_dim();
    std::vector<Index>& a = s.order_;
    s.cut_ = select_into(s, a, s.rank_, s.cut_);
    const Index m = Index(a.size()), keys = m + n;
    // The read, over [kept ; segment] (kernel::kept_read): a short segment (a decode step) reads the
    // kept rows in the ring where they are; a longer one reads them through blocked products, which
    // take them gathered into one block.
    const auto read = [&](const auto& add) {
      if (n < kernel::kept_read_blocked) {
        // Row j of [kept ; segment]: a kept token's in the ring, or the segment's own.
        const auto rows_of = [&s, &a, m](const Matrix<Scalar>& ring, const MatrixRef<Scalar>& segment) {
          return [&s, &a, &ring, &segment, m](Index j) -> const Scalar* {
            return j < m ? ring.row(s.slot(a[std::size_t(j)])).data()
                         : segment.data() + (j - m) * segment.outerStride();
          };
        };
        for (Index h = 0; h < heads; ++h)
          kernel::kept_read_at<Scalar>(query(h), rows_of(s.keys_, k), rows_of(s.values_, v), m, scale(d), s.logits_,
                                       output(h), add);
        return;
      }
      s.gather_keys_.resize(keys, d);
      s.gather_values_.resize(keys, dv);
      for (Index j = 0; j < m; ++j) {
        s.gather_keys_.row(j) = s.key(a[std::size_t(j)]);
        s.gather_values_.row(j) = s.value(a[std::size_t(j)]);
      }
      s.gather_keys_.bottomRows(n) = k;
      s.gather_values_.bottomRows(n) = v;
      for (Index h = 0; h < heads; ++h)
        kernel::kept_read<Scalar>(query(h), s.gather_keys_, s.gather_values_, m, scale(d), s.logits_, output(h), add);
    };
    if constexpr (std::is_same<Bias, NoBias>::value) {
      read(kernel::NoBias{});
    } else {
      Eigen::Matrix<std::int64_t, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor> dist(n, keys);
      fill_distances(s, a, n, dist);
      read([&](Index i, Index j, Scalar& logit) { logit += static_cast<Scalar>(bias(i, dist(i, j))); });
    }
    for (Index i = 0; i < n; ++i) s.push(k.row(i).data(), v.row(i).data(), score_(k.row(i).data(), d));
    if (n > 1) s.shrink(std::min(cfg_.recent + cfg_.topk, s.size_) + 1);
  }

  TramsConfig cfg_;
  KeyScore<Scalar> score_;
};

}  // namespace select
ABC_NAMESPACE_END
