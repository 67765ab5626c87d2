// SPDX-License-Identifier: MIT
// abc fuzz: the body of the fuzz_api harness, a template over the scalar type: the public API of
// BoundedAttention with fuzz-chosen control, shapes, options and values (NaN, ±Inf, denormals,
// ±1e30 included). Its entry point is in fuzz_api.cpp. Controls: window, identity, ABC-MLP,
// Linformer, compressive, random slot, dilated, global tokens, gated (learned and given gates),
// cluster, concatenation, TRAMS top-k eviction, and RFA (arc-cos and sin/cos features, ungated,
// learned or given gates, with and without a floor).
// Invariants, each a trap on violation (besides any sanitizer report):
//  - validate*() returns Status::ok exactly when the matching call does not throw, and a call only
//    ever throws abc::shape_error or abc::config_error;
//  - a call that throws leaves the state equal (operator==) to a copy taken before;
//  - finite inputs small enough that no intermediate can overflow give finite outputs;
//  - moderate inputs: forward_causal = prefill + step loop on a state, to a loose tolerance;
//  - backward and backward_causal (every differentiable control, RFA included) throw exactly when
//    their checks fail, and give finite gradients for moderate inputs (RFA: with a floor).
// The last two are not asserted for sin/cos RFA without a floor: its denominator φ(q)·z may be
// arbitrarily close to 0 for finite inputs (features of both signs cancel), so the exact ratio
// may overflow and two evaluation orders may differ without bound. Arc-cos features are ≥ 0 (no
// cancellation: a convex combination of values), and a floor bounds the denominator away from 0.
// For every RFA form the agreement is asserted on the outputs whose denominator is bounded away
// from the subnormal range (see denominator_bounded).
#pragma once

#include <abc/abc.hpp>

#include "fuzz.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <optional>
#include <type_traits>
#include <vector>

