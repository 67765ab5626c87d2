// SPDX-License-Identifier: MIT
// abc example: a long stream decoded one token at a time through step(), in constant memory.
//
//   streaming_decode [tokens]      (default 200000)
//
// Prints tokens/s and the state's bytes as the stream goes: both stay flat, whatever the length.
// A softmax KV cache for the same stream would grow by 2·d·4 bytes every token.
#include <abc/abc.hpp>

#include <chrono>
#include <cstdlib>
#include <iostream>

int main(int argc, char** argv) {
  const abc::Index tokens = argc > 1 ? std::atol(argv[1]) : 200000;
  const abc::Index d = 64, n = 64;
  abc::BoundedAttention attn{abc::control::Mlp{abc::Slots{n}, d, abc::Seed{7}}};
  auto state = attn.make_state(d, d);

  // A small pool of inputs reused round-robin: the stream's content does not change the cost.
  const abc::Matrix<float> pool = abc::Matrix<float>::Random(256, d);
  abc::Vector<float> out(d);
  double checksum = 0;
  auto start = std::chrono::steady_clock::now(), last = start;
  abc::Index reported = 0;
  for (abc::Index t = 0; t < tokens; ++t) {
    const auto x = pool.row(t % pool.rows());
    attn.step_into(state, x, x, x, out);  // q = k = v = x for the demonstration
    checksum += out(0);
    const auto now = std::chrono::steady_clock::now();
    if (std::chrono::duration<double>(now - last).count() > 0.5 || t + 1 == tokens) {
      const double secs = std::chrono::duration<double>(now - last).count();
      std::cout << "tokens " << t + 1 << "  tokens/s " << static_cast<long>(double(t + 1 - reported) / secs)
                << "  state bytes " << state.bytes() << '\n';
      last = now;
      reported = t + 1;
    }
  }
  const double total = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cout << "decoded " << tokens << " tokens in " << total << " s (" << static_cast<long>(double(tokens) / total)
            << " tokens/s), state " << state.bytes() << " bytes; a softmax KV cache would hold "
            << tokens * 2 * d * abc::Index(sizeof(float)) << " bytes; checksum " << checksum << '\n';
  return std::isfinite(checksum) ? 0 : 1;
}
