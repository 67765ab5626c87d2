// SPDX-License-Identifier: MIT
// abc_attention: Gated Slot Attention (control::SlotGates) and Linformer (control::Linformer).
#include <abc/control/linformer.hpp>
#include <abc/control/slot_gates.hpp>

#include <string>

#include "bind_attention.hpp"
#include "controls.hpp"

namespace abc_python {

template <class T>
void bind_slot_gates(py::module_& m) {
  using C = abc::control::SlotGates<T>;
  bind_attention<C>(m, std::string("SlotGates_") + dtype_name<T>(),
                    "Gated Slot Attention (abc::control::SlotGates): f = sigmoid(W_f x + b_f)^(1/tau), "
                    "w_f [n, d_x], b_f [n] or None.")
      .def(py::init([](const InArray<T>& w_f, const py::object& b_f, double tau, double scale, abc::Index chunk) {
             abc::Matrix<T> w(matrix_view(w_f, "w_f"));
             if (b_f.is_none()) return Attention<C>(C(std::move(w), T(tau)), scale, chunk);
             const InArray<T> b = ensure_array<T>(b_f, "b_f");
             return Attention<C>(C(std::move(w), abc::Vector<T>(vector_view(b, "b_f")), T(tau)), scale, chunk);
           }),
           py::arg("w_f"), py::arg("b_f") = py::none(), py::arg("tau") = 8.0, py::arg("scale") = 0.0,
           py::arg("chunk") = 16);
}

template <class T>
void bind_linformer(py::module_& m) {
  using C = abc::control::Linformer<T>;
  bind_attention<C>(m, std::string("Linformer_") + dtype_name<T>(),
                    "Linformer (abc::control::Linformer): write w_t = W_LF[:, t], w_lf [n, N_max].")
      .def(py::init([](const InArray<T>& w_lf, double scale, abc::Index chunk) {
             return Attention<C>(C(abc::Matrix<T>(matrix_view(w_lf, "w_lf"))), scale, chunk);
           }),
           py::arg("w_lf"), py::arg("scale") = 0.0, py::arg("chunk") = 16);
}

template void bind_slot_gates<float>(py::module_&);
template void bind_slot_gates<double>(py::module_&);
template void bind_linformer<float>(py::module_&);
template void bind_linformer<double>(py::module_&);

}  // namespace abc_python
