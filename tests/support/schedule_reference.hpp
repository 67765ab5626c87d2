// SPDX-License-Identifier: MIT
// abc tests: a float64 plain-loop run of K̃_t = diag(a_t) K̃_{t-1} + w_t ⊗ k_t for a schedule that
// a test writes from its control's equations, and the check that every form of BoundedAttention
// (forward, forward_causal with each kernel and chunk, step, split-and-continue) matches it.
// Nothing here calls the library's kernels.
#pragma once

#include <functional>
#include <utility>
#include <vector>

#include <abc/bounded_attention.hpp>

#include "approx.hpp"
#include "catch.hpp"
#include "reference.hpp"

namespace ref {

// One token's schedule: decay a_t and write w_t, both [n].
struct Step {
  std::vector<double> a, w;
};
using ScheduleFn = std::function<Step(size_t t)>;
// Slots [first, second) query t reads; empty function: all.
using RangeFn = std::function<std::pair<size_t, size_t>(size_t t)>;

struct Memory {
  Mat keys, values;
  std::vector<bool> written;  // a non-zero write reached the slot since a zero decay last reset it
};

// Memory after tokens 0..upto-1.
inline Memory run_memory(const ScheduleFn& s, size_t n, const Mat& k, const Mat& v, size_t upto) {
  Memory m{zeros(Index(n), Index(k.empty() ? 0 : k[0].size())), zeros(Index(n), Index(v.empty() ? 0 : v[0].size())),
           std::vector<bool>(n, false)};
  for (size_t t = 0; t < upto; ++t) {
    const Step st = s(t);
    for (size_t l = 0; l < n; ++l) {
      for (size_t c = 0; c < k[t].size(); ++c) m.keys[l][c] = st.a[l] * m.keys[l][c] + st.w[l] * k[t][c];
      for (size_t c = 0; c < v[t].size(); ++c) m.values[l][c] = st.a[l] * m.values[l][c] + st.w[l] * v[t][c];
      if (st.w[l] != 0)
        m.written[l] = true;
      else if (st.a[l] == 0)
        m.written[l] = false;  // reset and not written: the slot holds nothing
    }
  }
  return m;
}

inline std::vector<bool> readable(const Memory& m, const RangeFn& range, size_t t) {
  std::vector<bool> r = m.written;
  if (range) {
    const auto rr = range(t);
    for (size_t l = 0; l < r.size(); ++l) r[l] = r[l] && l >= rr.first && l < rr.second;
  }
  return r;
}

// Causal: output t reads the memory of tokens 0..t (recomputed from scratch for every t).
inline Mat recurrence_causal(const ScheduleFn& s, size_t n, const Mat& q, const Mat& k, const Mat& v, double scale,
                             const RangeFn& range = {}) {
  Mat out;
  for (size_t t = 0; t < q.size(); ++t) {
    const Memory m = run_memory(s, n, k, v, t + 1);
    out.push_back(read(q[t], m.keys, m.values, readable(m, range, t), scale));
  }
  return out;
}

// Non-causal: every query i reads the final memory (within range(i)).
inline Mat recurrence_noncausal(const ScheduleFn& s, size_t n, const Mat& q, const Mat& k, const Mat& v,
                                double scale, const RangeFn& range = {}) {
  const Memory m = run_memory(s, n, k, v, k.size());
  Mat out;
  for (size_t i = 0; i < q.size(); ++i) out.push_back(read(q[i], m.keys, m.values, readable(m, range, i), scale));
  return out;
}

// A one-hot write on slot `slot` with weight `w`, decay `a_slot` there and 1 elsewhere.
inline Step one_hot(size_t n, long slot, double w, double a_slot = 1.0) {
  Step s{std::vector<double>(n, 1.0), std::vector<double>(n, 0.0)};
  if (slot >= 0) {
    s.a[size_t(slot)] = a_slot;
    s.w[size_t(slot)] = w;
  }
  return s;
}

inline abc::Options kernel_options(abc::CausalKernel k, Index chunk) {
  abc::Options o;
  o.causal_kernel = k;
  o.chunk = chunk;
  return o;
}

// Every causal form of `control` against `want` (the reference's causal outputs): forward_causal
// with the automatic, chunked and recurrent kernels at chunks 64 and 7, a step loop, and
// forward_causal split at several positions and continued from the carried state. `x` (if not
// null) is the control input.
template <class Control, class T = typename Control::scalar_type>
void require_causal_forms(const Control& control, const abc::Matrix<T>& q, const abc::Matrix<T>& k,
                          const abc::Matrix<T>& v, const Mat& want, const abc::Matrix<T>* x = nullptr) {
  const Index n_tok = q.rows();
  for (auto kernel : {abc::CausalKernel::automatic, abc::CausalKernel::chunked, abc::CausalKernel::recurrent})
    for (Index chunk : {Index(64), Index(7)}) {
      abc::BoundedAttention<Control> attn{control, kernel_options(kernel, chunk)};
      INFO("kernel " << int(kernel) << ", chunk " << chunk);
      if (x)
        require_close(attn.forward_causal(q, k, v, *x), want);
      else
        require_close(attn.forward_causal(q, k, v), want);
      for (Index split : {Index(1), Index(5), n_tok / 2, n_tok - 1}) {
        if (split < 0 || split > n_tok) continue;
        auto state = attn.make_state(k.cols(), v.cols());
        abc::Matrix<T> out(n_tok, v.cols());
        const Index rest = n_tok - split;
        if (x) {
          out.topRows(split) = attn.forward_causal(state, q.topRows(split), k.topRows(split), v.topRows(split), x->topRows(split));
          out.bottomRows(rest) = attn.forward_causal(state, q.bottomRows(rest), k.bottomRows(rest), v.bottomRows(rest), x->bottomRows(rest));
        } else {
          out.topRows(split) = attn.forward_causal(state, q.topRows(split), k.topRows(split), v.topRows(split));
          out.bottomRows(rest) = attn.forward_causal(state, q.bottomRows(rest), k.bottomRows(rest), v.bottomRows(rest));
        }
        INFO("split at " << split);
        require_close(out, want);
        REQUIRE(state.position() == n_tok);
      }
    }
  abc::BoundedAttention<Control> attn{control};
  auto state = attn.make_state(k.cols(), v.cols());
  abc::Matrix<T> out(n_tok, v.cols());
  for (Index t = 0; t < n_tok; ++t) {
    if (x)
      out.row(t) = attn.step(state, q.row(t).transpose(), k.row(t).transpose(), v.row(t).transpose(),
                             x->row(t).transpose()).transpose();
    else
      out.row(t) = attn.step(state, q.row(t).transpose(), k.row(t).transpose(), v.row(t).transpose()).transpose();
  }
  INFO("step loop");
  require_close(out, want);
}

}  // namespace ref
