// SPDX-License-Identifier: MIT
// abc_attention: the template that binds abc::BoundedAttention<Control> for one control type.
#pragma once

#include <abc/bounded_attention.hpp>
#include <abc/gradients.hpp>
#include <abc/state_io.hpp>

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "has_backward.hpp"

namespace abc_python {

namespace py = pybind11;

// Inputs: a C-contiguous array of the class's scalar type is viewed in place; anything else (other
// dtype, strides) is converted once by numpy, as forcecast asks.
template <class T>
using InArray = py::array_t<T, py::array::c_style | py::array::forcecast>;

// [rows × cols] view of a 2-D input; MatrixRef binds to the Map without a copy (row-major, unit
// inner stride). The message names the argument, as abc's own checks do.
template <class T>
Eigen::Map<const abc::Matrix<T>> matrix_view(const InArray<T>& a, const char* name) {
  if (a.ndim() != 2)
    throw py::value_error(std::string("abc_attention: ") + name + " has " + std::to_string(a.ndim()) +
                          " dimensions, expected 2 (one row per token)");
  return Eigen::Map<const abc::Matrix<T>>(a.data(), abc::Index(a.shape(0)), abc::Index(a.shape(1)));
}

// An optional argument (x, b_f, w_g, ...) as an array of the class's scalar type, viewed or
// converted as InArray's are.
template <class T>
InArray<T> ensure_array(const py::object& a, const char* name) {
  InArray<T> out = InArray<T>::ensure(a);
  if (!out)
    throw py::value_error(std::string("abc_attention: ") + name +
                          " is not convertible to an array of the attention's dtype");
  return out;
}

template <class T>
Eigen::Map<const abc::Vector<T>> vector_view(const InArray<T>& a, const char* name) {
  if (a.ndim() != 1)
    throw py::value_error(std::string("abc_attention: ") + name + " has " + std::to_string(a.ndim()) +
                          " dimensions, expected 1 (one token)");
  return Eigen::Map<const abc::Vector<T>>(a.data(), abc::Index(a.shape(0)));
}

// Results: the Eigen object moves onto the heap and the numpy array borrows its buffer, freed
// with the array, so nothing is copied on the way out.
template <class T, class M>
py::array_t<T> to_numpy(M&& m) {
  using Owned = std::decay_t<M>;
  auto* owned = new Owned(std::forward<M>(m));
  py::capsule free_when_done(owned, [](void* p) { delete static_cast<Owned*>(p); });
  const auto item = static_cast<py::ssize_t>(sizeof(T));
  if constexpr (Owned::ColsAtCompileTime == 1) {
    return py::array_t<T>({static_cast<py::ssize_t>(owned->size())}, {item}, owned->data(), free_when_done);
  } else {
    const auto rows = static_cast<py::ssize_t>(owned->rows()), cols = static_cast<py::ssize_t>(owned->cols());
    return py::array_t<T>({rows, cols}, {cols * item, item}, owned->data(), free_when_done);
  }
}

// A numpy copy, for values the caller must not alias (a State's memory changes under later calls).
template <class T, class M>
py::array_t<T> copy_to_numpy(const M& m) {
  using Owned = std::conditional_t<M::ColsAtCompileTime == 1, abc::Vector<T>, abc::Matrix<T>>;
  return to_numpy<T>(Owned(m));
}

// The parameter gradient of each control, under the names of its Gradient members.
inline void add_parameter_gradient(py::dict&, const abc::NoParameters&) {}

template <class Gradient, class T = typename decltype(std::declval<Gradient>().w_phi)::Scalar>
auto add_parameter_gradient(py::dict& d, const Gradient& g) -> decltype(g.w_phi, void()) {
  d["w_phi"] = copy_to_numpy<T>(g.w_phi);
}
template <class Gradient, class T = typename decltype(std::declval<Gradient>().w_f)::Scalar>
auto add_parameter_gradient(py::dict& d, const Gradient& g) -> decltype(g.w_f, g.b_f, void()) {
  d["w_f"] = copy_to_numpy<T>(g.w_f);
  d["b_f"] = copy_to_numpy<T>(g.b_f);
}
template <class Gradient, class T = typename decltype(std::declval<Gradient>().w_lf)::Scalar>
auto add_parameter_gradient(py::dict& d, const Gradient& g) -> decltype(g.w_lf, void()) {
  d["w_lf"] = copy_to_numpy<T>(g.w_lf);
}
// RandomFeature (RFA): ∂L/∂W of the feature map, and the learned gate's (w_g empty, b_g 0 without one).
template <class Gradient, class T = typename decltype(std::declval<Gradient>().w)::Scalar>
auto add_parameter_gradient(py::dict& d, const Gradient& g) -> decltype(g.w, g.w_g, g.b_g, void()) {
  d["w"] = copy_to_numpy<T>(g.w);
  d["w_g"] = copy_to_numpy<T>(g.w_g);
  d["b_g"] = py::float_(double(g.b_g));
}
// Gated<Inner>: its own gate's gradient, and the inner control's in a dict of its own ("inner").
template <class Gradient, class T = typename decltype(std::declval<Gradient>().w_g)::Scalar>
auto add_parameter_gradient(py::dict& d, const Gradient& g) -> decltype(g.w_g, g.b_g, g.inner, void()) {
  d["w_g"] = copy_to_numpy<T>(g.w_g);
  d["b_g"] = py::float_(double(g.b_g));
  py::dict inner;
  add_parameter_gradient(inner, g.inner);
  d["inner"] = std::move(inner);
}

// abc::StateStorage from its Python name; another name raises ValueError naming the call.
inline abc::StateStorage storage_of(const std::string& name, const char* call) {
  if (name == "native") return abc::StateStorage::native;
  if (name == "bfloat16") return abc::StateStorage::bfloat16;
  throw abc::config_error(std::string(call) + ": storage is '" + name + "', expected 'native' or 'bfloat16'");
}

// The state of a blob, held in `kept`: abc::load_state keeps its destination's storage but checks
// the widths of any destination not default-constructed, so a state in another storage than a
// default one's is made to the widths the first load read, and the blob loaded into it.
template <class Control>
abc::State<typename Control::scalar_type> load_held(const abc::BoundedAttention<Control>& attn,
                                                    const std::uint8_t* bytes, std::size_t size,
                                                    abc::StateStorage kept) {
  abc::State<typename Control::scalar_type> s;
  abc::load_state(attn, bytes, size, s);
  if (kept == s.storage()) return s;
  abc::State<typename Control::scalar_type> held = attn.make_state(s.key_dim(), s.value_dim(), kept);
  abc::load_state(attn, bytes, size, held);
  return held;
}

// abc::Options from the factories' keyword arguments (every other option keeps abc's default).
inline abc::Options make_options(double scale, abc::Index chunk) {
  abc::Options o;
  o.scale = scale;
  o.chunk = chunk;
  return o;
}

/// A BoundedAttention<Control> as Python sees it: the operator plus the calls' numpy plumbing.
template <class Control>
class Attention {
 public:
  using T = typename Control::scalar_type;
  using State = abc::State<T>;
  using Array = InArray<T>;

