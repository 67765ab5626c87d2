// SPDX-License-Identifier: MIT
// abc_attention: the Python module. abc::BoundedAttention for each built-in control in float64 and
// float32 (classes such as Mlp_float64), and one factory per control (Mlp, ...) that picks the
// class from a dtype argument or from the dtype of the weights given; MultiHeadMlp the same for
// abc::MultiHeadAttention with ABC-MLP controls.
#include <abc/error.hpp>
#include <abc/state.hpp>

#include <cstddef>
#include <string>

#include "bind_attention.hpp"
#include "controls.hpp"

namespace abc_python {
namespace {

// 4 for float32, 8 for float64; anything else is refused, naming what was given.
py::ssize_t scalar_size(const py::dtype& dt) {
  if (dt.kind() == 'f' && (dt.itemsize() == 4 || dt.itemsize() == 8)) return dt.itemsize();
  throw py::value_error("abc_attention: dtype is " + dt.attr("name").cast<std::string>() + ", expected float32 or float64");
}

// `name(*args, dtype=None, **kwargs)`: the class name + "_float32" or "_float64", chosen by
// `dtype`, else by the dtype of the weights (positional argument `weights_at`, or keyword
// `weights`), else float64 (numpy's default, and what torch.autograd.gradcheck needs).
void def_factory(py::module_& m, const std::string& name, const char* weights, const char* doc,
                 std::size_t weights_at = 0) {
  const py::object f32 = m.attr((name + "_float32").c_str()), f64 = m.attr((name + "_float64").c_str());
  const std::string weights_name = weights ? weights : "";
  m.def(
      name.c_str(),
      [f32, f64, weights_name, weights_at](const py::args& args, const py::kwargs& kwargs) -> py::object {
        py::dict kw = py::reinterpret_steal<py::dict>(PyDict_Copy(kwargs.ptr()));
        const py::object dtype = kw.attr("pop")("dtype", py::none());
        py::ssize_t size = 8;
        if (!dtype.is_none()) {
          size = scalar_size(py::dtype::from_args(dtype));
        } else if (!weights_name.empty()) {
          py::object w = args.size() > weights_at ? py::object(args[weights_at])
                                         : (kw.contains(weights_name.c_str()) ? py::object(kw[weights_name.c_str()])
                                                                              : py::none());
          if (py::isinstance<py::array>(w)) {
            const py::dtype dt = py::reinterpret_borrow<py::array>(w).dtype();
            if (dt.kind() == 'f' && dt.itemsize() == 4) size = 4;
          }
        }
        return (size == 4 ? f32 : f64)(*args, **kw);
      },
      doc);
}

}  // namespace
}  // namespace abc_python

PYBIND11_MODULE(abc_attention, m) {
  namespace ap = abc_python;
  m.doc() =
      "abc's bounded-memory attention (abc::BoundedAttention) on numpy arrays: forward, forward_causal, "
      "step, backward, backward_causal (where abc has them), and decode states with save/load; "
      "abc::MultiHeadAttention (MultiHeadMlp) with its decode Pool. Errors raise ValueError with abc's "
      "message.";
  ap::bind_state<double>(m);
  ap::bind_state<float>(m);
  ap::bind_mlp<double>(m);
  ap::bind_mlp<float>(m);
  ap::bind_gated_mlp<double>(m);
  ap::bind_gated_mlp<float>(m);
  ap::bind_slot_gates<double>(m);
  ap::bind_slot_gates<float>(m);
  ap::bind_linformer<double>(m);
  ap::bind_linformer<float>(m);
  ap::bind_parameter_free<double>(m);
  ap::bind_parameter_free<float>(m);
  ap::bind_more_controls<double>(m);
  ap::bind_more_controls<float>(m);
  ap::bind_multi_head_mlp<double>(m);
  ap::bind_multi_head_mlp<float>(m);

  ap::def_factory(m, "Mlp", "w_phi",
                  "Mlp(w_phi, activation='exp', normalization='prefix', scale=0.0, chunk=16, dtype=None)");
  ap::def_factory(m, "GatedMlp", "w_phi",
                  "GatedMlp(w_phi, w_g, b_g=0.0, activation='exp', normalization='prefix', scale=0.0, chunk=16, "
                  "dtype=None)");
  ap::def_factory(m, "SlotGates", "w_f", "SlotGates(w_f, b_f=None, tau=8.0, scale=0.0, chunk=16, dtype=None)");
  ap::def_factory(m, "Linformer", "w_lf", "Linformer(w_lf, scale=0.0, chunk=16, dtype=None)");
  ap::def_factory(m, "SlidingWindow", nullptr, "SlidingWindow(n, scale=0.0, chunk=16, dtype=None)");
  ap::def_factory(m, "Identity", nullptr, "Identity(n, scale=0.0, chunk=16, dtype=None)");
  ap::def_factory(m, "Dilated", nullptr, "Dilated(n, r, scale=0.0, chunk=16, dtype=None)");
  ap::def_factory(m, "RandomSlot", nullptr, "RandomSlot(n, seed, scale=0.0, chunk=16, dtype=None)");
  ap::def_factory(m, "Compressive", nullptr, "Compressive(n, c, scale=0.0, chunk=16, dtype=None)");
  ap::def_factory(m, "GlobalTokens", nullptr, "GlobalTokens(positions, scale=0.0, chunk=16, dtype=None)");
  ap::def_factory(m, "LocalGlobal", nullptr, "LocalGlobal(positions, n, scale=0.0, chunk=16, dtype=None)");
  ap::def_factory(m, "TopKEviction", "w_q",
                  "TopKEviction(n, recent, w_q=None, score=None, scale=0.0, chunk=16, dtype=None)", 2);
  ap::def_factory(m, "Cluster", "centroids",
                  "Cluster(centroids, scale=0.0, chunk=16, dtype=None) or Cluster(n, d_x, seed, max_iter=100, "
                  "scale=0.0, chunk=16, dtype=None)");
  ap::def_factory(m, "RandomFeature", "w",
                  "RandomFeature(w, input_norm='unit', w_g=None, b_g=0.0, floor=0.0, scale=0.0, chunk=16, "
                  "dtype=None)");
  ap::def_factory(m, "MultiHeadMlp", "w_phi",
                  "MultiHeadMlp(w_phi, heads, kv_heads=None, activation='exp', normalization='prefix', scale=0.0, "
                  "chunk=16, dtype=None)");

  // abc's shape_error and config_error derive from std::invalid_argument, which pybind11 already
  // turns into ValueError with the same message; the two names let Python code say which it expects.
  m.attr("ShapeError") = pybind11::handle(PyExc_ValueError);
  m.attr("ConfigError") = pybind11::handle(PyExc_ValueError);
}
