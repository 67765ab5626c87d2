// SPDX-License-Identifier: MIT
// abc: bounded-memory attention. kernel::Engine, the engine a control's readout runs on.
#pragma once

#include <type_traits>

#include "../concepts.hpp"
#include "../readout.hpp"
#include "linear_engine.hpp"
#include "softmax_engine.hpp"

ABC_NAMESPACE_BEGIN
namespace kernel {

/// The engine of a control, chosen at compile time by its readout: LinearEngine for
/// `readout = Readout::linear`, SoftmaxEngine otherwise. Both take (control, options) and run
/// build_memory, read_memory, run_causal and step_heads.
template <class Control>
using Engine = std::conditional_t<detail::readout_of<Control>::value == Readout::linear, LinearEngine<Control>,
                                  SoftmaxEngine<Control>>;

}  // namespace kernel
ABC_NAMESPACE_END
