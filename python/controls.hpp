// SPDX-License-Identifier: MIT
// abc_attention: one binding function per control, each instantiated for float and double in its
// own translation unit (so that a parallel build compiles them side by side).
#pragma once

#include <pybind11/pybind11.h>

namespace abc_python {

template <class T>
void bind_mlp(pybind11::module_& m);
template <class T>
void bind_gated_mlp(pybind11::module_& m);
template <class T>
void bind_slot_gates(pybind11::module_& m);
template <class T>
void bind_linformer(pybind11::module_& m);
// SlidingWindow and the other controls without parameters.
template <class T>
void bind_parameter_free(pybind11::module_& m);
// TopKEviction, Cluster and RandomFeature: parameters abc does not train.
template <class T>
void bind_more_controls(pybind11::module_& m);
// MultiHeadAttention with ABC-MLP controls, and its decode pool.
template <class T>
void bind_multi_head_mlp(pybind11::module_& m);

}  // namespace abc_python
