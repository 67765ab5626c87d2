// SPDX-License-Identifier: MIT
// abc: bounded-memory attention. Eigen aliases used across the public API.
#pragma once

#include "config.hpp"

#include <Eigen/Core>

ABC_NAMESPACE_BEGIN

using Index = Eigen::Index;

/// Row-major dynamic matrix: one token per row, as in the mathematics.
template <class T>
using Matrix = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

/// Column-major dynamic matrix: a State's K̃ [n × d], each key dimension's n slots contiguous, so
/// that a decode step forms the n scores K̃ q as a sum of columns (no horizontal sum per slot).
template <class T>
using ColMatrix = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::ColMajor>;
/// Dynamic column vector (one token's query, key, value or output).
template <class T>
using Vector = Eigen::Matrix<T, Eigen::Dynamic, 1>;

/// Read-only view of a matrix: accepts matrices, maps and row blocks without a copy.
template <class T>
using MatrixRef = Eigen::Ref<const Matrix<T>>;

/// Writable view of a caller-owned matrix (allocation-free overloads write into it).
template <class T>
using MatrixOut = Eigen::Ref<Matrix<T>>;

/// Read-only view of a vector.
template <class T>
using VectorRef = Eigen::Ref<const Vector<T>>;

/// Writable view of a caller-owned vector.
template <class T>
using VectorOut = Eigen::Ref<Vector<T>>;

ABC_NAMESPACE_END
