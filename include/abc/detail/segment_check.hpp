// SPDX-License-Identifier: MIT
// abc: bounded-memory attention. The argument checks of the selection operators' segments and steps.
#pragma once

#include "check.hpp"
#include "../types.hpp"

ABC_NAMESPACE_BEGIN
namespace detail {

// A segment of n tokens against a cache of key width d and value width dv: q [n × d], k [n × d],
// v [n × dv] and out [out_rows × out_cols] = [n × dv], q, k and v finite. `vectors`: a step's q, k,
// v and out, seen as one-row matrices, are reported by their size. With `inputs_finite` the caller
// has found q, k and v finite already (a layer checks whole tensors at once).
// NOLINTNEXTLINE(bugprone-easily-swappable-parameters): q, k, v in the attention order of every public form
template <class T>
Problem segment_problem(const MatrixRef<T>& q, const MatrixRef<T>& k, const MatrixRef<T>& v, Index out_rows,
                        Index out_cols, Index d, Index dv, bool vectors, bool inputs_finite = false) noexcept {
  const auto arg_problem = [vectors](const char* arg, Index r, Index c, Index er, Index ec, const char* rule,
                                     const char* vector_rule) {
    return vectors ? size_problem(arg, c, ec, vector_rule) : shape_problem(arg, r, c, er, ec, rule);
  };
  const Index n = q.rows();
  if (auto p = arg_problem("q", q.rows(), q.cols(), n, d, "q.cols() must equal the state's key width",
                           "the state's key width"))
    return p;
  if (auto p = arg_problem("k", k.rows(), k.cols(), n, d, "one key per query, of the state's key width",
                           "the state's key width"))
    return p;
  if (auto p = arg_problem("v", v.rows(), v.cols(), n, dv, "one value per query, of the state's value width",
                           "the state's value width"))
    return p;
  if (auto p = arg_problem("out", out_rows, out_cols, n, dv, "the output buffer holds one row per query",
                           "the state's value width"))
    return p;
  if (inputs_finite) return {};
  if (auto p = finite_problem("q", q)) return p;
  if (auto p = finite_problem("k", k)) return p;
  if (auto p = finite_problem("v", v)) return p;
  return {};
}

}  // namespace detail
ABC_NAMESPACE_END
