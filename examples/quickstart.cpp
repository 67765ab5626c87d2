#include <abc/abc.hpp>
#include <iostream>

int main() {
  const abc::Index seq_len = 1024, head_dim = 64, num_slots = 32;

  // One token per row: q, k, v are [seq_len x head_dim], row-major float.
  abc::Matrix<float> q = abc::Matrix<float>::Random(seq_len, head_dim);
  abc::Matrix<float> k = abc::Matrix<float>::Random(seq_len, head_dim);
  abc::Matrix<float> v = abc::Matrix<float>::Random(seq_len, head_dim);

  // Bounded memory of 32 slots, written by a sliding-window control.
  abc::BoundedAttention window{abc::control::SlidingWindow{num_slots}};
  abc::Matrix<float> out = window.forward_causal(q, k, v);  // [seq_len x head_dim]

  // Swap the control, keep the call: ABC-MLP, learned input-dependent control (seeded weights).
  abc::BoundedAttention mlp{abc::control::Mlp{abc::Slots{num_slots}, head_dim, abc::Seed{42}}};
  abc::Matrix<float> out_mlp = mlp.forward_causal(q, k, v);

  // Decode one token at a time from a constant-size state.
  auto state = mlp.make_state(head_dim, head_dim);
  abc::Vector<float> o_t = mlp.step(state, q.row(0), k.row(0), v.row(0));

  std::cout << out.rows() << 'x' << out.cols() << ' ' << out_mlp(0, 0) << ' ' << o_t(0) << '\n';
  // The kernels this file was compiled for, and the widest this CPU runs (docs/simd.md).
  std::cout << "kernels: " << abc::simd_arch() << " (this CPU: " << abc::cpu_simd_arch() << ")\n";
}
