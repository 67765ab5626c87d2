// SPDX-License-Identifier: MIT
// abc: bounded-memory attention. Umbrella header: the whole public API.
#pragma once

#include "bounded_attention.hpp"
#include "concepts.hpp"
#include "config.hpp"
#include "error.hpp"
#include "head_tensor.hpp"
#include "multi_head_attention.hpp"
#include "options.hpp"
#include "readout.hpp"
#include "schedule.hpp"
#include "softmax_attention.hpp"
#include "state.hpp"
#include "state_io.hpp"
#include "types.hpp"

#include "control/cluster.hpp"
#include "control/compressive.hpp"
#include "control/concat.hpp"
#include "control/dilated.hpp"
#include "control/gated.hpp"
#include "control/global_tokens.hpp"
#include "control/identity.hpp"
#include "control/linformer.hpp"
#include "control/mlp.hpp"
#include "control/random_feature.hpp"
#include "control/random_slot.hpp"
#include "control/sliding_window.hpp"

#include "feature/arc_cosine.hpp"
#include "feature/projection.hpp"
#include "feature/random_fourier.hpp"