  Attention(Control control, double scale, abc::Index chunk) : attn_(std::move(control), make_options(scale, chunk)) {}
  // One memory of a multi-head layer, as a single-head attention of its own.
  explicit Attention(abc::BoundedAttention<Control> attn) : attn_(std::move(attn)) {}

  const abc::BoundedAttention<Control>& attention() const noexcept { return attn_; }

  py::array_t<T> forward(const Array& q, const Array& k, const Array& v, const py::object& x) const {
    return with_x(x, [&](const auto& rows) {
      const auto qm = matrix_view(q, "q"), km = matrix_view(k, "k"), vm = matrix_view(v, "v");
      abc::Matrix<T> out;
      {
        py::gil_scoped_release unlocked;
        out = attn_.forward(qm, km, vm, rows);
      }
      return to_numpy<T>(std::move(out));
    });
  }

  py::array_t<T> forward_causal(const Array& q, const Array& k, const Array& v, const py::object& x) const {
    return with_x(x, [&](const auto& rows) {
      const auto qm = matrix_view(q, "q"), km = matrix_view(k, "k"), vm = matrix_view(v, "v");
      abc::Matrix<T> out;
      {
        py::gil_scoped_release unlocked;
        out = attn_.forward_causal(qm, km, vm, rows);
      }
      return to_numpy<T>(std::move(out));
    });
  }