namespace {

using abc::Index;

// "Unchanged" means bit for bit (abc_fuzz::same_bits); the finiteness invariant below is asserted
// only for inputs that cannot overflow.
using abc_fuzz::same_bits;
using abc_fuzz::max_abs;
using abc_fuzz::Reader;
using abc_fuzz::throws;

template <class T>
struct Inputs {
  abc::Matrix<T> q, k, v, x;
  bool use_x = false;
  double bound = 0;  // the largest |entry| over q, k, v, x and the control's weights
};

// Linear readout (RFA): which causal outputs have a denominator bounded away from 0. The readout is
// the ratio φ(q_t)ᵀS_t / φ(q_t)·z_t; with φ(q_t) scaled so its largest entry is 1 (the ratio does
// not change), a denominator below the normal range means S_t and z_t are sums of subnormal terms,
// each carrying an absolute rounding of up to the smallest subnormal: two evaluation orders then
// agree only to that absolute error divided by the denominator, which no relative tolerance holds.
// Rows whose scaled denominator (with the floor, if any) is at least 2^16 times the smallest normal
// have an error from subnormal terms below 2^-28 relative (float), and are compared; a denominator
// of exactly 0 without a floor reads as 0 in every form, and is compared too. Computed in long
// double, where every subnormal of T is a normal number.
template <class Control, class T = typename Control::scalar_type>
std::vector<bool> denominator_bounded(const Control& ctl, const abc::Matrix<T>& q, const abc::Matrix<T>& k,
                                      const abc::Matrix<T>& x, Index n_tok) {
  const Index n = ctl.num_slots();
  abc::Matrix<T> decay(n_tok, n), write(n_tok, n), phi(n_tok, n);
  ctl.key_schedule(0, k.topRows(n_tok), x.topRows(n_tok), decay, write);
  ctl.query_features(q.topRows(n_tok), phi);
  const T floor = ctl.denominator_floor();
  std::vector<long double> z(std::size_t(n), 0.0L);
  std::vector<bool> ok(static_cast<std::size_t>(n_tok));
  const long double threshold = std::ldexp(static_cast<long double>(std::numeric_limits<T>::min()), 16);
  for (Index t = 0; t < n_tok; ++t) {
    long double den = 0, top = 0;
    for (Index l = 0; l < n; ++l) {
      z[std::size_t(l)] = static_cast<long double>(decay(t, l)) * z[std::size_t(l)] + write(t, l);
      den += static_cast<long double>(phi(t, l)) * z[std::size_t(l)];
      top = std::max(top, std::abs(static_cast<long double>(phi(t, l))));
    }
    const long double eff = floor > T(0) ? std::max(den, static_cast<long double>(floor)) : den;
    ok[std::size_t(t)] = (floor == T(0) && den == 0) || (top > 0 && eff / top >= threshold);
  }
  return ok;
}

template <class Control>
// weight_bound: the largest |weight| of the control (0 if none); grows: the memory rows are sums of
// weight × key over tokens (Linformer, RFA) rather than convex combinations of keys; values: whether
// the finiteness and agreement invariants hold for the control (not for sin/cos RFA without a floor).
void exercise(const Control& ctl, Reader& in, double weight_bound, bool grows, bool values = true) {
  using T = typename Control::scalar_type;
  abc::Options opts;
  const std::uint8_t sc = in.byte();
  static const double scales[] = {0.0, 0.0, 1.0, 0.5, 1e-3, 10.0, -1.0, 1e300, 1e-320};
  opts.scale = sc < 240 ? scales[sc % 6] : scales[sc % 9];
  if (in.byte() & 1) opts.empty_slots = abc::EmptySlots::literal;
  opts.causal_kernel = static_cast<abc::CausalKernel>(in.byte() % 3);
  opts.chunk = in.index(0, 9);
  std::optional<abc::BoundedAttention<Control>> made;
  const bool bad_options = !(std::isfinite(opts.scale) && opts.scale >= 0) || opts.chunk < 1;
  const bool threw = throws([&] { made.emplace(ctl, opts); });
  ABC_FUZZ_REQUIRE(threw == bad_options);
  if (threw) return;
  const auto& attn = *made;

  // Shapes: usually consistent, sometimes off by one somewhere.
  const Index n_tok = in.index(0, 64), dv = in.index(0, 16), m = in.index(0, 64);
  Index d = in.index(0, 16);
  const std::uint8_t skew = in.byte();
  if constexpr (abc::detail::has_key_dim<Control>::value)  // usually the width the control needs
    if (!(skew & 0x20)) d = ctl.key_dim();
  const auto off = [&](int which) { return (skew % 16) == which ? Index(1) : Index(0); };
  Inputs<T> a;
  a.q = in.matrix<T>(n_tok + off(1), d + off(2));
  a.k = in.matrix<T>(n_tok, d);
  a.v = in.matrix<T>(n_tok + off(3), dv);
  a.use_x = (skew & 0x10) != 0;
  Index dx = d + off(4);  // the key's width: the control input of a control that reads none of its own
  if constexpr (abc::detail::has_input_dim<Control>::value)
    if (ctl.input_dim() > 0) dx = ctl.input_dim() + off(4);
  a.x = in.matrix<T>(n_tok + off(5), dx);
  a.bound = std::max({max_abs(a.q), max_abs(a.k), max_abs(a.v), a.use_x ? max_abs(a.x) : 0.0, weight_bound});
  const double s = opts.scale > 0 ? opts.scale : 1.0;
  // Finite inputs whose every intermediate (logits d·B², memory rows up to N·B², scores
  // scale·d·N·B³) is far from overflow must give finite outputs. B ≤ 1e6 (float), 1e30 (double).
  const double cap = std::is_same<T, float>::value ? 1e6 : 1e30;
  const bool bounded = values && a.bound <= cap && s <= 1e3 && s >= 1e-30;

  // Non-causal / cross attention with independent query count m.
  {
    abc::Matrix<T> qn = in.matrix<T>(m, d + off(6));
    const double qb = max_abs(qn);
    abc::Matrix<T> out;
    const abc::Status st = a.use_x ? attn.validate(qn, a.k, a.v, a.x) : attn.validate(qn, a.k, a.v);
    const bool t = throws([&] { out = a.use_x ? attn.forward(qn, a.k, a.v, a.x) : attn.forward(qn, a.k, a.v); });
    ABC_FUZZ_REQUIRE((st == abc::Status::ok) == !t);
    if (!t && bounded && qb <= cap) ABC_FUZZ_REQUIRE(max_abs(out) < std::numeric_limits<double>::infinity());
  }

  // Gradients (a softmax readout, or RFA's linear one): the forward call's checks plus d_out's;
  // finite for moderate inputs.
  if constexpr (abc::detail::differentiable_control<Control>::value) {
    const abc::Matrix<T> d_out = in.matrix<T>(a.q.rows() + off(8), dv);
    const bool d_ok = d_out.rows() == a.q.rows() && d_out.allFinite();
    bool moderate = values && a.bound <= 100 && weight_bound <= 100 && max_abs(d_out) <= 100 && s <= 10;
    // relu normalises by the sum of the logits themselves (w = s / Σ s): the gradient is of order
    // 1 / Σ s, which no bound on the inputs keeps finite (logits near the smallest normal number).
    if constexpr (std::is_same<Control, abc::control::Mlp<T>>::value)
      if (ctl.activation() == abc::control::Activation::relu) moderate = false;
    // A linear readout's gradient scales as 1 / φ(q)·z, which only a floor keeps bounded; and with
    // unit-norm features, as 1 / ‖q‖ and 1 / ‖k‖ (the slope of x / ‖x‖), which overflows, exactly,
    // for rows as small as the subnormals: those are left out.
    if constexpr (abc::detail::readout_of<Control>::value == abc::Readout::linear) {
      if (!(ctl.denominator_floor() > T(0))) moderate = false;
      if (ctl.features().input_norm() == abc::feature::InputNorm::unit)
        for (const abc::Matrix<T>* rows : {&a.q, &a.k})
          for (Index i = 0; i < rows->rows(); ++i) {
            const double r = rows->cols() > 0 ? double(rows->row(i).cwiseAbs().maxCoeff()) : 0.0;
            if (r > 0 && r < 1e-20) moderate = false;
          }
    }
    for (const bool causal : {false, true}) {
      abc::Gradients<Control> g;
      const abc::Status st = a.use_x ? (causal ? attn.validate(attn.make_state(std::max<Index>(d, 1), std::max<Index>(dv, 1)), a.q, a.k, a.v, a.x)
                                               : attn.validate(a.q, a.k, a.v, a.x))
                                     : (causal ? attn.validate(attn.make_state(std::max<Index>(d, 1), std::max<Index>(dv, 1)), a.q, a.k, a.v)
                                               : attn.validate(a.q, a.k, a.v));
      const bool t = throws([&] {
        if (causal)
          g = a.use_x ? attn.backward_causal(a.q, a.k, a.v, d_out, a.x) : attn.backward_causal(a.q, a.k, a.v, d_out);
        else
          g = a.use_x ? attn.backward(a.q, a.k, a.v, d_out, a.x) : attn.backward(a.q, a.k, a.v, d_out);
      });
      ABC_FUZZ_REQUIRE(t == !(st == abc::Status::ok && d_ok));
      if (!t && moderate)
        ABC_FUZZ_REQUIRE(g.q.allFinite() && g.k.allFinite() && g.v.allFinite() && g.x.allFinite());
    }
  }

  // Causal: a whole-sequence forward_causal, then a state: prefill of p tokens and a step loop.
  abc::Matrix<T> whole;
  const bool whole_threw = throws([&] {
    whole = a.use_x ? attn.forward_causal(a.q, a.k, a.v, a.x) : attn.forward_causal(a.q, a.k, a.v);
  });
  const Index sd = d + off(7), sdv = dv;  // a state of the wrong key width, sometimes
  if (throws([&] { (void)attn.make_state(sd, sdv); })) {
    ABC_FUZZ_REQUIRE(sd < 1 || sdv < 1);
    return;
  }
  const Index p = in.index(0, 64) % (n_tok + 1);
  // A prefill of p tokens then a step loop on `state`, into `out`; false once a call throws.
  const auto decode = [&](auto& state, abc::Matrix<T>& out) {
    {
      const auto before = state;
      const auto q1 = a.q.topRows(std::min(p, a.q.rows())), k1 = a.k.topRows(p), v1 = a.v.topRows(std::min(p, a.v.rows()));
      const auto x1 = a.x.topRows(std::min(p, a.x.rows()));
      const abc::Status st = a.use_x ? attn.validate(state, q1, k1, v1, x1) : attn.validate(state, q1, k1, v1);
      abc::Matrix<T> o;
      const bool t = throws([&] { o = a.use_x ? attn.forward_causal(state, q1, k1, v1, x1) : attn.forward_causal(state, q1, k1, v1); });
      ABC_FUZZ_REQUIRE((st == abc::Status::ok) == !t);
      if (t) {
        ABC_FUZZ_REQUIRE(same_bits(state, before));
        return false;
      }
      out.topRows(p) = o;
    }
    for (Index i = p; i < n_tok; ++i) {
      if (i >= a.q.rows() || i >= a.v.rows() || i >= a.x.rows()) return false;
      const auto before = state;
      abc::Vector<T> o;
      const abc::Vector<T> qi = a.q.row(i).transpose(), ki = a.k.row(i).transpose(), vi = a.v.row(i).transpose(),
                           xi = a.x.row(i).transpose();
      const abc::Status st = a.use_x ? attn.validate_step(state, qi, ki, vi, xi) : attn.validate_step(state, qi, ki, vi);
      const bool t = throws([&] { o = a.use_x ? attn.step(state, qi, ki, vi, xi) : attn.step(state, qi, ki, vi); });
      ABC_FUZZ_REQUIRE((st == abc::Status::ok) == !t);
      if (t) {
        ABC_FUZZ_REQUIRE(same_bits(state, before));
        return false;
      }
      out.row(i) = o.transpose();
    }
    return true;
  };
  auto state = attn.make_state(sd, sdv);
  abc::Matrix<T> got(n_tok, dv);
  const bool all_ok = decode(state, got);
  // The same calls on a state held in bfloat16 (float controls): the same checks pass and fail,
  // a failed call changes nothing, and bounded inputs give finite outputs (rounding saturates).
  if constexpr (std::is_same<T, float>::value) {
    auto packed = attn.make_state(sd, sdv, abc::StateStorage::bfloat16);
    abc::Matrix<T> got_packed(n_tok, dv);
    ABC_FUZZ_REQUIRE(decode(packed, got_packed) == all_ok);
    if (all_ok && bounded) ABC_FUZZ_REQUIRE(max_abs(got_packed) < std::numeric_limits<double>::infinity());
  }
  if (!all_ok || whole_threw) return;
  if (bounded) {
    ABC_FUZZ_REQUIRE(max_abs(whole) < std::numeric_limits<double>::infinity());
    ABC_FUZZ_REQUIRE(max_abs(got) < std::numeric_limits<double>::infinity());
  }
  // Moderate inputs: every score and logit is at most ~50 in magnitude, so the softmax weights of
  // the two evaluation orders differ by ~50·d·ε relative; compare with a loose tolerance.
  const double score_bound = s * double(std::max<Index>(d, 1)) * a.bound * a.bound *
                             (grows ? double(std::max<Index>(n_tok, 1)) * weight_bound : 1.0);
  const double logit_bound = std::is_same<Control, abc::control::Mlp<T>>::value
                                 ? double(dx) * weight_bound * a.bound : 0.0;
  if (values && a.bound <= 100 && score_bound <= 50 && logit_bound <= 50 && sd == d) {
    const double tol = std::is_same<T, float>::value ? 1e-3 : 1e-9;
    const double ref = 1 + std::max(max_abs(whole), max_abs(a.v) * (grows ? double(std::max<Index>(n_tok, 1)) * std::max(1.0, weight_bound) : 1.0));
    std::vector<bool> compared(std::size_t(n_tok), true);
    if constexpr (abc::detail::readout_of<Control>::value == abc::Readout::linear)
      compared = denominator_bounded(ctl, a.q, a.k, a.use_x ? a.x : a.k, n_tok);
    for (Index i = 0; i < n_tok; ++i)
      for (Index j = 0; compared[std::size_t(i)] && j < dv; ++j)
        ABC_FUZZ_REQUIRE(std::abs(double(whole(i, j)) - double(got(i, j))) <= tol * ref);
  }
}

template <class T>
void fuzz(Reader& in) {
  const std::uint8_t kind = in.byte();
  const Index n = in.index(0, 16);
  auto make = [&](auto&& construct, double weight_bound, bool grows) {
    using C = std::decay_t<decltype(construct())>;
    std::optional<C> ctl;
    if (throws([&] { ctl.emplace(construct()); })) return;
    exercise(*ctl, in, weight_bound, grows);
  };
  auto make_checked = [&](auto&& construct, double weight_bound, bool values) {  // RFA: memory grows
    using C = std::decay_t<decltype(construct())>;
    std::optional<C> ctl;
    if (throws([&] { ctl.emplace(construct()); })) return;
    exercise(*ctl, in, weight_bound, true, values);
  };
  switch (kind % 15) {
    case 0: make([&] { return abc::control::SlidingWindow<T>{n}; }, 0, false); break;
    case 1: make([&] { return abc::control::Identity<T>{n}; }, 0, false); break;
    case 2: {
      const Index dx = in.index(0, 16);
      abc::Matrix<T> w = in.matrix<T>(n, dx);
      const auto act = static_cast<abc::control::Activation>(in.byte() % 3);
      const auto norm = static_cast<abc::control::Normalization>(in.byte() % 2);
      const double wb = max_abs(w);
      std::optional<abc::control::Mlp<T>> ctl;
      const bool bad = n < 1 || dx < 1 || !(wb < std::numeric_limits<double>::infinity());
      ABC_FUZZ_REQUIRE(throws([&] { ctl.emplace(w, act, norm); }) == bad);
      if (ctl) exercise(*ctl, in, wb, false);
      break;
    }
    case 3: {
      const Index n_max = in.index(0, 64);
      abc::Matrix<T> w = in.matrix<T>(n, n_max);
      const double wb = max_abs(w);
      make([&] { return abc::control::Linformer<T>{w}; }, wb, true);
      break;
    }
    case 4: {
      const Index c = in.index(0, 8);
      make([&] { return abc::control::Compressive<T>{abc::Slots{n}, c}; }, 0, false);
      break;
    }
    case 5: {
      const std::uint64_t seed = in.u64();
      make([&] { return abc::control::RandomSlot<T>{abc::Slots{n}, abc::Seed(seed)}; }, 0, false);
      break;
    }
    case 6: {
      const Index r = in.index(0, 4);
      make([&] { return abc::control::Dilated<T>{abc::Slots{n}, r}; }, 0, false);
      break;
    }
    case 7: {  // positions may be negative or repeated (config errors)
      std::vector<Index> pos(std::size_t(in.index(0, 8)));
      for (auto& p : pos) p = in.index(-1, 70);
      make([&] { return abc::control::GlobalTokens<T>{pos}; }, 0, false);
      break;
    }
    case 8: {  // a learned gate over a window: every slot decays every token
      const abc::Matrix<T> wg = in.matrix<T>(in.index(0, 8), 1);
      const T bg = in.value<T>();
      make([&] { return abc::control::Gated<abc::control::SlidingWindow<T>>{abc::control::SlidingWindow<T>{n}, wg.col(0), bg}; },
           0, false);
      break;
    }
    case 9: {  // given gates in [0, 1] (0 and 1 exactly, sometimes out of range): max_tokens = count
      abc::Vector<T> g(in.index(0, 40));
      for (Index i = 0; i < g.size(); ++i) {
        const std::uint8_t b = in.byte();
        g(i) = b == 255 ? T(1.5) : T(b % 65) / T(64);
      }
      make([&] { return abc::control::Gated<abc::control::Compressive<T>>{abc::control::Compressive<T>{abc::Slots{n}, 2}, g}; },
           0, false);
      break;
    }
    case 10: {  // given centroids: slot = running mean of the keys nearest to it
      const abc::Matrix<T> c = in.matrix<T>(n, in.index(0, 8));
      make([&] { return abc::control::Cluster<T>{c}; }, 0, false);
      break;
    }
    case 11: {
      const Index g = in.index(0, 4);
      std::vector<Index> pos;
      for (Index i = 0; i < g; ++i) pos.push_back(3 * i + in.index(0, 2));
      make([&] { return abc::control::Concat<abc::control::GlobalTokens<T>, abc::control::SlidingWindow<T>>{
                     abc::control::GlobalTokens<T>{pos}, abc::control::SlidingWindow<T>{n}}; },
           0, false);
      break;
    }
    case 13:
    case 14: {  // RFA: arc-cos features, or sin/cos ones; ungated, a learned gate, or given gates
      const abc::Matrix<T> w = in.matrix<T>(in.index(0, 8), in.index(0, 6));
      const std::uint8_t how = in.byte();
      const auto norm = how & 1 ? abc::feature::InputNorm::unit : abc::feature::InputNorm::raw;
      const bool arccos = kind % 15 == 13;
      static const double floors[] = {0.0, 0.0, 0.25, 1.0};
      const T floor = T(floors[how >> 1 & 3]);
      // Arc-cos features are ≥ 0, so the denominator φ(q)·z has no cancellation: every form gives
      // a convex combination of values, finite and agreeing to rounding. Sin/cos features can make
      // it ≈ 0 for finite inputs: their values are checked only with a floor (|den| ≥ floor).
      const bool values = arccos || floor > T(0);
      const double wb = max_abs(w);
      const auto rfa = [&](auto map) {
        using Map = decltype(map);
        using C = abc::control::RandomFeature<T, Map>;
        switch (how >> 3 & 3) {
          case 0: make_checked([&] { return C{map, floor}; }, wb, values); break;
          case 1: {
            const abc::Matrix<T> wg = in.matrix<T>(in.index(0, 8), 1);
            const T bg = in.value<T>();
            make_checked([&] { return C{map, abc::Vector<T>(wg.col(0)), bg, floor}; }, wb, values);
            break;
          }
          default: {
            std::vector<T> g(std::size_t(in.index(0, 40)));
            for (auto& e : g) {
              const std::uint8_t b = in.byte();
              e = b == 255 ? T(-0.5) : T(b % 65) / T(64);
            }
            make_checked([&] { return C{map, g, floor}; }, wb, values);
          }
        }
      };
      if (arccos) {
        std::optional<abc::feature::ArcCosine<T>> map;
        if (!throws([&] { map.emplace(w, norm); })) rfa(*map);
      } else {
        std::optional<abc::feature::RandomFourier<T>> map;
        if (!throws([&] { map.emplace(w, norm); })) rfa(*map);
      }
      break;
    }
    default: {  // TRAMS top-k eviction, by key norm or by a W_Q score
      const Index slots = in.index(0, 12), recent = in.index(0, 8);  // recent > slots: a config error
      const std::uint8_t how = in.byte();
      if (how % 2) {
        make([&] { return abc::control::TopKEviction<T>{abc::Slots{slots}, recent, abc::select::KeyScore<T>::norm()}; }, 0, false);
      } else {
        const abc::Matrix<T> wq = in.matrix<T>(in.index(0, 8), in.index(0, 8));
        const auto score_kind = static_cast<abc::select::ScoreKind>(how / 2 % 3);
        make([&] { return abc::control::TopKEviction<T>{abc::Slots{slots}, recent, abc::select::KeyScore<T>{wq, score_kind}}; }, 0, false);
      }
      break;
    }
  }
}

}  // namespace

// fuzz<double>, compiled in fuzz_api_double.cpp and fuzz<float> in fuzz_api.cpp: each scalar type
// instantiates every control's forms, the whole of the harness's compile, so that a parallel build
// compiles the two halves side by side.
void fuzz_api_double(abc_fuzz::Reader& in);
