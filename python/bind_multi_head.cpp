// SPDX-License-Identifier: MIT
// abc_attention: abc::MultiHeadAttention with ABC-MLP controls (MultiHeadMlp_float64 / _float32) and
// its decode Pool, on numpy arrays in the [batch, seq, heads, dim] layout (abc::HeadTensor::bshd).
#include <abc/control/mlp.hpp>
#include <abc/multi_head_attention.hpp>
#include <abc/state_io.hpp>

#include <pybind11/stl.h>

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "bind_attention.hpp"
#include "controls.hpp"
#include "mlp_options.hpp"

namespace abc_python {
namespace {

// A view of a C-contiguous array as a HeadTensor, no copy: 4-D [batch, seq, heads, dim], or with
// `token` 3-D [batch, heads, dim], one token per sequence (a decode step), which lies in memory as
// [batch, 1, heads, dim]. The message names the argument, as matrix_view's does.
template <class T>
abc::HeadTensor<T> heads_view(T* data, const py::array& a, const char* name, bool token) {
  const py::ssize_t want = token ? 3 : 4;
  if (a.ndim() != want)
    throw py::value_error(std::string("abc_attention: ") + name + " has " + std::to_string(a.ndim()) +
                          " dimensions, expected " + std::to_string(want) +
                          (token ? " ([batch, heads, dim]: one token per sequence)" : " ([batch, seq, heads, dim])"));
  const auto at = [&](py::ssize_t i) { return abc::Index(a.shape(i)); };
  return token ? abc::HeadTensor<T>::bshd(data, at(0), 1, at(1), at(2))
               : abc::HeadTensor<T>::bshd(data, at(0), at(1), at(2), at(3));
}

/// A MultiHeadAttention<Control> as Python sees it: every call allocates its output as a numpy
/// array that abc writes in place, and reads its inputs in place.
template <class Control>
class MultiHead {
 public:
  using T = typename Control::scalar_type;
  using Layer = abc::MultiHeadAttention<Control>;
  using Pool = typename Layer::Pool;
  using SeqId = typename Layer::SeqId;
  using Array = InArray<T>;
  using In = abc::HeadTensor<const T>;
  using Out = abc::HeadTensor<T>;

  explicit MultiHead(Layer layer) : layer_(std::move(layer)) {}

  const Layer& layer() const noexcept { return layer_; }

  py::array_t<T> forward(const Array& q, const Array& k, const Array& v, const py::object& x) const {
    return call(q, k, v, x, false, [&](const In& qh, const In& kh, const In& vh, const In* xh, const Out& out) {
      if (xh) layer_.forward(qh, kh, vh, *xh, out);
      else layer_.forward(qh, kh, vh, out);
    });
  }

  py::array_t<T> forward_causal(const Array& q, const Array& k, const Array& v, const py::object& x) const {
    return call(q, k, v, x, false, [&](const In& qh, const In& kh, const In& vh, const In* xh, const Out& out) {
      if (xh) layer_.forward_causal(qh, kh, vh, *xh, out);
      else layer_.forward_causal(qh, kh, vh, out);
    });
  }

  // The pooled forms: a prefill ([batch, seq, heads, dim]) or, with `token`, a batched decode step
  // ([batch, heads, dim]); both are MultiHeadAttention::forward_causal(pool, ids, ...).
  py::array_t<T> continue_pool(Pool& pool, const std::vector<SeqId>& ids, const Array& q, const Array& k,
                               const Array& v, const py::object& x, bool token) const {
    return call(q, k, v, x, token, [&](const In& qh, const In& kh, const In& vh, const In* xh, const Out& out) {
      if (xh) layer_.forward_causal(pool, ids, qh, kh, vh, *xh, out);
      else layer_.forward_causal(pool, ids, qh, kh, vh, out);
    });
  }

  void add_memory(Pool& pool, const std::vector<SeqId>& ids, const Array& k, const Array& v,
                  const py::object& x) const {
    const In kh = heads_view(k.data(), k, "k", false), vh = heads_view(v.data(), v, "v", false);
    const std::optional<Array> xa = control_input(x);
    const std::optional<In> xh = xa ? std::optional<In>(heads_view(xa->data(), *xa, "x", false)) : std::nullopt;
    py::gil_scoped_release unlocked;
    if (xh) layer_.add_memory(pool, ids, kh, vh, *xh);
    else layer_.add_memory(pool, ids, kh, vh);
  }

