// SPDX-License-Identifier: MIT
// abc fuzz: abc::load_state (abc/state_io.hpp) on hostile blobs. The input is either a raw blob or
// (more useful, since a random blob fails the checksum) a real state built by a few steps, saved,
// then corrupted at fuzz-chosen bytes, with its checksum optionally recomputed so the parser past it
// is reached. Invariants (trap on violation, besides any sanitizer report):
//  - load_state only throws abc::config_error, and then leaves the destination unchanged;
//  - a blob that loads saves back byte for byte (save_state(load_state(b)) == b);
//  - a loaded state can be stepped (or is refused by validate_step) without a crash;
//  - a loaded state belongs to its control type: an attention of another type refuses it.
// Controls: ABC-MLP, sliding window, TRAMS top-k eviction (integer slot positions, scores that
// overflow to +inf), and global tokens + a gated top-k eviction (per-part slot-state rules). And
// select::load_state on TRAMS pools (fuzz-chosen pool, recent, top-k and score, wrapped rings) and
// KV caches (H2O, attention sinks, SnapKV; fuzz-chosen sizes, evicting) with the same invariants;
// their blobs are refused by abc::load_state, and a loaded cache continues. Float states are held
// in bfloat16 sometimes (source and destination): a bfloat16 destination holds the blob rounded,
// which saves and loads back exactly.
#include <abc/abc.hpp>
#include <abc/select/state_io.hpp>
#include <abc/state_io.hpp>

#include "fuzz.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <vector>

