// SPDX-License-Identifier: MIT
// abc example: a control written by the user in a few lines, run through every form.
//
// "Every other token": even positions go into a ring buffer of n slots, odd positions are not
// kept at all. A control only states its schedule; BoundedAttention supplies the parallel causal
// kernel, the recurrent step, the non-causal form and every check.
#include <abc/abc.hpp>

#include <algorithm>
#include <cstdio>

struct EveryOtherToken {
  using scalar_type = float;        // float or double
  static constexpr int max_writes = 1;  // sparse: a token touches at most one slot
  abc::Index n;

  abc::Index num_slots() const { return n; }

  // Token t: even → overwrite slot (t / 2) mod n (decay 0, weight 1); odd → no write.
  void schedule(abc::Index t, abc::VectorRef<float> /*x*/, abc::MatrixOut<float> /*slot_state*/,
                abc::SparseWrite<float, 1>& w) const {
    if (t % 2 == 0) w.add((t / 2) % n, 0.0f, 1.0f);
  }
};

// Leaving out a member is a compile error that names it, e.g. without num_slots():
//
//   error: static assertion failed: abc::BoundedAttention<Control>: Control must provide
//   `Index num_slots() const` (see abc/concepts.hpp)
//
// and without schedule():
//
//   error: static assertion failed: abc::BoundedAttention<Control>: Control must provide a
//   schedule: either `static constexpr int max_writes` with `void schedule(Index t, VectorRef<T> x,
//   MatrixOut<T> slot_state, SparseWrite<T, max_writes>& w) const`, or `void schedule(Index t0,
//   MatrixRef<T> x, MatrixOut<T> slot_state, MatrixOut<T> decay, MatrixOut<T> write) const` (see
//   abc/concepts.hpp)

int main() {
  const abc::Index seq_len = 300, dim = 32;
  abc::Matrix<float> q = abc::Matrix<float>::Random(seq_len, dim);
  abc::Matrix<float> k = abc::Matrix<float>::Random(seq_len, dim);
  abc::Matrix<float> v = abc::Matrix<float>::Random(seq_len, dim);

  abc::BoundedAttention attn{EveryOtherToken{16}};
  const abc::Matrix<float> parallel = attn.forward_causal(q, k, v);  // chunked, in parallel

  auto state = attn.make_state(dim, dim);  // 16 slots whatever the length
  float max_diff = 0;
  for (abc::Index t = 0; t < seq_len; ++t) {
    const abc::Vector<float> o = attn.step(state, q.row(t), k.row(t), v.row(t));
    max_diff = std::max(max_diff, (o.transpose() - parallel.row(t)).cwiseAbs().maxCoeff());
  }
  std::printf("every other token, n = 16: parallel vs step max |diff| = %.2e, state %zu bytes\n",
              double(max_diff), state.bytes());
  return max_diff <= 1e-4f ? 0 : 1;
}
