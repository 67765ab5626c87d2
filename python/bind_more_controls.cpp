// SPDX-License-Identifier: MIT
// abc_attention: the controls whose parameters are fixed, not trained through abc: TopKEviction (a
// key score's W_Q), Cluster (centroids, or k-means on the non-causal call's input) and RandomFeature
// (RFA's random features with the linear readout; its backward gives ∂L/∂W and the gate's gradients).
#include <abc/control/cluster.hpp>
#include <abc/control/random_feature.hpp>
#include <abc/control/top_k_eviction.hpp>
#include <abc/feature/random_fourier.hpp>
#include <abc/select/key_score.hpp>

#include <cstdint>
#include <string>
#include <utility>

#include "bind_attention.hpp"
#include "controls.hpp"

namespace abc_python {
namespace {

abc::select::ScoreKind parse_score(const std::string& s) {
  if (s == "trams_code") return abc::select::ScoreKind::trams_code;
  if (s == "trams_paper") return abc::select::ScoreKind::trams_paper;
  if (s == "reformulated_norm") return abc::select::ScoreKind::reformulated_norm;
  if (s == "key_norm") return abc::select::ScoreKind::key_norm;
  throw py::value_error("abc_attention: score is '" + s +
                        "', expected 'trams_code', 'trams_paper', 'reformulated_norm' or 'key_norm'");
}

abc::feature::InputNorm parse_input_norm(const std::string& s) {
  if (s == "unit") return abc::feature::InputNorm::unit;
  if (s == "raw") return abc::feature::InputNorm::raw;
  throw py::value_error("abc_attention: input_norm is '" + s + "', expected 'unit' or 'raw'");
}

// The key score: the plain key norm without w_q, else the chosen score of W_Q (trams_code unless
// `score` says otherwise); abc refuses key_norm with a w_q, naming it.
template <class T>
abc::select::KeyScore<T> make_score(const py::object& w_q, const py::object& score) {
  const std::string kind = score.is_none() ? (w_q.is_none() ? "key_norm" : "trams_code") : score.cast<std::string>();
  if (w_q.is_none()) {
    if (parse_score(kind) != abc::select::ScoreKind::key_norm)
      throw py::value_error("abc_attention: score is '" + kind +
                            "', which needs w_q (the query projection [d, d_model]); without w_q the score is "
                            "'key_norm'");
    return abc::select::KeyScore<T>::norm();
  }
  const InArray<T> w = ensure_array<T>(w_q, "w_q");
  return abc::select::KeyScore<T>(matrix_view(w, "w_q"), parse_score(kind));
}

}  // namespace

template <class T>
void bind_more_controls(py::module_& m) {
  namespace ctl = abc::control;
  const std::string suffix = std::string("_") + dtype_name<T>();
  bind_attention<ctl::TopKEviction<T>>(m, "TopKEviction" + suffix,
                                       "The `recent` newest tokens and the n - recent best-scored older ones "
                                       "(abc::control::TopKEviction); the score reads the keys, or x.")
      .def(py::init([](abc::Index n, abc::Index recent, const py::object& w_q, const py::object& score, double scale,
                       abc::Index chunk) {
             return Attention<ctl::TopKEviction<T>>(
                 ctl::TopKEviction<T>(abc::Slots{n}, recent, make_score<T>(w_q, score)), scale, chunk);
           }),
           py::arg("n"), py::arg("recent"), py::arg("w_q") = py::none(), py::arg("score") = py::none(),
           py::arg("scale") = 0.0, py::arg("chunk") = 16);
  bind_attention<ctl::Cluster<T>>(m, "Cluster" + suffix,
                                  "Slot c holds the mean of the tokens nearest centroid c (abc::control::Cluster): "
                                  "centroids [n, d_x], or n, d_x and seed for k-means fitted by each non-causal "
                                  "call (causal calls then need centroids and are refused).")
      .def(py::init([](const InArray<T>& centroids, double scale, abc::Index chunk) {
             return Attention<ctl::Cluster<T>>(ctl::Cluster<T>(abc::Matrix<T>(matrix_view(centroids, "centroids"))),
                                               scale, chunk);
           }),
           py::arg("centroids"), py::arg("scale") = 0.0, py::arg("chunk") = 16)
      .def(py::init([](abc::Index n, abc::Index d_x, std::uint64_t seed, abc::Index max_iter, double scale,
                       abc::Index chunk) {
             return Attention<ctl::Cluster<T>>(ctl::Cluster<T>(abc::Slots{n}, d_x, abc::Seed{seed}, max_iter), scale,
                                               chunk);
           }),
           py::arg("n"), py::arg("d_x"), py::arg("seed"), py::arg("max_iter") = 100, py::arg("scale") = 0.0,
           py::arg("chunk") = 16);
  using Rfa = ctl::RandomFeature<T>;
  bind_attention<Rfa>(m, "RandomFeature" + suffix,
                      "RFA (abc::control::RandomFeature with feature::RandomFourier): phi(x) = sqrt(1/D) [sin(W x), "
                      "cos(W x)], w [D, d], linear readout; gated by sigmoid(w_g . x + b_g) when w_g is given. "
                      "backward gives w, w_g and b_g (w_g empty and b_g 0 without a gate).")
      .def(py::init([](const InArray<T>& w, const std::string& input_norm, const py::object& w_g, double b_g,
                       double floor, double scale, abc::Index chunk) {
             abc::feature::RandomFourier<T> phi(abc::Matrix<T>(matrix_view(w, "w")), parse_input_norm(input_norm));
             if (w_g.is_none()) return Attention<Rfa>(Rfa(std::move(phi), T(floor)), scale, chunk);
             const InArray<T> g = ensure_array<T>(w_g, "w_g");
             return Attention<Rfa>(Rfa(std::move(phi), abc::Vector<T>(vector_view(g, "w_g")), T(b_g), T(floor)), scale,
                                   chunk);
           }),
           py::arg("w"), py::arg("input_norm") = "unit", py::arg("w_g") = py::none(), py::arg("b_g") = 0.0,
           py::arg("floor") = 0.0, py::arg("scale") = 0.0, py::arg("chunk") = 16);
}

template void bind_more_controls<float>(py::module_&);
template void bind_more_controls<double>(py::module_&);

}  // namespace abc_python
