// SPDX-License-Identifier: MIT
// abc tests: the SIMD batch width of the build (1 on the scalar path), for the kernel tests' shapes
// around whole batches and their tails.
#pragma once

#include <abc/kernel/simd.hpp>
#include <abc/types.hpp>

namespace ref {

template <class T>
abc::Index batch_width() {
#ifdef ABC_NO_SIMD
  return 1;
#else
  return abc::Index(abc::kernel::batch<T>::size);
#endif
}

}  // namespace ref
