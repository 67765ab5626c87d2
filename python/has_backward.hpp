// SPDX-License-Identifier: MIT
// abc_attention: whether abc has backward for a control, for the bindings (which bind backward
// only then) and for the bit-for-bit test's C++ side (which calls it only then).
#pragma once

#include <abc/concepts.hpp>

namespace abc_python {

// BoundedAttention<Control>::backward needs a schedule with a chain rule (or none needed: a
// constant schedule), or, for a linear readout (RandomFeature), the features' chain rule; its
// static_assert is not SFINAE-friendly, so callers ask first.
template <class Control>
inline constexpr bool has_backward = abc::detail::differentiable_control<Control>::value;

}  // namespace abc_python
