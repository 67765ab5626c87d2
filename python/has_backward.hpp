// SPDX-License-Identifier: MIT
// abc_attention: whether abc has backward for a control, for the bindings (which bind backward
// only then) and for the bit-for-bit test's C++ side (which calls it only then).
#pragma once

#include <abc/concepts.hpp>
#include <abc/readout.hpp>

namespace abc_python {

// BoundedAttention<Control>::backward needs a softmax readout and a schedule with a chain rule (or
// none needed: a constant schedule); its static_assert is not SFINAE-friendly, so callers ask first.
// RandomFeature (RFA's linear readout) has no backward.
template <class Control>
inline constexpr bool has_backward = abc::detail::readout_of<Control>::value == abc::Readout::softmax &&
                                     abc::detail::differentiable_control<Control>::value;

}  // namespace abc_python