  py::array_t<T> forward_causal_state(State& state, const Array& q, const Array& k, const Array& v,
                                      const py::object& x) const {
    return with_x(x, [&](const auto& rows) {
      const auto qm = matrix_view(q, "q"), km = matrix_view(k, "k"), vm = matrix_view(v, "v");
      abc::Matrix<T> out;
      {
        py::gil_scoped_release unlocked;
        out = attn_.forward_causal(state, qm, km, vm, rows);
      }
      return to_numpy<T>(std::move(out));
    });
  }

  py::array_t<T> step(State& state, const Array& q, const Array& k, const Array& v, const py::object& x) const {
    const auto qv = vector_view(q, "q"), kv = vector_view(k, "k"), vv = vector_view(v, "v");
    abc::Vector<T> out;
    if (x.is_none()) {
      py::gil_scoped_release unlocked;
      out = attn_.step(state, qv, kv, vv);
    } else {
      const Array xa = ensure_array<T>(x, "x");
      const auto xv = vector_view(xa, "x");
      py::gil_scoped_release unlocked;
      out = attn_.step(state, qv, kv, vv, xv);
    }
    return to_numpy<T>(std::move(out));
  }

  py::dict backward(const Array& q, const Array& k, const Array& v, const Array& d_out, const py::object& x) const {
    return with_x(x, [&](const auto& rows) {
      const auto qm = matrix_view(q, "q"), km = matrix_view(k, "k"), vm = matrix_view(v, "v");
      const auto dm = matrix_view(d_out, "d_out");
      abc::Gradients<Control> g;
      {
        py::gil_scoped_release unlocked;
        g = attn_.backward(qm, km, vm, dm, rows);
      }
      return gradient_dict(std::move(g), !x.is_none());
    });
  }

  py::dict backward_causal(const Array& q, const Array& k, const Array& v, const Array& d_out,
                           const py::object& x) const {
    return with_x(x, [&](const auto& rows) {
      const auto qm = matrix_view(q, "q"), km = matrix_view(k, "k"), vm = matrix_view(v, "v");
      const auto dm = matrix_view(d_out, "d_out");
      abc::Gradients<Control> g;
      {
        py::gil_scoped_release unlocked;
        g = attn_.backward_causal(qm, km, vm, dm, rows);
      }
      return gradient_dict(std::move(g), !x.is_none());
    });
  }

  State make_state(abc::Index d, abc::Index dv, const std::string& storage) const {
    return attn_.make_state(d, dv, storage_of(storage, "make_state"));
  }

  py::bytes save_state(const State& state) const {
    const std::vector<std::uint8_t> blob = abc::save_state(attn_, state);
    return py::bytes(reinterpret_cast<const char*>(blob.data()), blob.size());
  }

  State load_state(const py::bytes& blob, const std::string& storage) const {
    const abc::StateStorage kept = storage_of(storage, "load_state");
    char* data = nullptr;
    py::ssize_t size = 0;
    if (PyBytes_AsStringAndSize(blob.ptr(), &data, &size) != 0) throw py::error_already_set();
    return load_held(attn_, reinterpret_cast<const std::uint8_t*>(data), static_cast<std::size_t>(size), kept);
  }

 private:
  // Runs `call` with the control input: none (the control reads the keys), or x viewed as rows.
  template <class Call>
  static auto with_x(const py::object& x, Call&& call) {
    using Rows = typename abc::BoundedAttention<Control>::Rows;
    if (x.is_none()) return call(Rows{});
    const Array xa = ensure_array<T>(x, "x");
    return call(Rows{matrix_view(xa, "x")});
  }

  static py::dict gradient_dict(abc::Gradients<Control>&& g, bool has_x) {
    py::dict d;
    d["q"] = to_numpy<T>(std::move(g.q));
    d["k"] = to_numpy<T>(std::move(g.k));
    d["v"] = to_numpy<T>(std::move(g.v));
    if (has_x) d["x"] = to_numpy<T>(std::move(g.x));
    add_parameter_gradient(d, g.control);
    return d;
  }

