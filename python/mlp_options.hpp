// SPDX-License-Identifier: MIT
// abc_attention: ABC-MLP's options as Python spells them, shared by the single-head (bind_mlp.cpp)
// and multi-head (bind_multi_head.cpp) bindings so both accept and refuse the same names.
#pragma once

#include <abc/control/mlp.hpp>

#include <string>
#include <utility>

namespace abc_python {

template <class T>
abc::control::Mlp<T> make_mlp(abc::Matrix<T> w_phi, const std::string& activation, const std::string& normalization) {
  // abc's config_error reaches Python as ValueError, the message starting "abc_attention:" as the
  // module's own checks do.
  return abc::control::Mlp<T>(std::move(w_phi), abc::control::activation_from_name(activation, "abc_attention"),
                              abc::control::normalization_from_name(normalization, "abc_attention"));
}

}  // namespace abc_python
