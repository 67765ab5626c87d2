// SPDX-License-Identifier: MIT
// abc tests: the float64 reference of select::KvCacheAttention's three policies, with plain loops
// from their rules: read every kept token and the segment causally; score (H2O: add each query's
// probabilities to the masses of what it read; sinks: minus the position; SnapKV: a prompt's last
// queries vote, pooled, a decoded token −∞); keep the `recent` newest and the highest scores among
// the rest (of equal scores the newer). Query heads sharing a cache score by their mean
// probabilities.
#pragma once

#include <abc/select/attention_sinks.hpp>
#include <abc/select/heavy_hitters.hpp>
#include <abc/select/snap_kv.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <vector>

#include "reference.hpp"

namespace kvref {

using abc::Index;
using abc::select::AttentionSinks;
using abc::select::HeavyHitters;
using abc::select::SnapKv;

struct RefToken {
  std::int64_t pos;
  std::vector<double> k, v;
  double score;
};

// RoPE from its definition: pair j of the first `dims` entries, (j, j + dims/2) or (2j, 2j + 1),
// turned by the angle position · base^(−2j / dims).
inline std::vector<double> rope(std::vector<double> x, double position, size_t dims, double base, bool interleaved) {
  for (size_t j = 0; j < dims / 2; ++j) {
    const size_t a = interleaved ? 2 * j : j, b = interleaved ? 2 * j + 1 : j + dims / 2;
    const double angle = position * std::pow(base, -2.0 * double(j) / double(dims));
    const double xa = x[a], xb = x[b];
    x[a] = xa * std::cos(angle) - xb * std::sin(angle);
    x[b] = xa * std::sin(angle) + xb * std::cos(angle);
  }
  return x;
}

// The rules of the three policies, written from their papers' descriptions.
enum class Rule { h2o, sinks, snapkv };

// The reference cache. follow(): before a segment, keep exactly the tokens at the given positions
// (a float cache's own decisions, whose near-tied scores may rank differently from float64's).
struct RefCache {
  Rule rule = Rule::h2o;
  size_t selected = 0, recent = 0;
  double scale = 1;
  size_t window = 0, kernel = 1;  // SnapKV
  bool max_pool = false;
  std::vector<RefToken> kept;
  std::int64_t next = 0;
  std::map<std::int64_t, RefToken> seen;  // every token by position, with its score while kept
  // RoPE at compacted positions (rope_dims > 0): keys are kept unrotated and each read turns kept
  // token j to position j and query i and segment token i to kept + i.
  size_t rope_dims = 0;
  double rope_base = 10000;
  bool rope_interleaved = false;

  ref::Mat segment(const ref::Mat& q, const ref::Mat& k, const ref::Mat& v) { return segment_heads({q}, k, v)[0]; }