  abc::BoundedAttention<Control> attn_;
};

template <class T>
const char* dtype_name() {
  return sizeof(T) == 8 ? "float64" : "float32";
}

/// Binds abc::State<T> once per scalar type (every control's states share the class; a call with
/// another control's state is refused by abc itself, by the control type the state records).
template <class T>
void bind_state(py::module_& m) {
  using State = abc::State<T>;
  const std::string name = std::string("State_") + dtype_name<T>();
  py::class_<State>(m, name.c_str(),
                    "A decode state: the memory of n slots and the position, of one control type. "
                    "keys and values are copies.")
      .def_property_readonly("position", &State::position)
      .def_property_readonly("num_slots", &State::num_slots)
      .def_property_readonly("key_dim", &State::key_dim)
      .def_property_readonly("value_dim", &State::value_dim)
      .def_property_readonly(
          "storage",
          [](const State& s) { return s.storage() == abc::StateStorage::bfloat16 ? "bfloat16" : "native"; },
          "'native' (the state's dtype) or 'bfloat16' (the memory held in bfloat16 between calls).")
      .def_property_readonly("keys", [](const State& s) { return copy_to_numpy<T>(s.keys()); })
      .def_property_readonly("values", [](const State& s) { return copy_to_numpy<T>(s.values()); })
      .def("copy", [](const State& s) { return State(s); }, "A copy, to fork a sequence.")
      .def("__copy__", [](const State& s) { return State(s); })
      .def("__deepcopy__", [](const State& s, const py::dict&) { return State(s); })
      .def("reset", &State::reset, "Back to the empty memory at position 0.")
      .def("__eq__", [](const State& a, const State& b) { return a == b; });
}

/// Binds Attention<Control> as `name` (e.g. "Mlp_float64") with every call the control has
/// (backward and backward_causal only where C++ has them); the caller adds the constructor, which
/// is the only part that differs between controls.
template <class Control>
py::class_<Attention<Control>> bind_attention(py::module_& m, const std::string& name, const char* doc) {
  using A = Attention<Control>;
  using T = typename A::T;
  const py::arg_v x_none = py::arg("x") = py::none();
  py::class_<A> c(m, name.c_str(), doc);
  c
      .def_property_readonly("num_slots", [](const A& a) { return a.attention().num_slots(); })
      .def_property_readonly("dtype", [](const A&) { return py::dtype::of<T>(); })
      .def("forward", &A::forward, py::arg("q"), py::arg("k"), py::arg("v"), x_none,
           "Non-causal attention: every query reads the memory of all keys. Returns [M, dv].")
      .def("forward_causal", &A::forward_causal, py::arg("q"), py::arg("k"), py::arg("v"), x_none,
           "Causal attention from an empty state. Returns [N, dv].")
      .def("forward_causal_state", &A::forward_causal_state, py::arg("state"), py::arg("q"), py::arg("k"),
           py::arg("v"), x_none, "Causal attention continuing `state`, which advances by N tokens.")
      .def("step", &A::step, py::arg("state"), py::arg("q"), py::arg("k"), py::arg("v"), x_none,
           "One token (1-D q, k, v and x) continuing `state`. Returns [dv].")
      .def("make_state", &A::make_state, py::arg("d"), py::arg("dv"), py::arg("storage") = "native",
           "An empty state for keys of width d, values of width dv; storage 'bfloat16' (float32 only) "
           "holds its memory in bfloat16 between calls.")
      .def("save_state", &A::save_state, py::arg("state"), "The state as abc's versioned binary blob (bytes).")
      .def("load_state", &A::load_state, py::arg("blob"), py::arg("storage") = "native",
           "A state from a blob written by save_state, held in `storage` ('native', or 'bfloat16' for "
           "float32: the blob's memory rounded to bfloat16).");
  if constexpr (has_backward<Control>) {
    c.def("backward", &A::backward, py::arg("q"), py::arg("k"), py::arg("v"), py::arg("d_out"), x_none,
          "Gradients of forward: dict with q, k, v, x (when given) and the control's parameters.")
        .def("backward_causal", &A::backward_causal, py::arg("q"), py::arg("k"), py::arg("v"), py::arg("d_out"),
             x_none, "Gradients of forward_causal from an empty state, as backward's dict.");
  }
  return c;
}

}  // namespace abc_python
