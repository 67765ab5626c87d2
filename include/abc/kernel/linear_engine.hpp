// SPDX-License-Identifier: MIT
// abc: bounded-memory attention. kernel::LinearEngine, the linear-readout memory's build, causal
// and step kernels.
#pragma once

#include <algorithm>

#include "../concepts.hpp"
#include "../detail/compose.hpp"
#include "linear_readout.hpp"
#include "recurrence.hpp"
#include "../detail/state_access.hpp"
#include "../options.hpp"
#include "../state.hpp"
#include "../types.hpp"

ABC_NAMESPACE_BEGIN
namespace kernel {
// Kernels take (rows, cols) and parallel operands of one type by design; only the library calls
// them, through checked public forms.
// NOLINTBEGIN(bugprone-easily-swappable-parameters)

/**
 * \brief The kernels of a memory read linearly, `φ(q)ᵀ Ṽ / φ(q)ᵀ z` (RFA, `readout = Readout::linear`):
 * the memory of a whole sequence, the causal chunked kernel and the decode step.
 *
 * The same calling convention as SoftmaxEngine: it runs once every check has passed, `heads`
 * query heads read one memory, and `input` is the control input (the keys unless given). The
 * memory keeps no K̃: the control's key_schedule turns each key into its feature row, which is the
 * write, and row 1 of the state's slot_state() holds z, the sum of the written features.
 */
template <class Control>
class LinearEngine {
  using T = typename Control::scalar_type;
  static constexpr bool has_decay = detail::decay_flag<Control>::value;
  using Access = detail::StateAccess;

 public:
  LinearEngine(const Control& control, const Options& options) noexcept : control_(control), options_(options) {}

  /// The memory of all N tokens into the empty state `s`.
  void build_memory(State<T>& s, const MatrixRef<T>& k, const MatrixRef<T>& v, const MatrixRef<T>& input,
                    bool /*projected*/) const {
    detail::UnpackedMemory<T> unpacked(s);
    const Index n_keys = k.rows();
    const Index chunk = std::min(build_block, std::max<Index>(n_keys, 1));
    ChunkWorkspace<T> ws(chunk, control_.num_slots(), 0);
    auto z = Access::slot_state(s).row(1).transpose();
    for (Index t0 = 0; t0 < n_keys; t0 += chunk) {
      const Index c = std::min(chunk, n_keys - t0);
      control_.key_schedule(t0, k.middleRows(t0, c), input.middleRows(t0, c), ws.decay.topRows(c),
                            ws.write.topRows(c));
      advance_chunk_linear<T>(Access::values(s), z, ws, c, has_decay, v.middleRows(t0, c));
    }
    Access::position(s) = n_keys;
  }

  /// Every query of one head reads the finished memory `s`; nothing changes.
  template <class Q, class O>
  void read_memory(const State<T>& s, const Q& q, O&& out) const {
    Matrix<T> phi(q.rows(), control_.num_slots());
    control_.query_features(q, phi);
    const auto z = Access::slot_state(s).row(1).transpose();
    if (s.storage() == StateStorage::native)
      read_all_linear<T>(Access::values(s), z, phi, floor(), out);
    else
      read_all_linear<T>(s.values(), z, phi, floor(), out);
  }

  /// Continues `s` over the N tokens of k, v; each head's query t reads the memory of keys ..t.
  template <class QueryOf, class OutputOf>
  void run_causal(State<T>& s, Index heads, const QueryOf& query, const OutputOf& output, const MatrixRef<T>& k,
                  const MatrixRef<T>& v, const MatrixRef<T>& input, bool /*projected*/) const {
    const Index n_keys = k.rows(), start = s.position();
    if (n_keys == 0) return;
    detail::UnpackedMemory<T> unpacked(s);
    const Index chunk = std::min(options_.chunk, n_keys);
    ChunkWorkspace<T> ws(chunk, control_.num_slots(), heads);
    auto z = Access::slot_state(s).row(1).transpose();
    for (Index t0 = 0; t0 < n_keys; t0 += chunk) {
      const Index c = std::min(chunk, n_keys - t0);
      control_.key_schedule(start + t0, k.middleRows(t0, c), input.middleRows(t0, c), ws.decay.topRows(c),
                            ws.write.topRows(c));
      for (Index g = 0; g < heads; ++g) control_.query_features(query(g).middleRows(t0, c), ws.read(g).prev.topRows(c));
      causal_chunk_linear<T>(Access::values(s), z, ws, c, has_decay, heads,
                                     [&](Index g) { return output(g).middleRows(t0, c); }, v.middleRows(t0, c), floor());
    }
    Access::position(s) = start + n_keys;
  }

  /// One decode step of `heads` heads: the token at the state's position, written then read. The
  /// scratch rows of the state hold the decays (row 0), the features of the key (row 1) and one
  /// feature row per query head.
  template <class QueryOf, class OutputOf, class Input>
  void step_heads(State<T>& s, Index heads, const QueryOf& query, const OutputOf& output, const T* k, const T* v,
                  const Input& input, bool /*projected*/, Index d, Index dv) const {
    Access::reserve_scratch(s, heads, control_.num_slots());
    detail::UnpackedMemory<T> unpacked(s);
    Matrix<T>& scratch = Access::scratch(s);
    control_.key_schedule(s.position(), Eigen::Map<const Matrix<T>>(k, 1, d), input, scratch.row(0), scratch.row(1));
    for (Index g = 0; g < heads; ++g)
      control_.query_features(Eigen::Map<const Matrix<T>>(query(g), 1, d), scratch.row(2 + g));
    T* z = Access::slot_state(s).row(1).data();
    step_linear(Access::values(s), z, scratch.row(2).data(), scratch.row(0).data(), scratch.row(1).data(), v,
                        floor(), output(0), dv);
    for (Index g = 1; g < heads; ++g)
      read_linear(Access::values(s), z, scratch.row(2 + g).data(), floor(), output(g), dv);
    ++Access::position(s);
  }

 private:
  // The readout's denominator floor (0: off), when the control has one.
  T floor() const noexcept {
    if constexpr (detail::has_denominator_floor<Control>::value)
      return control_.denominator_floor();
    else
      return T(0);
  }

  const Control& control_;
  const Options& options_;
};

// NOLINTEND(bugprone-easily-swappable-parameters)
}  // namespace kernel
ABC_NAMESPACE_END
