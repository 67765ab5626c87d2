// SPDX-License-Identifier: MIT
// abc fuzz: the double half of the fuzz_api harness (fuzz_api.hpp says why it is a file of its own).
#include "fuzz_api.hpp"

void fuzz_api_double(abc_fuzz::Reader& in) { fuzz<double>(in); }
