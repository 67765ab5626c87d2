// SPDX-License-Identifier: MIT
// abc tests: a user control missing one required member (chosen by -DABC_MISSING_<member>) must be
// rejected at compile time with a message that names the member; the complete one must compile.
#include <abc/bounded_attention.hpp>

struct UserControl {
#ifndef ABC_MISSING_scalar_type
  using scalar_type = float;
#endif
#ifndef ABC_MISSING_num_slots
  abc::Index num_slots() const { return 4; }
#endif
  static constexpr int max_writes = 1;
#ifndef ABC_MISSING_schedule
  void schedule(abc::Index t, abc::VectorRef<float>, abc::MatrixOut<float>,
                abc::SparseWrite<float, 1>& w) const {
    w.add(t % 4, 0.0f, 1.0f);
  }
#endif
};

int main() {
  abc::BoundedAttention<UserControl> attn{UserControl{}};
  return attn.num_slots() == 4 ? 0 : 1;
}
