// SPDX-License-Identifier: MIT
// abc_attention: ABC-MLP's options as Python spells them, shared by the single-head (bind_mlp.cpp)
// and multi-head (bind_multi_head.cpp) bindings so both accept and refuse the same names.
#pragma once

#include <abc/control/mlp.hpp>

#include <pybind11/pybind11.h>

#include <string>
#include <utility>

namespace abc_python {

inline abc::control::Activation parse_activation(const std::string& s) {
  if (s == "exp") return abc::control::Activation::exp;
  if (s == "sigmoid") return abc::control::Activation::sigmoid;
  if (s == "relu") return abc::control::Activation::relu;
  throw pybind11::value_error("abc_attention: activation is '" + s + "', expected 'exp', 'sigmoid' or 'relu'");
}

inline abc::control::Normalization parse_normalization(const std::string& s) {
  if (s == "prefix") return abc::control::Normalization::prefix;
  if (s == "per_token") return abc::control::Normalization::per_token;
  throw pybind11::value_error("abc_attention: normalization is '" + s + "', expected 'prefix' or 'per_token'");
}

template <class T>
abc::control::Mlp<T> make_mlp(abc::Matrix<T> w_phi, const std::string& activation, const std::string& normalization) {
  return abc::control::Mlp<T>(std::move(w_phi), parse_activation(activation), parse_normalization(normalization));
}

}  // namespace abc_python