  py::array_t<T> read(const Pool& pool, const std::vector<SeqId>& ids, const Array& q) const {
    const In qh = heads_view(q.data(), q, "q", false);
    // The memories' value width, from the first sequence; a missing id is left to abc's checks,
    // which name it.
    const abc::Index dv = !ids.empty() && pool.contains(ids.front()) ? pool.states(ids.front()).front().value_dim() : 0;
    py::array_t<T> out = output(q, dv);
    const Out oh = heads_view(out.mutable_data(), out, "out", false);
    py::gil_scoped_release unlocked;
    layer_.read(pool, ids, qh, oh);
    return out;
  }

  // One blob per memory (abc::save_state of memory m's attention and state), in memory order; each
  // loads into a state with memory(m).load_state.
  std::vector<py::bytes> save_state(const Pool& pool, SeqId id) const {
    const std::vector<typename Layer::state_type>& states = pool.states(id);
    std::vector<py::bytes> blobs;
    for (abc::Index m = 0; m < layer_.memories(); ++m) {
      const std::vector<std::uint8_t> blob = abc::save_state(layer_.memory(m), states[std::size_t(m)]);
      blobs.emplace_back(reinterpret_cast<const char*>(blob.data()), blob.size());
    }
    return blobs;
  }

  // Adds sequence id with the states of save_state's blobs (one per memory, in memory order): a
  // decode resumed. Each blob is read by memory m's abc::load_state, then the layer's add checks the
  // states together; a failure changes nothing.
  void load_state(Pool& pool, SeqId id, const std::vector<py::bytes>& blobs, const std::string& storage) const {
    using State = typename Layer::state_type;
    const abc::StateStorage kept = storage_of(storage, "load_state");
    if (blobs.size() != std::size_t(layer_.memories()))
      layer_.add(pool, id, std::vector<State>(blobs.size()));  // throws: the wrong count, by name
    std::vector<State> states;
    for (abc::Index m = 0; m < layer_.memories(); ++m) {
      const std::string blob = blobs[std::size_t(m)];
      states.push_back(load_held(layer_.memory(m), reinterpret_cast<const std::uint8_t*>(blob.data()), blob.size(), kept));
    }
    layer_.add(pool, id, std::move(states));
  }

  // An unchecked index of the C++ API (memory_of, memory), checked here against its bound.
  static abc::Index checked(const char* name, abc::Index i, abc::Index bound, const char* what) {
    if (i < 0 || i >= bound)
      throw py::value_error(std::string("abc_attention: ") + name + " is " + std::to_string(i) + ", expected 0 <= " +
                            name + " < " + std::to_string(bound) + " (" + what + ")");
    return i;
  }

 private:
  static std::optional<Array> control_input(const py::object& x) {
    if (x.is_none()) return std::nullopt;
    return ensure_array<T>(x, "x");
  }

  // [q's batch, seq and heads, dv]: the output abc writes, every element of it.
  static py::array_t<T> output(const Array& q, abc::Index dv) {
    std::vector<py::ssize_t> shape(q.shape(), q.shape() + q.ndim());
    shape.back() = static_cast<py::ssize_t>(dv);
    return py::array_t<T>(shape);
  }

  // Views q, k, v (and x when given), allocates the output (v's width) and runs `f` without the GIL.
  template <class F>
  static py::array_t<T> call(const Array& q, const Array& k, const Array& v, const py::object& x, bool token, F&& f) {
    const In qh = heads_view(q.data(), q, "q", token), kh = heads_view(k.data(), k, "k", token);
    const In vh = heads_view(v.data(), v, "v", token);
    const std::optional<Array> xa = control_input(x);
    const std::optional<In> xh = xa ? std::optional<In>(heads_view(xa->data(), *xa, "x", token)) : std::nullopt;
    py::array_t<T> out = output(q, vh.dim());
    const Out oh = heads_view(out.mutable_data(), out, "out", token);
    {
      py::gil_scoped_release unlocked;
      f(qh, kh, vh, xh ? &*xh : nullptr, oh);
    }
    return out;
  }

