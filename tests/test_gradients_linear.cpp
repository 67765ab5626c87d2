// SPDX-License-Identifier: MIT
// abc tests: BoundedAttention::backward and backward_causal of the linear readout (RFA,
// control::RandomFeature) against central finite differences of the forward pass, in double:
// every gradient (q, k, v, x, W, w_g, b_g, the start state), non-causal, causal, and split in two
// pieces chained through d_end (with a loss that also reads the final state), ungated, learned-
// gated and given gates, unit and raw inputs, both feature maps, with and without a floor, at
// sizes no chunk divides. Then float against double, and the pieces against the whole.
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
namespace linear_gradients_test {

using M = abc::Matrix<double>;
using abc::Index;
using abc::feature::InputNorm;

M randn(Index rows, Index cols, std::uint64_t seed, double scale = 1.0) {
  std::mt19937_64 gen(seed);
  std::normal_distribution<double> dist(0.0, scale);
  M m(rows, cols);
  for (Index i = 0; i < m.size(); ++i) m.data()[i] = dist(gen);
  return m;
}

// Odd sizes: N tokens, M queries (non-causal), d, D features (n = 2D slots for sin/cos), dv, d_x;
// the split falls inside a chunk.
constexpr Index kN = 13, kM = 9, kD = 5, kF = 3, kDv = 7, kDx = 4, kSplit = 6;
// A denominator floor between the learned-gate case's denominators (checked below).
constexpr double kFloor = 0.92;

enum class Form { non_causal, causal, split };
enum class Gate { none, learned, given };

const char* name(Form f) {
  switch (f) {
    case Form::non_causal: return "non-causal";
    case Form::causal: return "causal";
    case Form::split: return "split";
  }
  return "";
}

struct Config {
  Gate gate = Gate::none;
  InputNorm norm = InputNorm::unit;
  bool with_x = false;  // a learned gate reads x [N × d_x] rather than the keys
  double floor = 0.0;
  Index chunk = 4;
};

std::string describe(const Config& c) {
  const char* g[] = {"ungated", "learned gate", "given gates"};
  return std::string(g[int(c.gate)]) + (c.norm == InputNorm::unit ? ", unit" : ", raw") + (c.with_x ? ", x" : "") +
         ", floor " + std::to_string(c.floor) + ", chunk " + std::to_string(c.chunk);
}

// Inputs and parameters: W [D × d], w_g [d_x × 1], b_g [1 × 1], perturbed in place.
struct Args {
  M q, k, v, x, w, wg, bg;
};

std::vector<double> given_gates() {
  std::vector<double> g(kN);
  for (Index t = 0; t < kN; ++t) g[std::size_t(t)] = 0.15 + 0.7 * double((t * 7) % kN) / double(kN);
  return g;
}

template <class T, class Map>
auto make(const Config& c, const abc::Matrix<T>& w, const abc::Matrix<T>& wg, T bg) {
  using Rfa = abc::control::RandomFeature<T, Map>;
  abc::Options o;
  o.chunk = c.chunk;
  Map phi(w, c.norm);
  const T fl = T(c.floor);
  if (c.gate == Gate::learned) return abc::BoundedAttention<Rfa>(Rfa(phi, abc::Vector<T>(wg.col(0)), bg, fl), o);
  if (c.gate == Gate::given) {
    std::vector<T> g;
    for (double x : given_gates()) g.push_back(T(x));
    return abc::BoundedAttention<Rfa>(Rfa(phi, g, fl), o);
  }
  return abc::BoundedAttention<Rfa>(Rfa(phi, fl), o);
}

// The loss L = Σ dout ⊙ out, plus, in the split form, Σ gv ⊙ Ṽ + Σ gz ⊙ z of the state the second
// piece leaves: a loss that reads the final state, so d_end is exercised.
struct Weights {
  M dout, gv, gz;
};

template <class Map>
struct Case {
  Config c;