  // A segment read by g query heads sharing the cache: each reads as one head would, and the
  // policy scores from their mean probabilities.
  std::vector<ref::Mat> segment_heads(const std::vector<ref::Mat>& qs, const ref::Mat& k, const ref::Mat& v) {
    const size_t m = kept.size(), n = k.size(), g = qs.size();
    std::vector<RefToken> all = kept;
    for (size_t i = 0; i < n; ++i) all.push_back({next + std::int64_t(i), k[i], v[i], 0.0});
    std::vector<ref::Mat> outs(g);
    ref::Mat p(n, std::vector<double>(m + n, 0.0));
    for (size_t h = 0; h < g; ++h) {
      const ref::Mat& q = qs[h];
      for (size_t i = 0; i < n; ++i) {
        const size_t readable = m + i + 1;
        std::vector<double> logit(readable);
        double mx = -std::numeric_limits<double>::infinity();
        for (size_t j = 0; j < readable; ++j) {
          logit[j] = rope_dims == 0 ? scale * ref::dot(q[i], all[j].k)
                                    : scale * ref::dot(rope(q[i], double(m + i), rope_dims, rope_base, rope_interleaved),
                                                       rope(all[j].k, double(j), rope_dims, rope_base, rope_interleaved));
          mx = std::max(mx, logit[j]);
        }
        double sum = 0;
        for (size_t j = 0; j < readable; ++j) sum += std::exp(logit[j] - mx);
        std::vector<double> o(v[0].size(), 0.0);
        for (size_t j = 0; j < readable; ++j) {
          const double pij = std::exp(logit[j] - mx) / sum;
          p[i][j] += pij / double(g);
          for (size_t c = 0; c < o.size(); ++c) o[c] += pij * all[j].v[c];
        }
        outs[h].push_back(o);
      }
    }
    rescore(all, p, m, n);
    next += std::int64_t(n);
    for (const RefToken& t : all) seen[t.pos] = t;  // every score as it stands, the evicted' included
    const size_t budget = selected + recent;
    if (all.size() > budget) {
      const size_t older = all.size() - std::min(recent, all.size()), drop = all.size() - budget;
      std::vector<size_t> order(older);
      for (size_t i = 0; i < older; ++i) order[i] = i;
      std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
        return all[a].score != all[b].score ? all[a].score < all[b].score : all[a].pos < all[b].pos;
      });
      std::vector<bool> keep(all.size(), true);
      for (size_t i = 0; i < drop; ++i) keep[order[i]] = false;
      std::vector<RefToken> survivors;
      for (size_t i = 0; i < all.size(); ++i)
        if (keep[i]) survivors.push_back(all[i]);
      all = survivors;
    }
    kept = all;
    return outs;
  }

  void rescore(std::vector<RefToken>& all, const ref::Mat& p, size_t m, size_t n) const {
    const double inf = std::numeric_limits<double>::infinity();
    switch (rule) {
      case Rule::h2o:  // every probability adds to the mass of the token it went to
        for (size_t i = 0; i < n; ++i)
          for (size_t j = 0; j < m + n; ++j) all[j].score += p[i][j];
        break;
      case Rule::sinks:  // earlier is better
        for (size_t j = m; j < m + n; ++j) all[j].score = -double(all[j].pos);
        break;
      case Rule::snapkv: {
        if (n == 1) {  // a decoded token: only the decode window keeps it
          all[m].score = -inf;
          break;
        }
        // A prompt: the last w queries vote for every earlier token; votes pooled over the kernel.
        const size_t w = std::min(window, n), voted = m + n - w, half = kernel / 2;
        std::vector<double> votes(voted, 0.0);
        for (size_t j = 0; j < voted; ++j)
          for (size_t i = n - w; i < n; ++i) votes[j] += p[i][j];
        for (size_t j = 0; j < voted; ++j) {
          double acc = max_pool ? -inf : 0.0;
          for (size_t t = (j >= half ? j - half : 0); t <= std::min(voted - 1, j + half); ++t)
            acc = max_pool ? std::max(acc, votes[t]) : acc + votes[t];
          all[j].score = max_pool ? acc : acc / double(kernel);
        }
        for (size_t j = voted; j < m + n; ++j) all[j].score = inf;
        break;
      }
    }
  }

  void follow(const std::vector<std::int64_t>& positions) {
    kept.clear();
    for (std::int64_t p : positions) kept.push_back(seen.at(p));
  }
};

inline RefCache make_ref(Rule rule, Index selected, Index recent, Index d) {
  RefCache r;
  r.rule = rule;
  r.selected = size_t(selected);
  r.recent = size_t(recent);
  r.scale = 1.0 / std::sqrt(double(d));
  return r;
}
template <class T>
RefCache ref_cache(const HeavyHitters<T>& p, Index d) {
  return make_ref(Rule::h2o, p.selected(), p.recent(), d);
}
template <class T>
RefCache ref_cache(const AttentionSinks<T>& p, Index d) {
  return make_ref(Rule::sinks, p.selected(), p.recent(), d);
}
template <class T>
RefCache ref_cache(const SnapKv<T>& p, Index d) {
  const auto& c = p.config();
  RefCache r = make_ref(Rule::snapkv, c.capacity, c.recent, d);
  r.window = size_t(c.window);
  r.kernel = size_t(c.kernel);
  r.max_pool = c.pooling == abc::select::Pooling::max;
  return r;
}

template <class State>
std::vector<std::int64_t> kept_positions(const State& s) {
  std::vector<std::int64_t> p;
  for (Index a = 0; a < s.size(); ++a) p.push_back(s.token_position(a));
  return p;
}

inline std::vector<std::int64_t> kept_positions(const RefCache& r) {
  std::vector<std::int64_t> p;
  for (const RefToken& t : r.kept) p.push_back(t.pos);
  return p;
}

}  // namespace kvref
