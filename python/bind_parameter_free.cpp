// SPDX-License-Identifier: MIT
// abc_attention: the controls without parameters (sliding window, dilated, random slot,
// compressive, identity, global tokens, and global tokens + window). Their gradients hold q, k and
// v only.
#include <abc/control/compressive.hpp>
#include <abc/control/concat.hpp>
#include <abc/control/dilated.hpp>
#include <abc/control/global_tokens.hpp>
#include <abc/control/identity.hpp>
#include <abc/control/random_slot.hpp>
#include <abc/control/sliding_window.hpp>

#include <pybind11/stl.h>

#include <cstdint>
#include <string>
#include <vector>

#include "bind_attention.hpp"
#include "controls.hpp"

namespace abc_python {

template <class T>
void bind_parameter_free(py::module_& m) {
  namespace ctl = abc::control;
  const std::string suffix = std::string("_") + dtype_name<T>();
  bind_attention<ctl::SlidingWindow<T>>(m, "SlidingWindow" + suffix,
                                        "The last n tokens, a ring buffer (abc::control::SlidingWindow).")
      .def(py::init([](abc::Index n, double scale, abc::Index chunk) {
             return Attention<ctl::SlidingWindow<T>>(ctl::SlidingWindow<T>(n), scale, chunk);
           }),
           py::arg("n"), py::arg("scale") = 0.0, py::arg("chunk") = 16);
  bind_attention<ctl::Identity<T>>(m, "Identity" + suffix,
                                   "One slot per token, up to n tokens: exact softmax attention (abc::control::Identity).")
      .def(py::init([](abc::Index n, double scale, abc::Index chunk) {
             return Attention<ctl::Identity<T>>(ctl::Identity<T>(n), scale, chunk);
           }),
           py::arg("n"), py::arg("scale") = 0.0, py::arg("chunk") = 16);
  bind_attention<ctl::Dilated<T>>(m, "Dilated" + suffix, "r ring buffers of n slots in all (abc::control::Dilated).")
      .def(py::init([](abc::Index n, abc::Index r, double scale, abc::Index chunk) {
             return Attention<ctl::Dilated<T>>(ctl::Dilated<T>(abc::Slots{n}, r), scale, chunk);
           }),
           py::arg("n"), py::arg("r"), py::arg("scale") = 0.0, py::arg("chunk") = 16);
  bind_attention<ctl::RandomSlot<T>>(m, "RandomSlot" + suffix, "Each token into a hashed slot (abc::control::RandomSlot).")
      .def(py::init([](abc::Index n, std::uint64_t seed, double scale, abc::Index chunk) {
             return Attention<ctl::RandomSlot<T>>(ctl::RandomSlot<T>(abc::Slots{n}, abc::Seed{seed}), scale, chunk);
           }),
           py::arg("n"), py::arg("seed"), py::arg("scale") = 0.0, py::arg("chunk") = 16);
  bind_attention<ctl::Compressive<T>>(m, "Compressive" + suffix,
                                      "Mean pooling of blocks of c tokens into n slots (abc::control::Compressive).")
      .def(py::init([](abc::Index n, abc::Index c, double scale, abc::Index chunk) {
             return Attention<ctl::Compressive<T>>(ctl::Compressive<T>(abc::Slots{n}, c), scale, chunk);
           }),
           py::arg("n"), py::arg("c"), py::arg("scale") = 0.0, py::arg("chunk") = 16);
  bind_attention<ctl::GlobalTokens<T>>(m, "GlobalTokens" + suffix,
                                       "Slot i holds the token at positions[i] (abc::control::GlobalTokens).")
      .def(py::init([](const std::vector<abc::Index>& positions, double scale, abc::Index chunk) {
             return Attention<ctl::GlobalTokens<T>>(ctl::GlobalTokens<T>(positions), scale, chunk);
           }),
           py::arg("positions"), py::arg("scale") = 0.0, py::arg("chunk") = 16);
  // The one Concat bound: each pair of parts is a C++ type of its own, and this pair is the
  // Longformer / BigBird local + global pattern (global tokens 0 .. s - 1: StreamingLLM's sinks).
  using LocalGlobal = ctl::Concat<ctl::GlobalTokens<T>, ctl::SlidingWindow<T>>;
  bind_attention<LocalGlobal>(m, "LocalGlobal" + suffix,
                              "The global tokens at `positions` and the last n tokens, each token once "
                              "(abc::control::Concat<GlobalTokens, SlidingWindow>).")
      .def(py::init([](const std::vector<abc::Index>& positions, abc::Index n, double scale, abc::Index chunk) {
             return Attention<LocalGlobal>(LocalGlobal(ctl::GlobalTokens<T>(positions), ctl::SlidingWindow<T>(n)),
                                           scale, chunk);
           }),
           py::arg("positions"), py::arg("n"), py::arg("scale") = 0.0, py::arg("chunk") = 16);
}

template void bind_parameter_free<float>(py::module_&);
template void bind_parameter_free<double>(py::module_&);

}  // namespace abc_python
