// SPDX-License-Identifier: MIT
// abc: bounded-memory attention. Options shared by every BoundedAttention: scale, empty slots, kernel.
#pragma once

#include <cmath>

#include "types.hpp"

ABC_NAMESPACE_BEGIN

/// What a slot that has never been written contributes to a softmax read.
enum class EmptySlots {
  masked,   ///< default: it takes no mass, so Identity equals causal softmax attention exactly
  literal,  ///< the equations read literally: a zero row with logit 0 still takes mass exp(0)
};

/// Which causal parallel kernel runs. `automatic` picks the cheaper one for the control; the
/// others exist so tests can prove both agree for every control.
enum class CausalKernel { automatic, chunked, recurrent };

/**
 * \brief Options of a BoundedAttention; every field has a default, set only what you need.
 *
 * \code
 * abc::Options opts;
 * opts.scale = 1.0;  // the papers' equations, no 1/sqrt(d)
 * abc::BoundedAttention attn{abc::control::SlidingWindow{32}, opts};
 * \endcode
 */
struct Options {
  /// Softmax scale of the read; 0 (default) means 1/sqrt(d) with d the query width.
  double scale = 0.0;
  /// What a never-written slot contributes to a softmax read; default: nothing (masked).
  EmptySlots empty_slots = EmptySlots::masked;
  /// Which kernel forward_causal runs for a softmax readout; all agree to rounding.
  CausalKernel causal_kernel = CausalKernel::automatic;
  /// Tokens per chunk of the chunked causal kernel (≥ 1). Larger chunks pay O(C²·n) per chunk
  /// for the chunk-local weights, smaller ones run products too thin to be fast; the default is the
  /// measured best for ABC-MLP and RFA (the chunk sweep in bench/README.md).
  Index chunk = 16;
  /// Tokens a backward pass keeps per-token records for at once (≥ 1). A longer call is
  /// differentiated block by block, last block first, from states saved at the blocks' starts by one
  /// extra sweep that advances the memory without reading it: the records then take O(block · n)
  /// and the saved states O((N / block) · n · (d + dv)) instead of O(N · n), for one more pass of
  /// the memory's advance. Calls of at most this many tokens run in one block, with no extra sweep.
  Index backward_block = 4096;
};

namespace detail {
// The softmax scale every operator reads with: `scale` when it is set (> 0), else 1/sqrt(d) for
// queries of width d.
template <class T>
T read_scale(double scale, Index d) noexcept {
  return scale > 0 ? T(scale) : T(1) / std::sqrt(T(d));
}
}  // namespace detail

ABC_NAMESPACE_END
