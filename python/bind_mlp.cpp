// SPDX-License-Identifier: MIT
// abc_attention: ABC-MLP (control::Mlp) and its gated form (control::Gated<Mlp>).
#include <abc/control/gated.hpp>
#include <abc/control/mlp.hpp>

#include <string>

#include "bind_attention.hpp"
#include "controls.hpp"
#include "mlp_options.hpp"

namespace abc_python {
template <class T>
void bind_mlp(py::module_& m) {
  using C = abc::control::Mlp<T>;
  bind_attention<C>(m, std::string("Mlp_") + dtype_name<T>(),
                    "ABC-MLP (abc::control::Mlp): slot logits W_phi x, w_phi [n, d_x].")
      .def(py::init([](const InArray<T>& w_phi, const std::string& activation, const std::string& normalization,
                       double scale, abc::Index chunk) {
             return Attention<C>(make_mlp<T>(abc::Matrix<T>(matrix_view(w_phi, "w_phi")), activation, normalization),
                                 scale, chunk);
           }),
           py::arg("w_phi"), py::arg("activation") = "exp", py::arg("normalization") = "prefix",
           py::arg("scale") = 0.0, py::arg("chunk") = 16);
}

template <class T>
void bind_gated_mlp(py::module_& m) {
  using C = abc::control::Gated<abc::control::Mlp<T>>;
  bind_attention<C>(m, std::string("GatedMlp_") + dtype_name<T>(),
                    "ABC-MLP under a forget gate sigmoid(w_g . x + b_g) (abc::control::Gated<Mlp>).")
      .def(py::init([](const InArray<T>& w_phi, const InArray<T>& w_g, double b_g, const std::string& activation,
                       const std::string& normalization, double scale, abc::Index chunk) {
             return Attention<C>(C(make_mlp<T>(abc::Matrix<T>(matrix_view(w_phi, "w_phi")), activation,
                                               normalization),
                                   abc::Vector<T>(vector_view(w_g, "w_g")), T(b_g)),
                                 scale, chunk);
           }),
           py::arg("w_phi"), py::arg("w_g"), py::arg("b_g") = 0.0, py::arg("activation") = "exp",
           py::arg("normalization") = "prefix", py::arg("scale") = 0.0, py::arg("chunk") = 16);
}

template void bind_mlp<float>(py::module_&);
template void bind_mlp<double>(py::module_&);
template void bind_gated_mlp<float>(py::module_&);
template void bind_gated_mlp<double>(py::module_&);

}  // namespace abc_python
