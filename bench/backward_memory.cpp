// SPDX-License-Identifier: MIT
// abc bench: the memory an ABC-MLP backward pass takes beyond its arguments and its results.
//
//   backward_memory N [backward_block] [causal | non_causal]
//
// One process per measurement (the peak resident set only grows): the arguments (q, k, v, x,
// ∂L/∂out, N × 64 floats each) are allocated and touched first, then one backward pass runs
// (backward_causal, or backward with N queries),
// and the program prints the growth of the peak resident set across it, the size of its results
// (∂L/∂q, ∂L/∂k, ∂L/∂v, ∂L/∂x, ∂L/∂W_φ), and what is left: the pass's workspace at its peak.
// n = d = dv = d_x = 64, float, the default chunk.
#include <abc/abc.hpp>

#include <sys/resource.h>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace {

double peak_mib() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return double(u.ru_maxrss) / 1024.0;  // Linux reports KiB
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: backward_memory N [backward_block] [causal | non_causal]\n");
    return 2;
  }
  const abc::Index n_tok = std::stol(argv[1]), width = 64;
  abc::Options o;
  if (argc > 2) o.backward_block = std::stol(argv[2]);
  const bool causal = argc <= 3 || std::string(argv[3]) != "non_causal";
  using M = abc::Matrix<float>;
  const M q = M::Random(n_tok, width), k = M::Random(n_tok, width), v = M::Random(n_tok, width),
          x = M::Random(n_tok, width), dout = M::Random(n_tok, width);
  const abc::BoundedAttention attn(abc::control::Mlp<float>(abc::Slots{width}, width, abc::Seed{1}), o);
  const double before = peak_mib();
  const auto g = causal ? attn.backward_causal(q, k, v, dout, x) : attn.backward(q, k, v, dout, x);
  const double after = peak_mib();
  const double results =
      double(g.q.size() + g.k.size() + g.v.size() + g.x.size() + g.control.w_phi.size()) * sizeof(float) / (1 << 20);
  const double grew = after - before;
  std::printf("N %ld  backward_block %ld  %s  arguments %.1f MiB  grew +%.1f MiB  (results %.1f MiB,"
              " workspace %.1f MiB)  checksum %g\n",
              long(n_tok), long(o.backward_block), causal ? "backward_causal" : "backward",
              5.0 * double(n_tok * width) * sizeof(float) / (1 << 20), grew,
              results, grew - results, double(g.k.sum()));
  return 0;
}
