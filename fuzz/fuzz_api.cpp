// SPDX-License-Identifier: MIT
// abc fuzz: the public API of BoundedAttention with fuzz-chosen control, shapes, options and values.
// libFuzzer entry point; build with -DABC_BUILD_FUZZERS=ON (clang). What it drives and the
// invariants it traps on: fuzz_api.hpp. Its float half is compiled here, its double half in
// fuzz_api_double.cpp.
#include "fuzz_api.hpp"

#include <cstddef>
#include <cstdint>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  abc_fuzz::Reader in(data, size);
  if (in.byte() & 1)
    fuzz_api_double(in);
  else
    fuzz<float>(in);
  return 0;
}