namespace {

using abc::Index;

using abc_fuzz::Reader;

// Edits fuzz-chosen bytes of a real blob, maybe truncates it (the checksum is redone by the caller).
void corrupt(std::vector<std::uint8_t>& blob, Reader& in) {
  const int edits = in.byte() % 4;
  for (int e = 0; e < edits && !blob.empty(); ++e) {
    const std::size_t at = (std::size_t(in.byte()) << 8 | in.byte()) % blob.size();
    blob[at] ^= in.byte();
  }
  if ((in.byte() & 1) && blob.size() > 8) blob.resize(blob.size() - 1 - in.byte() % 16 % (blob.size() - 8));
}

void reseal(std::vector<std::uint8_t>& blob) {
  if (blob.size() < 16) return;
  const std::uint64_t h = abc::detail::fnv1a(blob.data(), blob.size() - 8);
  for (int i = 0; i < 8; ++i) blob[blob.size() - 8 + std::size_t(i)] = std::uint8_t(h >> (8 * i));
}

// A state of `attn` (d = 4, dv = 3) after `steps` fuzz-chosen tokens, saved by `save`. Values are
// mostly moderate; 255 is 1e30, whose products overflow (a TRAMS score of +inf).
template <class Attn, class Save, class... Storage>
std::vector<std::uint8_t> saved_after_steps(const Attn& attn, int steps, Reader& in, const Save& save,
                                            Storage... storage) {
  using T = typename Attn::scalar_type;
  constexpr Index d = 4, dv = 3;
  auto s = attn.make_state(d, dv, storage...);
  const auto value = [&in] {
    const std::uint8_t b = in.byte();
    return b == 255 ? T(1e30) : T(int(b) - 128) / T(32);
  };
  for (int t = 0; t < steps; ++t) {
    abc::Vector<T> q(d), k(d), v(dv);
    for (Index i = 0; i < d; ++i) q(i) = value();
    for (Index i = 0; i < d; ++i) k(i) = value();
    for (Index i = 0; i < dv; ++i) v(i) = value();
    (void)attn.step(s, q, k, v);
  }
  return save(attn, s);
}

template <class Control>
void run(const Control& ctl, std::uint8_t mode, Reader& in) {
  using T = typename Control::scalar_type;
  const abc::BoundedAttention<Control> attn{ctl};
  const Index d = 4, dv = 3;
  // Float states held in bfloat16, sometimes: the blob's source and the destination.
  const abc::StateStorage storage =
      std::is_same<T, float>::value && (mode & 0x40) ? abc::StateStorage::bfloat16 : abc::StateStorage::native;
  std::vector<std::uint8_t> blob;
  if (mode & 2) {
    blob.assign(in.rest(), in.rest() + in.rest_size());
  } else {
    blob = saved_after_steps(
        attn, in.byte() % 8, in, [](const auto& a, const auto& st) { return abc::save_state(a, st); }, storage);
    corrupt(blob, in);
  }
  if (mode & 4) reseal(blob);  // recompute the checksum over the edited blob
  abc::State<T> dst = (mode & 8) ? abc::State<T>{} : attn.make_state(d, dv, storage);
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
  if (dst.storage() == abc::StateStorage::native) {
    ABC_FUZZ_REQUIRE(abc::save_state(attn, dst) == blob);
  } else {
    // The blob's memory rounded to bfloat16: what it saves then loads back exactly.
    const std::vector<std::uint8_t> rounded = abc::save_state(attn, dst);
    abc::State<T> again = attn.make_state(d, dv, abc::StateStorage::bfloat16);
    abc::load_state(attn, rounded, again);
    ABC_FUZZ_REQUIRE(again == dst && abc::save_state(attn, again) == rounded);
  }
  // The state belongs to this control type: an attention of another refuses it, whatever the shapes.
  const abc::BoundedAttention<abc::control::RandomSlot<T>> other{abc::control::RandomSlot<T>{abc::Slots{dst.num_slots()}, abc::Seed{3}}};
  const abc::Vector<T> zq = abc::Vector<T>::Zero(dst.key_dim()), zv = abc::Vector<T>::Zero(dst.value_dim());
  if (dst.key_dim() > 0) ABC_FUZZ_REQUIRE(other.validate_step(dst, zq, zq, zv) != abc::Status::ok);
  const abc::Vector<T> q = abc::Vector<T>::Ones(dst.key_dim()), v = abc::Vector<T>::Ones(dst.value_dim());
  if (attn.validate_step(dst, q, q, v) == abc::Status::ok) (void)attn.step(dst, q, q, v);
}

// A selection cache (TRAMS pool or KV cache) of `attn`: fed by steps, saved, corrupted, loaded.
template <class Attn>
void run_select(const Attn& attn, std::uint8_t mode, Reader& in) {
  using T = typename Attn::scalar_type;
  using State = typename Attn::State;
  const Index d = 4, dv = 3;
  std::vector<std::uint8_t> blob;
  if (mode & 2) {
    blob.assign(in.rest(), in.rest() + in.rest_size());
  } else {
    // Up to twice the cache: rings wrap, caches evict.
    blob = saved_after_steps(attn, in.byte() % 12, in,
                             [](const auto& a, const auto& st) { return abc::select::save_state(a, st); });
    corrupt(blob, in);
  }
  if (mode & 4) reseal(blob);
  State dst = (mode & 8) ? State{} : attn.make_state(d, dv);
  const std::vector<std::uint8_t> before = (mode & 8) ? std::vector<std::uint8_t>{} : abc::select::save_state(attn, dst);
  bool threw = false;
  try {
    abc::select::load_state(attn, blob, dst);
  } catch (const abc::config_error&) {
    threw = true;
  } catch (...) {
    __builtin_trap();
  }
  if (threw) {
    if (mode & 8)
      ABC_FUZZ_REQUIRE(dst.capacity() == 0 && dst.size() == 0 && dst.position() == 0);
    else
      ABC_FUZZ_REQUIRE(abc::select::save_state(attn, dst) == before);
    return;
  }
  ABC_FUZZ_REQUIRE(abc::select::save_state(attn, dst) == blob);
  ABC_FUZZ_REQUIRE(dst.size() <= dst.capacity() && dst.position() >= dst.size());
  // A selection cache is not a BoundedAttention state: abc::load_state refuses its blob by its tag.
  const abc::BoundedAttention<abc::control::SlidingWindow<T>> window{abc::control::SlidingWindow<T>{dst.capacity()}};
  abc::State<T> other;
  ABC_FUZZ_REQUIRE(abc_fuzz::throws([&] { abc::load_state(window, blob, other); }));
  // The loaded cache continues: one step, then it holds one more token (up to its capacity).
  const Index held = dst.size();
  const abc::Vector<T> q = abc::Vector<T>::Ones(dst.key_dim()), v = abc::Vector<T>::Ones(dst.value_dim());
  (void)attn.step(dst, q, q, v);
  ABC_FUZZ_REQUIRE(dst.size() == std::min<Index>(held + 1, dst.capacity()));
}

void run_trams(std::uint8_t mode, Reader& in) {
  using T = float;
  const Index pool = 1 + in.byte() % 6, recent = in.byte() % (pool + 1), topk = in.byte() % (pool - recent + 1);
  const abc::select::KeyScore<T> score =
      (in.byte() & 1) ? abc::select::KeyScore<T>::norm() : abc::select::KeyScore<T>(abc::Matrix<T>::Ones(4, 5));
  run_select(abc::select::TramsAttention<T>(abc::select::TramsConfig{pool, recent, topk}, score), mode, in);
}

void run_kv_cache(std::uint8_t mode, Reader& in) {
  using namespace abc::select;
  const Index a = in.byte() % 4, b = 1 + in.byte() % 3 - (a > 0 ? 1 : 0);  // a budget of at least 1
  switch (in.byte() % 3) {
    case 0: run_select(HeavyHitterAttention<double>(HeavyHitterConfig{a, b}), mode, in); break;
    case 1: run_select(SinkAttention<float>(SinkConfig{a, b}), mode, in); break;
    default: {
      const Pooling pooling = (in.byte() & 1) ? Pooling::max : Pooling::average;
      run_select(SnapKvAttention<double>(SnapKvConfig{a + 1, 1, 1 + 2 * (in.byte() % 3), pooling, b}), mode, in);
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  Reader in(data, size);
  const std::uint8_t mode = in.byte();
  try {
    using namespace abc::control;
    switch ((mode & 1) | (mode >> 3 & 6)) {
      case 0:
      case 2: run(Mlp<float>{abc::Slots{3}, 4, abc::Seed{7}}, mode, in); break;
      case 1:
      case 3: run(SlidingWindow<double>{4}, mode, in); break;
      case 4:
      case 5: run(TopKEviction<float>{abc::Slots{4}, 2, abc::select::KeyScore<float>::norm()}, mode, in); break;
      case 7:
        if (in.byte() & 1)
          run_kv_cache(mode, in);
        else
          run_trams(mode, in);
        break;
      default:
        run(Concat<GlobalTokens<double>, Gated<TopKEviction<double>>>{
                GlobalTokens<double>{std::vector<Index>{0, 2}},
                Gated<TopKEviction<double>>{TopKEviction<double>{abc::Slots{3}, 1, abc::select::KeyScore<double>::norm()},
                                            abc::Vector<double>::Constant(4, 0.25), 0.5}},
            mode, in);
    }
  } catch (...) {
    __builtin_trap();  // nothing but load_state may throw here
  }
  return 0;
}