  double loss(const Args& a, Form form, const Weights& w) const {
    const auto attn = make<double, Map>(c, a.w, a.wg, a.bg(0, 0));
    const bool x = c.with_x;
    if (form == Form::non_causal) {
      const M out = x ? attn.forward(a.q, a.k, a.v, a.x) : attn.forward(a.q, a.k, a.v);
      return (w.dout.array() * out.array()).sum();
    }
    if (form == Form::causal) {
      const M out = x ? attn.forward_causal(a.q, a.k, a.v, a.x) : attn.forward_causal(a.q, a.k, a.v);
      return (w.dout.array() * out.array()).sum();
    }
    auto s = attn.make_state(kD, kDv);
    double l = 0;
    for (const auto& [first, count] : {std::pair<Index, Index>{0, kSplit}, {kSplit, kN - kSplit}}) {
      const M q = a.q.middleRows(first, count), k = a.k.middleRows(first, count), v = a.v.middleRows(first, count);
      const M out = x ? attn.forward_causal(s, q, k, v, M(a.x.middleRows(first, count))) : attn.forward_causal(s, q, k, v);
      l += (w.dout.middleRows(first, count).array() * out.array()).sum();
    }
    return l + (w.gv.array() * s.values().array()).sum() +
           (w.gz.transpose().array() * s.slot_state().row(1).array()).sum();
  }
};

M stack(const M& top, const M& bottom) {
  M m(top.rows() + bottom.rows(), top.cols());
  m << top, bottom;
  return m;
}

// The analytic gradients, in the order q, k, v, x, W, w_g, b_g (empty where not differentiated).
template <class Map>
std::vector<M> analytic(const Case<Map>& cs, const Args& a, Form form, const Weights& w) {
  const Config& c = cs.c;
  const auto attn = make<double, Map>(c, a.w, a.wg, a.bg(0, 0));
  using G = abc::Gradients<typename std::decay_t<decltype(attn)>::control_type>;
  auto params = [&](const G& g) {
    const bool learned = c.gate == Gate::learned;
    return std::vector<M>{g.control.w, learned ? M(g.control.w_g) : M(), learned ? M::Constant(1, 1, g.control.b_g) : M()};
  };
  auto all = [&](const G& g) {
    std::vector<M> out = {g.q, g.k, g.v, c.with_x ? g.x : M()};
    for (M& p : params(g)) out.push_back(std::move(p));
    return out;
  };
  const bool x = c.with_x;
  if (form == Form::non_causal) return all(x ? attn.backward(a.q, a.k, a.v, w.dout, a.x) : attn.backward(a.q, a.k, a.v, w.dout));
  if (form == Form::causal)
    return all(x ? attn.backward_causal(a.q, a.k, a.v, w.dout, a.x) : attn.backward_causal(a.q, a.k, a.v, w.dout));
  const Index sizes[2] = {kSplit, kN - kSplit}, firsts[2] = {0, kSplit};
  auto piece = [&](const M& m, int i) { return M(m.middleRows(firsts[i], sizes[i])); };
  auto s0 = attn.make_state(kD, kDv);
  auto s1 = s0;
  if (x)
    attn.forward_causal(s1, piece(a.q, 0), piece(a.k, 0), piece(a.v, 0), piece(a.x, 0));
  else
    attn.forward_causal(s1, piece(a.q, 0), piece(a.k, 0), piece(a.v, 0));
  const Index n = attn.num_slots();
  abc::StateGradient<double> end{M(n, 0), w.gv, M::Zero(2, n)};
  end.slot_state.row(1) = w.gz.transpose();
  const G g2 = x ? attn.backward_causal(s1, piece(a.q, 1), piece(a.k, 1), piece(a.v, 1), piece(w.dout, 1), end, piece(a.x, 1))
                 : attn.backward_causal(s1, piece(a.q, 1), piece(a.k, 1), piece(a.v, 1), piece(w.dout, 1), end);
  const G g1 = x ? attn.backward_causal(s0, piece(a.q, 0), piece(a.k, 0), piece(a.v, 0), piece(w.dout, 0), g2.state,
                                        piece(a.x, 0))
                 : attn.backward_causal(s0, piece(a.q, 0), piece(a.k, 0), piece(a.v, 0), piece(w.dout, 0), g2.state);
  REQUIRE(g2.state.values.rows() == n);
  REQUIRE(g2.state.keys.cols() == 0);
  std::vector<M> out = {stack(g1.q, g2.q), stack(g1.k, g2.k), stack(g1.v, g2.v), x ? stack(g1.x, g2.x) : M()};
  const std::vector<M> p1 = params(g1), p2 = params(g2);
  for (std::size_t i = 0; i < p1.size(); ++i) out.push_back(p1[i].size() ? M(p1[i] + p2[i]) : M());
  return out;
}

// Central differences of the loss in every entry of m (a member of `a`).
template <class Loss>
M numeric(const Loss& loss, M& m) {
  M g(m.rows(), m.cols());
  for (Index i = 0; i < m.size(); ++i) {
    double& x = m.data()[i];
    const double x0 = x, h = 1e-5 * std::max(1.0, std::abs(x0));
    x = x0 + h;
    const double up = loss();
    x = x0 - h;
    const double down = loss();
    x = x0;
    g.data()[i] = (up - down) / (2 * h);
  }
  return g;
}

// Relative error of `got` against `want`: max |got − want| / max |want|.
double rel_error(const M& got, const M& want) {
  const double scale = want.cwiseAbs().maxCoeff();
  const double err = (got - want).cwiseAbs().maxCoeff();
  return scale > 1e-8 ? err / scale : err;
}

Args draw(const Config& c) {
  // σ small enough that the sin/cos estimate of the denominator stays away from 0 (where the
  // readout is singular): FD needs a smooth neighbourhood.
  const Index dx = c.with_x ? kDx : kD;
  return Args{randn(kM, kD, 1), randn(kN, kD, 2), randn(kN, kDv, 3), randn(kN, kDx, 4), randn(kF, kD, 5, 0.4),
              randn(dx, 1, 6, 0.7), M::Constant(1, 1, 0.3)};
}

Weights weights(Form form, Index n) {
  return {randn(form == Form::non_causal ? kM : kN, kDv, 91), randn(n, kDv, 93, 0.5), randn(n, 1, 94, 0.5)};
}

// Every gradient of `c` against central differences: relative error below 1e-6.
template <class Map>
void check(const Config& c, Form form) {
  const Case<Map> cs{c};
  Args a = draw(c);
  if (form != Form::non_causal) a.q = randn(kN, kD, 95);
  const Index n = make<double, Map>(c, a.w, a.wg, a.bg(0, 0)).num_slots();
  const Weights w = weights(form, n);
  const std::vector<M> got = analytic(cs, a, form, w);
  const bool learned = c.gate == Gate::learned;
  std::vector<M*> targets = {&a.q, &a.k, &a.v, c.with_x ? &a.x : nullptr, &a.w, learned ? &a.wg : nullptr,
                             learned ? &a.bg : nullptr};
  const char* names[] = {"q", "k", "v", "x", "W", "w_g", "b_g"};
  REQUIRE(got.size() == targets.size());
  for (std::size_t i = 0; i < targets.size(); ++i) {
    if (!targets[i]) continue;
    const M want = numeric([&] { return cs.loss(a, form, w); }, *targets[i]);
    INFO(describe(c) << ", " << name(form) << ", d" << names[i]);
    REQUIRE(got[i].rows() == want.rows());
    REQUIRE(got[i].cols() == want.cols());
    INFO("largest numeric entry " << want.cwiseAbs().maxCoeff() << ", relative error " << rel_error(got[i], want));
    CHECK(rel_error(got[i], want) < 1e-6);
  }
}

template <class Map>
void check_forms(const Config& c) {
  for (Form f : {Form::non_causal, Form::causal, Form::split}) check<Map>(c, f);
}

using Fourier = abc::feature::RandomFourier<double>;
using ArcCos = abc::feature::ArcCosine<double>;

TEST_CASE("RandomFeature gradients = central differences: ungated, learned gate (keys or x), given gates; unit and raw",
          "[gradients][random_feature]") {
  for (InputNorm norm : {InputNorm::unit, InputNorm::raw}) {
    Config c;
    c.norm = norm;
    check_forms<Fourier>(c);
    c.gate = Gate::given;
    check_forms<Fourier>(c);
    c.gate = Gate::learned;
    check_forms<Fourier>(c);
    c.with_x = true;
    check_forms<Fourier>(c);
  }
}

TEST_CASE("RandomFeature gradients = central differences: chunk sizes 1, 5 and 64, and a floor",
          "[gradients][random_feature]") {
  for (Index chunk : {Index(1), Index(5), Index(64)}) {
    Config c;
    c.gate = Gate::learned;
    c.chunk = chunk;
    check_forms<Fourier>(c);
  }
  // A floor active at some reads and not at others (kFloor lies between the denominators, none within
  // the finite-difference step of it: see the next test), then at every read.
  for (double fl : {kFloor, 50.0}) {
    Config c;
    c.gate = Gate::learned;
    c.floor = fl;
    check_forms<Fourier>(c);
  }
}

TEST_CASE("RandomFeature gradients = central differences: the arc-cosine map", "[gradients][random_feature]") {
  for (InputNorm norm : {InputNorm::unit, InputNorm::raw}) {
    Config c;
    c.norm = norm;
    c.gate = Gate::learned;
    c.with_x = true;
    check_forms<ArcCos>(c);
  }
}

TEST_CASE("RandomFeature: the floor case reads both sides of the floor", "[gradients][random_feature]") {
  // The floor test above is only meaningful when some denominators lie below kFloor and some above,
  // in the non-causal reads and in the causal ones, none close to it.
  Config c;
  c.gate = Gate::learned;
  const Args a = draw(c);
  const auto attn = make<double, Fourier>(c, a.w, a.wg, a.bg(0, 0));
  const auto& rfa = attn.control();
  M phi(kM, rfa.num_slots());
  rfa.query_features(a.q, phi);
  const abc::Vector<double> den = phi * attn.memory(a.k, a.v).slot_state().row(1).transpose();
  const M q = randn(kN, kD, 95);
  M pq(kN, rfa.num_slots());
  rfa.query_features(q, pq);
  abc::Vector<double> causal(kN);
  auto s = attn.make_state(kD, kDv);
  for (Index t = 0; t < kN; ++t) {
    attn.step(s, q.row(t).transpose(), a.k.row(t).transpose(), a.v.row(t).transpose());
    causal(t) = pq.row(t).dot(s.slot_state().row(1));
  }
  for (const abc::Vector<double>& d : {den, causal}) {
    CHECK(d.minCoeff() < kFloor);
    CHECK(d.maxCoeff() > kFloor);
    CHECK((d.array() - kFloor).abs().minCoeff() > 1e-3);
  }
}

TEST_CASE("RandomFeature backward_causal continuing a state: the start state's gradient = central differences",
          "[gradients][random_feature]") {
  // A start state from a prefix; the loss reads the call's outputs and its end state.
  Config c;
  c.gate = Gate::learned;
  Args a = draw(c);
  a.q = randn(kN, kD, 95);
  const auto attn = make<double, Fourier>(c, a.w, a.wg, a.bg(0, 0));
  auto start = attn.make_state(kD, kDv);
  attn.forward_causal(start, randn(5, kD, 7), randn(5, kD, 8), randn(5, kDv, 9));
  const Index n = attn.num_slots();
  const Weights w = weights(Form::causal, n);
  auto loss = [&] {
    auto s = start;
    const M out = attn.forward_causal(s, a.q, a.k, a.v);
    return (w.dout.array() * out.array()).sum() + (w.gv.array() * s.values().array()).sum() +
           (w.gz.transpose().array() * s.slot_state().row(1).array()).sum();
  };
  abc::StateGradient<double> end{M(n, 0), w.gv, M::Zero(2, n)};
  end.slot_state.row(1) = w.gz.transpose();
  const auto g = attn.backward_causal(start, a.q, a.k, a.v, w.dout, end);
  using Access = abc::detail::StateAccess;
  M values = start.values(), z = start.slot_state().row(1);
  const M dvalues = numeric(
      [&] {
        Access::values(start) = values;
        return loss();
      },
      values);
  Access::values(start) = values;
  const M dz = numeric(
      [&] {
        Access::slot_state(start).row(1) = z;
        return loss();
      },
      z);
  Access::slot_state(start).row(1) = z;
  CHECK(rel_error(g.state.values, dvalues) < 1e-6);
  CHECK(rel_error(M(g.state.slot_state.row(1)), dz) < 1e-6);
  CHECK(g.state.slot_state.row(0).isZero());
  CHECK(g.state.keys.rows() == n);
  CHECK(g.state.keys.cols() == 0);
  for (auto [got, target] : {std::pair<const M*, M*>{&g.q, &a.q}, {&g.k, &a.k}, {&g.v, &a.v}})
    CHECK(rel_error(*got, numeric(loss, *target)) < 1e-6);
}

TEST_CASE("RandomFeature: the pieces' gradients chained through d_end = the whole sequence's",
          "[gradients][random_feature]") {
  for (Gate gate : {Gate::none, Gate::learned, Gate::given}) {
    Config c;
    c.gate = gate;
    c.chunk = 3;
    Args a = draw(c);
    a.q = randn(kN, kD, 95);
    const Case<Fourier> cs{c};
    Weights w = weights(Form::causal, make<double, Fourier>(c, a.w, a.wg, a.bg(0, 0)).num_slots());
    w.gv.setZero();
    w.gz.setZero();
    const std::vector<M> whole = analytic(cs, a, Form::causal, w), pieces = analytic(cs, a, Form::split, w);
    for (std::size_t i = 0; i < whole.size(); ++i) {
      INFO(describe(c) << ", gradient " << i);
      REQUIRE(whole[i].size() == pieces[i].size());
      if (whole[i].size()) CHECK(rel_error(pieces[i], whole[i]) < 1e-12);
    }
  }
}

TEST_CASE("RandomFeature gradients in float = in double, to float's precision", "[gradients][random_feature]") {
  using Mf = abc::Matrix<float>;
  for (Gate gate : {Gate::none, Gate::learned}) {
    Config c;
    c.gate = gate;
    Args a = draw(c);
    a.q = randn(kN, kD, 95);
    const M dout = randn(kN, kDv, 91);
    const auto ad = make<double, Fourier>(c, a.w, a.wg, a.bg(0, 0));
    const auto af = make<float, abc::feature::RandomFourier<float>>(c, Mf(a.w.cast<float>()), Mf(a.wg.cast<float>()),
                                                                      float(a.bg(0, 0)));
    const auto gd = ad.backward_causal(a.q, a.k, a.v, dout);
    const auto gf = af.backward_causal(Mf(a.q.cast<float>()), Mf(a.k.cast<float>()), Mf(a.v.cast<float>()),
                                       Mf(dout.cast<float>()));
    const auto nd = ad.backward(a.q, a.k, a.v, dout);
    const auto nf = af.backward(Mf(a.q.cast<float>()), Mf(a.k.cast<float>()), Mf(a.v.cast<float>()), Mf(dout.cast<float>()));
    for (const auto& [d, f] : {std::pair{&gd, &gf}, std::pair{&nd, &nf}}) {
      CHECK(rel_error(f->q.cast<double>(), d->q) < 1e-4);
      CHECK(rel_error(f->k.cast<double>(), d->k) < 1e-4);
      CHECK(rel_error(f->v.cast<double>(), d->v) < 1e-4);
      CHECK(rel_error(f->control.w.cast<double>(), d->control.w) < 1e-4);
      if (gate == Gate::learned) CHECK(rel_error(f->control.w_g.cast<double>(), d->control.w_g) < 1e-4);
    }
  }
}

TEST_CASE("RandomFeature gradients: a zero key and a zero query read x̂ = 0 and get a zero gradient",
          "[gradients][random_feature]") {
  Config c;
  Args a = draw(c);
  a.q = randn(kN, kD, 95);
  a.q.row(2).setZero();
  a.k.row(4).setZero();
  const auto attn = make<double, Fourier>(c, a.w, a.wg, a.bg(0, 0));
  const auto g = attn.backward_causal(a.q, a.k, a.v, randn(kN, kDv, 91));
  CHECK(g.q.allFinite());
  CHECK(g.k.allFinite());
  CHECK(g.q.row(2).isZero());
  CHECK(g.k.row(4).isZero());
}

TEST_CASE("RandomFeature gradients: a zero denominator reads 0 and has a zero gradient; finite everywhere",
          "[gradients][random_feature]") {
  // Arc-cosine features of a query whose every projection is ≤ 0 are all 0: its denominator is 0.
  abc::Matrix<double> w(2, 2);
  w << 1, 0, 0, 1;
  using Rfa = abc::control::RandomFeature<double, ArcCos>;
  const abc::BoundedAttention<Rfa> attn{Rfa(ArcCos(w))};
  M q(2, 2), k(3, 2), v = randn(3, 2, 1);
  q << -1, -1, 1, 0.5;
  k << 1, 1, 0.5, 2, 2, 0.1;
  const M dout = randn(2, 2, 2);
  const M out = attn.forward(q, k, v);
  CHECK(out.row(0).isZero());
  const auto g = attn.backward(q, k, v, dout);
  CHECK(g.q.row(0).isZero());
  CHECK(g.q.allFinite());
  CHECK(g.k.allFinite());
  CHECK(g.v.allFinite());
  CHECK(g.control.w.allFinite());
}

TEST_CASE("RandomFeature gradients of a call with no keys: empty, or what the start state gets", "[gradients][random_feature]") {
  // fuzz_api found this: a call of 0 tokens formed its [v, 1] rows with a comma initializer, whose
  // blocks offset a null pointer (UBSan).
  Config c;
  c.gate = Gate::learned;
  Args a = draw(c);
  const auto attn = make<double, Fourier>(c, a.w, a.wg, a.bg(0, 0));
  const M none(0, kD), q = randn(2, kD, 96), dout = randn(2, kDv, 97);
  const auto g = attn.backward(q, none, M(0, kDv), dout);
  CHECK(g.k.rows() == 0);
  CHECK(g.v.rows() == 0);
  CHECK(g.q.rows() == 2);
  CHECK(g.q.isZero());  // an empty memory reads 0 whatever the query
  const auto gc = attn.backward_causal(M(0, kD), none, M(0, kDv), M(0, kDv));
  CHECK(gc.q.rows() == 0);
  CHECK(gc.control.w.isZero());
}

}  // namespace linear_gradients_test
