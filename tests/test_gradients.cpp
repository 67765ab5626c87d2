// SPDX-License-Identifier: MIT
// abc tests: BoundedAttention::backward and backward_causal against central finite differences of
// the forward pass, in double: every softmax-readout control, non-causal, causal and split in two
// pieces (the second continuing the first's state, with a loss that also reads the final state),
// at sizes that are not multiples of the chunk.
#include <abc/abc.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "support/catch.hpp"

// A named namespace: the suite may be built as one unity translation unit.
namespace gradients_test {

using M = abc::Matrix<double>;
using abc::Index;

M randn(Index rows, Index cols, std::uint64_t seed, double scale = 1.0) {
  std::mt19937_64 gen(seed);
  std::normal_distribution<double> dist(0.0, scale);
  M m(rows, cols);
  for (Index i = 0; i < m.size(); ++i) m.data()[i] = dist(gen);
  return m;
}

enum class Form { non_causal, causal, split };

const char* name(Form f) {
  switch (f) {
    case Form::non_causal: return "non-causal";
    case Form::causal: return "causal";
    case Form::split: return "split";
  }
  return "";
}

// Sizes that leave a partial chunk (chunk 4), a split inside a chunk, and widths of no SIMD multiple.
constexpr Index kTokens = 11, kQueries = 7, kSplit = 6, kD = 3, kDv = 4, kChunk = 4;

// What the loss reads and what the test perturbs: the inputs and the control's parameters.
struct Args {
  M q, k, v, x;
  std::vector<M> params;
};

// The loss L = Σ dout ⊙ out, plus, in the split form, Σ gk ⊙ K̃ + Σ gv ⊙ Ṽ (+ Σ gz ⊙ z) of the
// state the second piece leaves: a loss that reads the final state, so d_end is exercised.
struct Weights {
  M dout, gk, gv, gz;
};

template <class Make>
struct Case {
  Make make;  // params → BoundedAttention
  bool with_x = false;
  bool reads_norm = false;  // the loss reads the state's log-normaliser (ABC-MLP)

