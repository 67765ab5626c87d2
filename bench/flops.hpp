// SPDX-License-Identifier: MIT
// abc bench: the useful arithmetic of each operator, counted from the mathematics (not from what a
// kernel happens to do), so GFLOP/s and fraction of peak compare kernels fairly.
//
//   memory write, dense control  2·N·n·(d + dv)     K̃ = Φᵀ K, Ṽ = Φᵀ V
//   memory write, one-hot        N·(d + dv)          one row updated per token
//   control logits (Mlp, GSA)    2·N·n·d_x           S = X W_φᵀ (W_f for GSA)
//   centroid distances (Cluster) 2·N·n·d             like the logits
//   key score (TopKEviction)     2·N·d²              kᵀ G k
//   gate (Gated)                 2·N·d_x             w_g · x
//   random features (RFA)        N·n·d               W x for D = n/2 projections (sin/cos not counted)
//   read                         2·M·n·(d + dv)      Q K̃ᵀ then P Ṽ (the softmax over n is not counted)
//   softmax attention            2·M·N·(d + dv), halved when causal
//
// A causal bounded kernel is credited with the same arithmetic as the non-causal one: what it
// computes on top (the chunk-local products) is its overhead, and shows as a lower fraction of peak.
#pragma once

namespace abc_bench {

inline double read_flops(double m, double n, double d, double dv) { return 2 * m * n * (d + dv); }
inline double dense_write_flops(double tokens, double n, double d, double dv) { return 2 * tokens * n * (d + dv); }
inline double onehot_write_flops(double tokens, double d, double dv) { return tokens * (d + dv); }
inline double logit_flops(double tokens, double n, double dx) { return 2 * tokens * n * dx; }
inline double key_score_flops(double d) { return 2 * d * d; }
inline double gate_flops(double dx) { return 2 * dx; }
inline double feature_flops(double tokens, double n, double d) { return tokens * n * d; }
inline double softmax_flops(double m, double n_keys, double d, double dv, bool causal) {
  return 2 * m * n_keys * (d + dv) * (causal ? 0.5 : 1.0);
}

}  // namespace abc_bench
