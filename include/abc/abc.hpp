// SPDX-License-Identifier: MIT
// abc: bounded-memory attention. Umbrella header: the whole public API.
#pragma once

#include "bounded_attention.hpp"
#include "concepts.hpp"
#include "config.hpp"
#include "error.hpp"
#include "options.hpp"
#include "schedule.hpp"
#include "softmax_attention.hpp"
#include "state.hpp"
#include "types.hpp"

#include "control/identity.hpp"
#include "control/mlp.hpp"
#include "control/sliding_window.hpp"