  double loss(const Args& a, Form form, const Weights& w) const {
    const auto attn = make(a.params);
    if (form == Form::non_causal) {
      const M out = with_x ? attn.forward(a.q, a.k, a.v, a.x) : attn.forward(a.q, a.k, a.v);
      return (w.dout.array() * out.array()).sum();
    }
    if (form == Form::causal) {
      const M out = with_x ? attn.forward_causal(a.q, a.k, a.v, a.x) : attn.forward_causal(a.q, a.k, a.v);
      return (w.dout.array() * out.array()).sum();
    }
    auto s = attn.make_state(kD, kDv);
    double l = 0;
    for (const auto& [first, count] : {std::pair<Index, Index>{0, kSplit}, {kSplit, kTokens - kSplit}}) {
      const M q = a.q.middleRows(first, count), k = a.k.middleRows(first, count), v = a.v.middleRows(first, count);
      const M out = with_x ? attn.forward_causal(s, q, k, v, M(a.x.middleRows(first, count)))
                           : attn.forward_causal(s, q, k, v);
      l += (w.dout.middleRows(first, count).array() * out.array()).sum();
    }
    l += (w.gk.array() * s.keys().array()).sum() + (w.gv.array() * s.values().array()).sum();
    if (reads_norm) l += (w.gz.col(0).array() * s.log_norm().array()).sum();
    return l;
  }
};

template <class Make>
Case<Make> make_case(Make make, bool with_x, bool reads_norm = false) {
  Case<Make> c{std::move(make), with_x, reads_norm};
  return c;
}

// The analytic gradients of `c`'s loss, in the order q, k, v, x, params.
template <class Make, class ParamGrad>
std::vector<M> analytic(const Case<Make>& c, const Args& a, Form form, const Weights& w, const ParamGrad& param_grad) {
  const auto attn = c.make(a.params);
  using Attn = std::decay_t<decltype(attn)>;
  using G = abc::Gradients<typename Attn::control_type>;
  std::vector<M> out;
  auto push = [&](const G& g) {
    out = {g.q, g.k, g.v, c.with_x ? g.x : M()};
    for (M& p : param_grad(g)) out.push_back(std::move(p));
  };
  if (form == Form::non_causal) {
    push(c.with_x ? attn.backward(a.q, a.k, a.v, w.dout, a.x) : attn.backward(a.q, a.k, a.v, w.dout));
    return out;
  }
  if (form == Form::causal) {
    push(c.with_x ? attn.backward_causal(a.q, a.k, a.v, w.dout, a.x) : attn.backward_causal(a.q, a.k, a.v, w.dout));
    return out;
  }
  // Split: the pieces' states, then their backward passes, last piece first.
  const Index sizes[2] = {kSplit, kTokens - kSplit}, firsts[2] = {0, kSplit};
  auto piece = [&](const M& m, int i) { return M(m.middleRows(firsts[i], sizes[i])); };
  auto s0 = attn.make_state(kD, kDv);
  auto s1 = s0;
  if (c.with_x)
    attn.forward_causal(s1, piece(a.q, 0), piece(a.k, 0), piece(a.v, 0), piece(a.x, 0));
  else
    attn.forward_causal(s1, piece(a.q, 0), piece(a.k, 0), piece(a.v, 0));
  abc::StateGradient<double> end{w.gk, w.gv, M::Zero(2, w.gk.rows())};
  if (c.reads_norm) end.slot_state.row(0) = w.gz.transpose();
  const G g2 = c.with_x ? attn.backward_causal(s1, piece(a.q, 1), piece(a.k, 1), piece(a.v, 1), piece(w.dout, 1), end,
                                               piece(a.x, 1))
                        : attn.backward_causal(s1, piece(a.q, 1), piece(a.k, 1), piece(a.v, 1), piece(w.dout, 1), end);
  const G g1 = c.with_x ? attn.backward_causal(s0, piece(a.q, 0), piece(a.k, 0), piece(a.v, 0), piece(w.dout, 0),
                                               g2.state, piece(a.x, 0))
                        : attn.backward_causal(s0, piece(a.q, 0), piece(a.k, 0), piece(a.v, 0), piece(w.dout, 0),
                                               g2.state);
  auto stack = [](const M& top, const M& bottom) {
    if (top.size() == 0 && bottom.size() == 0) return M();
    M m(top.rows() + bottom.rows(), top.cols());
    m << top, bottom;
    return m;
  };
  out = {stack(g1.q, g2.q), stack(g1.k, g2.k), stack(g1.v, g2.v), c.with_x ? stack(g1.x, g2.x) : M()};
  std::vector<M> p1 = param_grad(g1), p2 = param_grad(g2);
  for (std::size_t i = 0; i < p1.size(); ++i) out.push_back(p1[i] + p2[i]);
  return out;
}

// Central differences of the loss in every entry of m (a member of `a`).
template <class Make>
M numeric(const Case<Make>& c, Args& a, M& m, Form form, const Weights& w) {
  M g(m.rows(), m.cols());
  for (Index i = 0; i < m.size(); ++i) {
    double& x = m.data()[i];
    const double x0 = x, h = 1e-6 * std::max(1.0, std::abs(x0));
    x = x0 + h;
    const double up = c.loss(a, form, w);
    x = x0 - h;
    const double down = c.loss(a, form, w);
    x = x0;
    g.data()[i] = (up - down) / (2 * h);
  }
  return g;
}

// Every gradient of `c` against central differences: max |analytic − numeric| below 1e-6 of the
// largest numeric entry (or below 1e-9 absolute where the gradient is zero).
template <class Make, class ParamGrad>
void check(const Case<Make>& c, Args a, Form form, const ParamGrad& param_grad, Index n) {
  const Index rows_out = form == Form::non_causal ? kQueries : kTokens;
  Weights w{randn(rows_out, kDv, 91), randn(n, kD, 92, 0.5), randn(n, kDv, 93, 0.5), randn(n, 1, 94, 0.5)};
  if (form != Form::non_causal) a.q = randn(kTokens, kD, 95);
  const std::vector<M> got = analytic(c, a, form, w, param_grad);
  std::vector<M*> targets = {&a.q, &a.k, &a.v, c.with_x ? &a.x : nullptr};
  for (M& p : a.params) targets.push_back(&p);
  const char* names[] = {"q", "k", "v", "x"};
  REQUIRE(got.size() == targets.size());
  for (std::size_t i = 0; i < targets.size(); ++i) {
    if (!targets[i]) continue;
    const M want = numeric(c, a, *targets[i], form, w);
    const std::string what = std::string(name(form)) + ", d" + (i < 4 ? names[i] : ("param " + std::to_string(i - 4)).c_str());
    INFO(what);
    REQUIRE(got[i].rows() == want.rows());
    REQUIRE(got[i].cols() == want.cols());
    const double scale = want.cwiseAbs().maxCoeff();
    const double err = (got[i] - want).cwiseAbs().maxCoeff();
    INFO("largest numeric entry " << scale << ", largest difference " << err);
    if (scale > 1e-6)
      CHECK(err <= 1e-6 * scale);
    else
      CHECK(err <= 1e-9);
  }
}

// The backward passes' block (Options::backward_block): the default (one block for these sizes),
// or kBlock, which splits every form into blocks of 3 tokens (a partial last block included).
constexpr Index kBlock = 3;
Index g_backward_block = abc::Options{}.backward_block;

abc::Options options() {
  abc::Options o;
  o.chunk = kChunk;
  o.backward_block = g_backward_block;
  return o;
}

// Every form, with the inputs drawn for the control's input width (0: the keys).
template <class Make, class ParamGrad>
void check_all(Make make, std::vector<M> params, ParamGrad param_grad, Index n, Index d_x,
               bool reads_norm = false) {
  Args a{randn(kQueries, kD, 1), randn(kTokens, kD, 2), randn(kTokens, kDv, 3),
         d_x > 0 ? randn(kTokens, d_x, 4) : M(), std::move(params)};
  const auto c = make_case(std::move(make), d_x > 0, reads_norm);
  for (Index block : {abc::Options{}.backward_block, kBlock}) {
    for (Form f : {Form::non_causal, Form::causal, Form::split}) {
      DYNAMIC_SECTION(name(f) << ", backward_block " << block) {
        g_backward_block = block;
        check(c, a, f, param_grad, n);
        g_backward_block = abc::Options{}.backward_block;
      }
    }
  }
}

constexpr Index kSlots = 5, kDx = 6;

auto no_params = [](const auto&) { return std::vector<M>{}; };

template <class C>
auto fixed(C control) {
  return [control](const std::vector<M>&) { return abc::BoundedAttention<C>(control, options()); };
}

TEST_CASE("ABC-MLP gradients match finite differences: every activation and normalisation", "[gradients][mlp]") {
  using abc::control::Activation;
  using abc::control::Normalization;
  for (Activation act : {Activation::exp, Activation::sigmoid, Activation::relu})
    for (Normalization norm : {Normalization::prefix, Normalization::per_token})
      for (Index d_x : {Index(0), kDx}) {
        DYNAMIC_SECTION("activation " << int(act) << ", normalisation " << int(norm) << ", d_x " << d_x) {
          auto make = [act, norm](const std::vector<M>& p) {
            return abc::BoundedAttention(abc::control::Mlp<double>(p[0], act, norm), options());
          };
          auto grad = [](const auto& g) { return std::vector<M>{g.control.w_phi}; };
          // relu: logits away from 0, so that no entry sits on the kink within the differences.
          M w = randn(kSlots, d_x > 0 ? d_x : kD, 5);
          check_all(make, {w}, grad, kSlots, d_x, act != Activation::relu);
        }
      }
}

TEST_CASE("ABC-MLP gradients stay exact for logits of ±40", "[gradients][mlp]") {
  auto make = [](const std::vector<M>& p) { return abc::BoundedAttention(abc::control::Mlp<double>(p[0]), options()); };
  auto grad = [](const auto& g) { return std::vector<M>{g.control.w_phi}; };
  check_all(make, {randn(kSlots, kDx, 6, 8.0)}, grad, kSlots, kDx, true);
}

TEST_CASE("GSA slot gates: gradients of W_f and b_f match finite differences", "[gradients][slot_gates]") {
  auto make = [](const std::vector<M>& p) {
    return abc::BoundedAttention(abc::control::SlotGates<double>(p[0], abc::Vector<double>(p[1].col(0)), 2.0), options());
  };
  auto grad = [](const auto& g) { return std::vector<M>{g.control.w_f, M(g.control.b_f)}; };
  check_all(make, {randn(kSlots, kDx, 7), randn(kSlots, 1, 8)}, grad, kSlots, kDx);
}

TEST_CASE("Linformer: the projection's gradient matches finite differences", "[gradients][linformer]") {
  auto make = [](const std::vector<M>& p) { return abc::BoundedAttention(abc::control::Linformer<double>(p[0]), options()); };
  auto grad = [](const auto& g) { return std::vector<M>{g.control.w_lf}; };
  check_all(make, {randn(kSlots, kTokens + 2, 9, 0.5)}, grad, kSlots, 0);
}

TEST_CASE("Gated controls: the gate's and the inner control's gradients match finite differences",
          "[gradients][gated]") {
  SECTION("gated ABC-MLP with its own input") {
    auto make = [](const std::vector<M>& p) {
      return abc::BoundedAttention(abc::control::Gated(abc::control::Mlp<double>(p[0]), abc::Vector<double>(p[1].col(0)),
                                                       p[2](0, 0)),
                                   options());
    };
    auto grad = [](const auto& g) {
      return std::vector<M>{g.control.inner.w_phi, M(g.control.w_g), M::Constant(1, 1, g.control.b_g)};
    };
    check_all(make, {randn(kSlots, kDx, 10), randn(kDx, 1, 11), M::Constant(1, 1, 0.3)}, grad, kSlots, kDx, true);
  }
  SECTION("gated sliding window reading the keys") {
    auto make = [](const std::vector<M>& p) {
      return abc::BoundedAttention(
          abc::control::Gated(abc::control::SlidingWindow<double>(4), abc::Vector<double>(p[0].col(0)), p[1](0, 0)),
          options());
    };
    auto grad = [](const auto& g) { return std::vector<M>{M(g.control.w_g), M::Constant(1, 1, g.control.b_g)}; };
    check_all(make, {randn(kD, 1, 12), M::Constant(1, 1, -0.2)}, grad, 4, 0);
  }
}

TEST_CASE("Controls without parameters: q, k, v gradients match finite differences", "[gradients]") {
  using namespace abc::control;
  SECTION("sliding window") { check_all(fixed(SlidingWindow<double>(4)), {}, no_params, 4, 0); }
  SECTION("dilated window") { check_all(fixed(Dilated<double>(abc::Slots{3}, 2)), {}, no_params, 6, 0); }
  SECTION("random slot") { check_all(fixed(RandomSlot<double>(abc::Slots{kSlots}, abc::Seed{3})), {}, no_params, kSlots, 0); }
  SECTION("compressive") { check_all(fixed(Compressive<double>(abc::Slots{kSlots}, 3)), {}, no_params, kSlots, 0); }
  SECTION("global tokens") { check_all(fixed(GlobalTokens<double>({0, 3, 7})), {}, no_params, 3, 0); }
  SECTION("identity") { check_all(fixed(Identity<double>(kTokens)), {}, no_params, kTokens, 0); }
  SECTION("cluster (given centroids causally, k-means non-causally)") {
    check_all(fixed(Cluster<double>(randn(3, kD, 13))), {}, no_params, 3, 0);
  }
  SECTION("top-k eviction") {
    check_all(fixed(TopKEviction<double>(abc::Slots{kSlots}, 2, abc::select::KeyScore<double>::norm())), {}, no_params,
              kSlots, 0);
  }
  SECTION("window and global tokens, concatenated") {
    check_all(fixed(Concat(SlidingWindow<double>(3), GlobalTokens<double>({1, 4}))), {}, no_params, 5, 0);
  }
}

TEST_CASE("Split backward passes add up to the backward pass of the whole sequence", "[gradients]") {
  // Independent of finite differences: the pieces' gradients (last piece first, chained through
  // the state gradient) equal those of one causal call to rounding.
  abc::BoundedAttention attn(abc::control::Mlp<double>(randn(kSlots, kDx, 14)), options());
  const M q = randn(kTokens, kD, 15), k = randn(kTokens, kD, 16), v = randn(kTokens, kDv, 17),
          x = randn(kTokens, kDx, 18), dout = randn(kTokens, kDv, 19);
  const auto whole = attn.backward_causal(q, k, v, dout, x);
  auto s0 = attn.make_state(kD, kDv), s1 = s0;
  attn.forward_causal(s1, q.topRows(kSplit), k.topRows(kSplit), v.topRows(kSplit), x.topRows(kSplit));
  const Index rest = kTokens - kSplit;
  const auto g2 = attn.backward_causal(s1, q.bottomRows(rest), k.bottomRows(rest), v.bottomRows(rest),
                                       dout.bottomRows(rest), {}, x.bottomRows(rest));
  const auto g1 = attn.backward_causal(s0, q.topRows(kSplit), k.topRows(kSplit), v.topRows(kSplit),
                                       dout.topRows(kSplit), g2.state, x.topRows(kSplit));
  CHECK((g1.k - whole.k.topRows(kSplit)).cwiseAbs().maxCoeff() <= 1e-12);
  CHECK((g2.k - whole.k.bottomRows(rest)).cwiseAbs().maxCoeff() <= 1e-12);
  CHECK((g1.x - whole.x.topRows(kSplit)).cwiseAbs().maxCoeff() <= 1e-12);
  CHECK((g2.q - whole.q.bottomRows(rest)).cwiseAbs().maxCoeff() <= 1e-12);
  CHECK((g1.control.w_phi + g2.control.w_phi - whole.control.w_phi).cwiseAbs().maxCoeff() <= 1e-12);
  // A fresh state takes nothing from the loss but its normaliser's ±∞ entries: K̃ and Ṽ get
  // exactly what the first tokens' decays leave of them, which is 0.
  CHECK(g1.state.keys.cwiseAbs().maxCoeff() == 0.0);
}

TEST_CASE("A backward pass in blocks equals the one-block pass to rounding", "[gradients]") {
  // Independent of finite differences, over many chunks and blocks: blocks of 16 and 23 tokens
  // (a multiple of the chunk, and not) against one block for the whole call, both forms, the
  // causal one continuing a state and given a d_end.
  const Index n_tok = 70;
  const M w = randn(kSlots, kDx, 30), q = randn(n_tok, kD, 31), k = randn(n_tok, kD, 32), v = randn(n_tok, kDv, 33),
          x = randn(n_tok, kDx, 34), dout = randn(n_tok, kDv, 35);
  abc::Options whole;
  whole.chunk = kChunk;
  const abc::BoundedAttention one(abc::control::Mlp<double>(w), whole);
  auto start = one.make_state(kD, kDv);
  one.forward_causal(start, q.topRows(9), k.topRows(9), v.topRows(9), x.topRows(9));
  const abc::StateGradient<double> end{randn(kSlots, kD, 36), randn(kSlots, kDv, 37), randn(2, kSlots, 38)};
  const auto want_nc = one.backward(q, k, v, dout, x);
  const auto want_c = one.backward_causal(start, q, k, v, dout, end, x);
  for (Index block : {16, 23}) {
    abc::Options o = whole;
    o.backward_block = block;
    const abc::BoundedAttention blocks(abc::control::Mlp<double>(w), o);
    const auto nc = blocks.backward(q, k, v, dout, x);
    const auto c = blocks.backward_causal(start, q, k, v, dout, end, x);
    INFO("backward_block " << block);
    const std::pair<const M*, const M*> pairs[] = {
        {&nc.q, &want_nc.q},       {&nc.k, &want_nc.k},       {&nc.v, &want_nc.v},
        {&nc.x, &want_nc.x},       {&nc.control.w_phi, &want_nc.control.w_phi},
        {&c.q, &want_c.q},         {&c.k, &want_c.k},         {&c.v, &want_c.v},
        {&c.x, &want_c.x},         {&c.control.w_phi, &want_c.control.w_phi},
        {&c.state.keys, &want_c.state.keys}, {&c.state.values, &want_c.state.values},
        {&c.state.slot_state, &want_c.state.slot_state}};
    for (const auto& [got, want] : pairs) {
      REQUIRE(got->rows() == want->rows());
      REQUIRE(got->cols() == want->cols());
      CHECK((*got - *want).cwiseAbs().maxCoeff() <= 1e-12 * std::max(1.0, want->cwiseAbs().maxCoeff()));
    }
  }
}

TEST_CASE("float gradients agree with the double ones to float rounding", "[gradients][float]") {
  // The float kernels run the same sweeps: against the double result (checked above by finite
  // differences), on unit-scale data over several chunks of the default size.
  const Index n_tok = 70, d = 8;
  const M wd = randn(kSlots, d, 20), q = randn(n_tok, d, 21), k = randn(n_tok, d, 22), v = randn(n_tok, d, 23),
          dout = randn(n_tok, d, 24);
  const abc::BoundedAttention<abc::control::Mlp<double>> dbl(abc::control::Mlp<double>{wd});
  const abc::BoundedAttention<abc::control::Mlp<float>> flt(abc::control::Mlp<float>{wd.cast<float>()});
  using F = abc::Matrix<float>;
  for (bool causal : {false, true}) {
    const auto gd = causal ? dbl.backward_causal(q, k, v, dout) : dbl.backward(q, k, v, dout);
    const F qf = q.cast<float>(), kf = k.cast<float>(), vf = v.cast<float>(), df = dout.cast<float>();
    const auto gf = causal ? flt.backward_causal(qf, kf, vf, df) : flt.backward(qf, kf, vf, df);
    const std::pair<const M*, F> pairs[] = {{&gd.q, gf.q}, {&gd.k, gf.k}, {&gd.v, gf.v}, {&gd.control.w_phi, gf.control.w_phi}};
    for (const auto& [want, got] : pairs) {
      INFO((causal ? "causal" : "non-causal"));
      const double scale = want->cwiseAbs().maxCoeff();
      CHECK((got.cast<double>() - *want).cwiseAbs().maxCoeff() <= 1e-4 * scale);
    }
  }
}

}  // namespace gradients_test
