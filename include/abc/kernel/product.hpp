// SPDX-License-Identifier: MIT
// abc: bounded-memory attention. kernel::product, the small matrix products of the chunked kernels.
#pragma once

#include <algorithm>
#include <type_traits>

#include "../types.hpp"
#include "scalar.hpp"
#include "simd.hpp"

ABC_NAMESPACE_BEGIN
namespace kernel {
// Kernels take (rows, cols) and parallel operands of one type by design; only the library calls
// them, through checked public forms.
// NOLINTBEGIN(bugprone-easily-swappable-parameters)

/// The operands of C ← A B: A is m × depth with entry (i, p) at a[i · rs + p · cs] (either storage
/// order, or a transpose, read an entry at a time), B is depth × cols row-major (row p at b + p · ldb),
/// C is m × cols row-major (row i at c + i · ldc). When accumulating, C's entry (i, j) is first
/// multiplied by row_scale[i] or by col_scale[j] where one is given (a decay applied to the memory
/// that the product then adds to, in the same pass; not both).
template <class T>
struct ProductArgs {
  Index m, cols, depth;
  const T* a;
  Index rs, cs;
  const T* b;
  Index ldb;
  T* c;
  Index ldc;
  const T* row_scale = nullptr;
  const T* col_scale = nullptr;
};

/// ProductArgs of C = A B for Eigen blocks with direct access: A in any storage order (a transpose
/// included), B and C with unit column stride (row-major, or the transpose of a column-major block).
template <class A, class Bm, class Cm>
auto product_args(const A& a, const Bm& b, Cm&& c) noexcept {
  using T = typename A::Scalar;
  ABC_ASSERT(b.colStride() == 1 && c.colStride() == 1, "kernel::product reads B and writes C by rows");
  ABC_ASSERT(a.rows() == c.rows() && a.cols() == b.rows() && b.cols() == c.cols(), "kernel::product: shapes");
  return ProductArgs<T>{c.rows(), c.cols(), a.cols(), a.data(), a.rowStride(), a.colStride(),
                        b.data(), b.rowStride(), c.data(), c.rowStride()};
}

namespace scalar {
// kernel::product without SIMD: each entry's chain of multiply-adds over p in order, from 0, as the
// SIMD path sums it. A row of C at a time, in blocks of columns whose sums are kept in a local row,
// so that B is read along its rows (a loop the compiler may vectorise), not down its columns.
template <bool Accumulate, class T>
void product(const ProductArgs<T>& x, T alpha) noexcept {
  constexpr Index block = 64;
  T sum[block];
  for (Index i = 0; i < x.m; ++i)
    for (Index j0 = 0; j0 < x.cols; j0 += block) {
      const Index w = std::min(block, x.cols - j0);
      std::fill(sum, sum + w, T(0));
      for (Index p = 0; p < x.depth; ++p) {
        const T a = x.a[i * x.rs + p * x.cs];
        const T* b = x.b + p * x.ldb + j0;
        for (Index j = 0; j < w; ++j) sum[j] = mul_add(a, b[j], sum[j]);
      }
      T* c = x.c + i * x.ldc + j0;
      for (Index j = 0; j < w; ++j) {
        if constexpr (Accumulate) {
          if (x.row_scale)
            c[j] = mul_add(c[j], x.row_scale[i], sum[j]);
          else if (x.col_scale)
            c[j] = mul_add(c[j], x.col_scale[j0 + j], sum[j]);
          else
            c[j] = c[j] + sum[j];
        } else {
          c[j] = alpha * sum[j];
        }
      }
    }
}
}  // namespace scalar

#ifndef ABC_NO_SIMD
namespace impl {
// How a tile's sums reach C: C = α · sum, C = C + sum, or C = C · s + sum for s a per-row or a
// per-column scale (one multiply-add per entry).
enum class Fold { assign, add, row_scaled, col_scaled };

// Rows [i0, i0 + MR) × columns [j0, j0 + K·width) of C: MR·K sums held in registers while the depth
// streams past, each B batch loaded once for MR rows and each A entry broadcast once for K batches.
// C is read only once the sums are done, so that no load of it waits at the start of the tile.
template <int MR, int K, Fold F, class B, class T>
void product_tile(const ProductArgs<T>& x, Index i0, Index j0, T alpha) noexcept {
  constexpr Index width = Index(B::size);
  B acc[MR][K];
  for (int r = 0; r < MR; ++r)
    for (int c = 0; c < K; ++c) acc[r][c] = B(T(0));
  const T* a = x.a + i0 * x.rs;
  const T* b = x.b + j0;
  for (Index p = 0; p < x.depth; ++p, a += x.cs, b += x.ldb) {
    B bv[K];
    for (int c = 0; c < K; ++c) bv[c] = in_register(B::load_unaligned(b + c * width));
    for (int r = 0; r < MR; ++r) {
      const B av(a[r * x.rs]);
      for (int c = 0; c < K; ++c) acc[r][c] = impl::fma(av, bv[c], acc[r][c]);
    }
  }
  // C's pointer, stride and scales read before the first store: a vector store may alias anything,
  // so fields read through `x` after one would be loaded again for every batch stored.
  T* const c0 = x.c + i0 * x.ldc + j0;
  const Index ldc = x.ldc;
  const B al(alpha);
  B scale[F == Fold::col_scaled ? K : 1];
  if constexpr (F == Fold::col_scaled)
    for (int c = 0; c < K; ++c) scale[c] = B::load_unaligned(x.col_scale + j0 + c * width);
  T row_scale[F == Fold::row_scaled ? MR : 1];
  if constexpr (F == Fold::row_scaled)
    for (int r = 0; r < MR; ++r) row_scale[r] = x.row_scale[i0 + r];
  for (int r = 0; r < MR; ++r)
    for (int c = 0; c < K; ++c) {
      T* out = c0 + r * ldc + c * width;
      if constexpr (F == Fold::assign)
        (al * acc[r][c]).store_unaligned(out);
      else if constexpr (F == Fold::add)
        (B::load_unaligned(out) + acc[r][c]).store_unaligned(out);
      else if constexpr (F == Fold::row_scaled)
        impl::fma(B::load_unaligned(out), B(row_scale[r]), acc[r][c]).store_unaligned(out);
      else
        impl::fma(B::load_unaligned(out), scale[c], acc[r][c]).store_unaligned(out);
    }
}

// All of C: column blocks of K batches, then one block of the full batches left (tiles of MR rows,
// then the remaining rows one by one), then the columns past the last full batch on the scalar path.
template <Fold F, class B, class T>
void product_blocks(const ProductArgs<T>& x, T alpha) noexcept {
  constexpr Index width = Index(B::size);
  constexpr int K = sizeof(B) >= 64 ? 4 : 2;  // AVX-512: 32 vector registers
  constexpr int MR = 4;
  Index j = 0;
  const auto columns = [&](auto k_batches) {
    constexpr int KB = decltype(k_batches)::value;
    Index i = 0;
    for (; i + MR <= x.m; i += MR) product_tile<MR, KB, F, B>(x, i, j, alpha);
    for (; i < x.m; ++i) product_tile<1, KB, F, B>(x, i, j, alpha);
  };
  for (; j + K * width <= x.cols; j += K * width) columns(std::integral_constant<int, K>{});
  const Index r = (x.cols - j) / width;  // the full batches left: one block (impl::for_blocks says why)
  with_count<K - 1>(r, columns);
  j += r * width;
  if (j < x.cols) {
    ProductArgs<T> tail = x;
    tail.b += j;
    tail.c += j;
    if (tail.col_scale) tail.col_scale += j;
    tail.cols = x.cols - j;
    scalar::product<F != Fold::assign>(tail, alpha);
  }
}
}  // namespace impl
#endif

/// C ← α · A B (Accumulate = false) or C ← C + A B (Accumulate = true, α unused; C's entries scaled
/// first where ProductArgs says), operands as in ProductArgs. Entry (i, j) of A B is a chain of
/// multiply-adds over p = 0 .. depth − 1 in order, from 0, whatever the shapes and wherever the
/// entry falls in the blocking; when accumulating it is then added to C's entry, c + sum, or
/// c · s + sum in one multiply-add for a row or column scale s. So a row's result does not depend on
/// how many rows are multiplied with it, and the SIMD and scalar paths give the same bits. No
/// packing: B's rows are read in place (the chunked kernels' operands are a few KiB and stay in
/// cache), so small products pay no copy. The blocks hold 4 rows × 4 batches of sums (16
/// registers; 4 × 2 with 16-register ISAs).
template <bool Accumulate, class T>
void product(const ProductArgs<T>& x, T alpha = T(1)) noexcept {
  ABC_ASSERT(!(x.row_scale && x.col_scale), "kernel::product scales C by rows or by columns, not both");
  if (x.m == 0 || x.cols == 0) return;  // an empty C: nothing to write (its operands may be null)
#ifdef ABC_NO_SIMD
  scalar::product<Accumulate>(x, alpha);
#else
  using B = batch<T>;
  using impl::Fold;
  if (x.depth == 0) return scalar::product<Accumulate>(x, alpha);  // A and B may be null: no offsets
  if constexpr (!Accumulate)
    impl::product_blocks<Fold::assign, B>(x, alpha);
  else if (x.row_scale)
    impl::product_blocks<Fold::row_scaled, B>(x, alpha);
  else if (x.col_scale)
    impl::product_blocks<Fold::col_scaled, B>(x, alpha);
  else
    impl::product_blocks<Fold::add, B>(x, alpha);
#endif
}

// NOLINTEND(bugprone-easily-swappable-parameters)
}  // namespace kernel
ABC_NAMESPACE_END
