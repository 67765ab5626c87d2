// SPDX-License-Identifier: MIT
// abc fuzz: abc::load_state (abc/state_io.hpp) on hostile blobs. The input is either a raw blob or
// (more useful, since a random blob fails the checksum) a real state built by a few steps, saved,
// then corrupted at fuzz-chosen bytes, with its checksum optionally recomputed so the parser past it
// is reached. Invariants (trap on violation, besides any sanitizer report):
//  - load_state only throws abc::config_error, and then leaves the destination unchanged;
//  - a blob that loads saves back byte for byte (save_state(load_state(b)) == b);
//  - a loaded state can be stepped (or is refused by validate_step) without a crash.
#include <abc/abc.hpp>
#include <abc/state_io.hpp>

#include "fuzz.hpp"

#include <cstddef>
#include <cstdint>
#include <vector>

namespace {

using abc::Index;

using abc_fuzz::Reader;

template <class Control>
void run(const Control& ctl, std::uint8_t mode, Reader& in) {
  using T = typename Control::scalar_type;
  const abc::BoundedAttention<Control> attn{ctl};
  const Index d = 4, dv = 3;
  std::vector<std::uint8_t> blob;
  if (mode & 2) {
    blob.assign(in.rest(), in.rest() + in.rest_size());
  } else {
    auto s = attn.make_state(d, dv);
    const int steps = in.byte() % 8;
    for (int t = 0; t < steps; ++t) {
      abc::Vector<T> q(d), k(d), v(dv);
      for (Index i = 0; i < d; ++i) q(i) = T(int(in.byte()) - 128) / T(32);
      for (Index i = 0; i < d; ++i) k(i) = T(int(in.byte()) - 128) / T(32);
      for (Index i = 0; i < dv; ++i) v(i) = T(int(in.byte()) - 128) / T(32);
      (void)attn.step(s, q, k, v);
    }
    blob = abc::save_state(attn, s);
    const int edits = in.byte() % 4;
    for (int e = 0; e < edits && !blob.empty(); ++e) {
      const std::size_t at = (std::size_t(in.byte()) << 8 | in.byte()) % blob.size();
      blob[at] ^= in.byte();
    }
    if ((in.byte() & 1) && blob.size() > 8) blob.resize(blob.size() - 1 - in.byte() % 16 % (blob.size() - 8));
  }
  if ((mode & 4) && blob.size() >= 16) {  // recompute the checksum over the edited blob
    const std::uint64_t h = abc::detail::fnv1a(blob.data(), blob.size() - 8);
    for (int i = 0; i < 8; ++i) blob[blob.size() - 8 + std::size_t(i)] = std::uint8_t(h >> (8 * i));
  }
  abc::State<T> dst = (mode & 8) ? abc::State<T>{} : attn.make_state(d, dv);
  const abc::State<T> before = dst;
  bool threw = false;
  try {
    abc::load_state(attn, blob, dst);
  } catch (const abc::config_error&) {
    threw = true;
  } catch (...) {
    __builtin_trap();
  }
  if (threw) {
    ABC_FUZZ_REQUIRE(dst == before);
    return;
  }
  ABC_FUZZ_REQUIRE(abc::save_state(attn, dst) == blob);
  const abc::Vector<T> q = abc::Vector<T>::Ones(dst.key_dim()), v = abc::Vector<T>::Ones(dst.value_dim());
  if (attn.validate_step(dst, q, q, v) == abc::Status::ok) (void)attn.step(dst, q, q, v);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  Reader in(data, size);
  const std::uint8_t mode = in.byte();
  try {
    if (mode & 1)
      run(abc::control::SlidingWindow<double>{4}, mode, in);
    else
      run(abc::control::Mlp<float>{4, 3, /*seed=*/7}, mode, in);
  } catch (...) {
    __builtin_trap();  // nothing but load_state may throw here
  }
  return 0;
}
