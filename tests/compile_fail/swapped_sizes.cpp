// SPDX-License-Identifier: MIT
// abc tests: a control's slot count and seed are abc::Slots and abc::Seed, so a call that passes
// bare sizes (the old argument order, or the new order with the wrappers forgotten) or swaps the
// slot count with the input width must not compile. -DABC_NAMED compiles the correct calls.
#include <abc/abc.hpp>

int main() {
  constexpr abc::Index n = 4, d_x = 16, n_max = 32;
#if defined(ABC_NAMED)
  abc::control::Mlp<float> mlp(abc::Slots{n}, d_x, abc::Seed{1});
  abc::control::Linformer<float> lf(abc::Slots{n}, n_max, abc::Seed{2});
  abc::control::Cluster<float> cl(abc::Slots{n}, d_x, abc::Seed{3});
  return mlp.num_slots() + lf.num_slots() + cl.num_slots() == 3 * n ? 0 : 1;
#elif defined(ABC_BARE_mlp)
  abc::control::Mlp<float> mlp(d_x, n, 1);
  return mlp.num_slots() == n ? 0 : 1;
#elif defined(ABC_SWAPPED_mlp)
  abc::control::Mlp<float> mlp(d_x, abc::Slots{n}, abc::Seed{1});
  return mlp.num_slots() == n ? 0 : 1;
#elif defined(ABC_BARE_linformer)
  abc::control::Linformer<float> lf(n, n_max, 2);
  return lf.num_slots() == n ? 0 : 1;
#elif defined(ABC_BARE_cluster)
  abc::control::Cluster<float> cl(n, d_x, 3);
  return cl.num_slots() == n ? 0 : 1;
#endif
}