  Layer layer_;
};

/// Binds MultiHead<Control> as `name` with its Pool as `name.Pool`; the caller adds the
/// constructor, as bind_attention's do.
template <class Control>
py::class_<MultiHead<Control>> bind_multi_head(py::module_& m, const std::string& name, const char* doc) {
  using MH = MultiHead<Control>;
  using T = typename MH::T;
  using Pool = typename MH::Pool;
  using SeqId = typename MH::SeqId;
  using State = typename MH::Layer::state_type;
  using Array = typename MH::Array;
  const py::arg_v x_none = py::arg("x") = py::none();
  // forward_causal(pool, ids, ...) with [batch, seq, heads, dim] arrays, or one token each.
  const auto pooled = [](bool token) {
    return [token](const MH& a, Pool& p, const std::vector<SeqId>& ids, const Array& q, const Array& k,
                   const Array& v, const py::object& x) { return a.continue_pool(p, ids, q, k, v, x, token); };
  };
  py::class_<MH> c(m, name.c_str(), doc);
  py::class_<Pool>(c, "Pool",
                   "Decode states of many sequences by id (an int >= 0): one state per memory each. Only the "
                   "layer's calls, reset and drop change it; one pool must not be used by two calls at once.")
      .def(py::init<>())
      .def("__len__", &Pool::size)
      .def("__contains__", &Pool::contains, py::arg("id"))
      .def("contains", &Pool::contains, py::arg("id"))
      .def("drop", &Pool::drop, py::arg("id"), "Removes sequence id; an id not in the pool is ignored.")
      .def("reset", &Pool::reset, py::arg("id"), "Sequence id back to empty memories at position 0.")
      .def("bytes", &Pool::bytes, "Bytes of memory all the states hold.")
      .def(
          "states", [](const Pool& p, SeqId id) { return std::vector<State>(p.states(id)); }, py::arg("id"),
          "Copies of sequence id's states, one per memory.");
  c.def_property_readonly("heads", [](const MH& a) { return a.layer().heads(); })
      .def_property_readonly("kv_heads", [](const MH& a) { return a.layer().kv_heads(); })
      .def_property_readonly("memories", [](const MH& a) { return a.layer().memories(); })
      .def_property_readonly("num_slots", [](const MH& a) { return a.layer().memory(0).num_slots(); })
      .def_property_readonly("dtype", [](const MH&) { return py::dtype::of<T>(); })
      .def(
          "memory_of",
          [](const MH& a, abc::Index h) {
            return a.layer().memory_of(MH::checked("h", h, a.layer().heads(), "a query head"));
          },
          py::arg("h"), "The memory query head h reads.")
      .def(
          "memory",
          [](const MH& a, abc::Index i) {
            return Attention<Control>(a.layer().memory(MH::checked("m", i, a.layer().memories(), "a memory")));
          },
          py::arg("m"),
          "Memory m's single-head attention (a copy): its load_state reads the blobs of save_state, and its "
          "calls give that memory's results bit for bit.")
      .def("forward", &MH::forward, py::arg("q"), py::arg("k"), py::arg("v"), x_none,
           "Non-causal attention of every sequence and head: q [batch, seq_q, heads, d], k [batch, seq_k, kv_heads, "
           "d], v [batch, seq_k, kv_heads, dv], x [batch, seq_k, 1 or memories, d_x] or None (the keys). "
           "Returns [batch, seq_q, heads, dv].")
      .def("forward_causal", &MH::forward_causal, py::arg("q"), py::arg("k"), py::arg("v"), x_none,
           "Causal attention of every sequence and head from empty memories, shapes as forward.")
      .def("make_pool", [](const MH&) { return Pool(); }, "An empty decode pool.")
      .def(
          "add",
          [](const MH& a, Pool& p, SeqId id, abc::Index d, abc::Index dv, const std::string& storage) {
            a.layer().add(p, id, d, dv, storage_of(storage, "add"));
          },
          py::arg("pool"), py::arg("id"), py::arg("d"), py::arg("dv"), py::arg("storage") = "native",
          "Adds sequence id with empty memories for keys of width d and values of width dv; storage "
          "'bfloat16' (float32 only) holds them in bfloat16 between calls.")
      .def("forward_causal_pool", pooled(false), py::arg("pool"), py::arg("ids"), py::arg("q"), py::arg("k"),
           py::arg("v"), x_none,
           "Continues sequence ids[b] by batch entry b's tokens (a prefill), shapes as forward_causal. Every check "
           "runs before any state changes.")
      .def("step", pooled(true), py::arg("pool"), py::arg("ids"), py::arg("q"), py::arg("k"), py::arg("v"), x_none,
           "A batched decode step: one token per sequence, q [batch, heads, d], k [batch, kv_heads, d], "
           "v [batch, kv_heads, dv], x [batch, 1 or memories, d_x]. Returns [batch, heads, dv].")
      .def("add_memory", &MH::add_memory, py::arg("pool"), py::arg("ids"), py::arg("k"), py::arg("v"), x_none,
           "Cross attention's source side: adds the sequences ids (none in the pool yet) with the memories of "
           "k [batch, seq_k, kv_heads, d], v and x.")
      .def("read", &MH::read, py::arg("pool"), py::arg("ids"), py::arg("q"),
           "Every query of q [batch, seq_q, heads, d] reads its sequence's memories, unchanged. Returns "
           "[batch, seq_q, heads, dv].")
      .def("save_state", &MH::save_state, py::arg("pool"), py::arg("id"),
           "Sequence id's states as abc's blobs (a list of bytes, one per memory); memory(m).load_state(blob) "
           "reads blob m back.")
      .def("load_state", &MH::load_state, py::arg("pool"), py::arg("id"), py::arg("blobs"),
           py::arg("storage") = "native",
           "Adds sequence id (not in the pool yet) with the states of save_state's blobs, one per memory in "
           "memory order: a decode resumed where it stopped, its states held in `storage` ('native', or "
           "'bfloat16' for float32). Every blob and state is checked first; a failure changes nothing.");
  return c;
}

}  // namespace

template <class T>
void bind_multi_head_mlp(py::module_& m) {
  using C = abc::control::Mlp<T>;
  using MH = MultiHead<C>;
  bind_multi_head<C>(m, std::string("MultiHeadMlp_") + dtype_name<T>(),
                     "abc::MultiHeadAttention with ABC-MLP controls: w_phi [n, d_x] (one control shared by all "
                     "heads) or [memories, n, d_x] (one per key/value head, or one per query head).")
      .def(py::init([](const InArray<T>& w_phi, abc::Index heads, const py::object& kv_heads,
                       const std::string& activation, const std::string& normalization, double scale,
                       abc::Index chunk) {
             const abc::Index kv = kv_heads.is_none() ? heads : kv_heads.cast<abc::Index>();
             const abc::Options o = make_options(scale, chunk);
             if (w_phi.ndim() == 2)
               return MH(typename MH::Layer(
                   make_mlp<T>(abc::Matrix<T>(matrix_view(w_phi, "w_phi")), activation, normalization), heads, kv, o));
             if (w_phi.ndim() != 3)
               throw py::value_error("abc_attention: w_phi has " + std::to_string(w_phi.ndim()) +
                                     " dimensions, expected 2 ([n, d_x]: one control shared by all heads) or 3 "
                                     "([memories, n, d_x]: one control per key/value head or per query head)");
             const abc::Index rows = abc::Index(w_phi.shape(1)), cols = abc::Index(w_phi.shape(2));
             std::vector<C> controls;
             for (py::ssize_t i = 0; i < w_phi.shape(0); ++i) {
               const Eigen::Map<const abc::Matrix<T>> w(w_phi.data() + i * rows * cols, rows, cols);
               controls.push_back(make_mlp<T>(abc::Matrix<T>(w), activation, normalization));
             }
             return MH(typename MH::Layer(controls, heads, kv, o));
           }),
           py::arg("w_phi"), py::arg("heads"), py::arg("kv_heads") = py::none(), py::arg("activation") = "exp",
           py::arg("normalization") = "prefix", py::arg("scale") = 0.0, py::arg("chunk") = 16);
}

template void bind_multi_head_mlp<float>(py::module_&);
template void bind_multi_head_mlp<double>(py::module_&);

}  // namespace abc_python
