// SPDX-License-Identifier: MIT
// One source compiled twice into one program (tests/CMakeLists.txt): for the baseline target
// (-march=x86-64) as mixed_part_baseline, and for the build machine (-march=native) as
// mixed_part_native. Each runs the same single-head forms, a decode loop and a pooled GQA
// prefill, on inputs that do not depend on any shared state, and says which kernels it ran.
#include <abc/abc.hpp>

#include <string>
#include <vector>

#include "isa/mixed_part.hpp"

MixedResult MIXED_PART_ENTRY() {
  const abc::Index d = 16, n = 8, N = 37, heads = 4, kv_heads = 2;
  abc::Matrix<float> q(N, d), k(N, d), v(N, d);
  for (abc::Index i = 0; i < N; ++i)
    for (abc::Index j = 0; j < d; ++j) {
      q(i, j) = float((i * 7 + j * 3) % 11) / 11.f - 0.5f;
      k(i, j) = float((i * 5 + j) % 13) / 13.f - 0.5f;
      v(i, j) = float((i + j * 9) % 7) / 7.f - 0.5f;
    }
  MixedResult r;
  r.isa = abc::simd_arch();
  const abc::BoundedAttention attn{abc::control::Mlp<float>{abc::Slots{n}, d, abc::Seed{3}}};
  const abc::Matrix<float> causal = attn.forward_causal(q, k, v);
  r.values.assign(causal.data(), causal.data() + causal.size());
  auto state = attn.make_state(d, d);
  abc::Vector<float> out(d);
  for (abc::Index t = 0; t < N; ++t) {
    attn.step_into(state, q.row(t), k.row(t), v.row(t), out);
    r.values.insert(r.values.end(), out.data(), out.data() + d);
  }
  r.blob = abc::save_state(attn, state);
  // Multi-head with shared key/value-head memories, through a pool (states in a std::map).
  using Mha = abc::MultiHeadAttention<abc::control::SlidingWindow<float>>;
  const Mha mha(abc::control::SlidingWindow<float>{n}, heads, kv_heads);
  Mha::Pool pool;
  mha.add(pool, 1, d, d);
  std::vector<float> qh(std::size_t(N * heads * d)), kh(std::size_t(N * kv_heads * d)), vh(kh.size()),
      oh(qh.size());
  for (std::size_t i = 0; i < qh.size(); ++i) qh[i] = float(i % 7) / 7.f;
  for (std::size_t i = 0; i < kh.size(); ++i) kh[i] = float(i % 5) / 5.f, vh[i] = float(i % 3) / 3.f;
  using In = abc::HeadTensor<const float>;
  mha.forward_causal(pool, {1}, In::bshd(qh.data(), 1, N, heads, d), In::bshd(kh.data(), 1, N, kv_heads, d),
                     In::bshd(vh.data(), 1, N, kv_heads, d), abc::HeadTensor<float>::bshd(oh.data(), 1, N, heads, d));
  r.values.insert(r.values.end(), oh.begin(), oh.end());
  r.pool_bytes = pool.bytes();
  return r;
}
