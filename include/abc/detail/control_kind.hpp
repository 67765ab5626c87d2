// SPDX-License-Identifier: MIT
// abc: bounded-memory attention. Which control type a State belongs to.
#pragma once

#include <algorithm>
#include <string>

#include "../concepts.hpp"

ABC_NAMESPACE_BEGIN
namespace detail {

// One per control type: a State records the kind of the control whose make_state (or load_state)
// made it, and every call refuses a state of another kind, whatever its shapes. `name` gives the
// control's tag() (its name in state blobs) or, for a control without one, the compiler's spelling.
struct ControlKind {
  std::string (*name)();
};

// The compiler's spelling of C, spaces removed (messages only: it differs between compilers).
template <class C>
std::string compiler_name() {
#if defined(__clang__) || defined(__GNUC__)
  std::string f = __PRETTY_FUNCTION__;
  const auto at = f.find("C = ");
  std::string name = at == std::string::npos ? f : f.substr(at + 4);
  name.resize(std::min(name.size(), name.find_first_of(";]")));
#else
  std::string name = "a user control";
#endif
  // Without the instruction-set inline namespace, so that the name, like a blob's tag, is the same
  // in every build.
  const std::string isa = ABC_ISA_STR(ABC_ISA_NAMESPACE) "::";
  for (auto pos = name.find(isa); pos != std::string::npos; pos = name.find(isa)) name.erase(pos, isa.size());
  std::string out;
  for (char c : name)
    if (c != ' ') out += c;
  return out;
}

template <class C>
std::string control_name() {
  if constexpr (has_tag<C>::value)
    return C::tag();
  else
    return compiler_name<C>();
}

template <class C>
inline constexpr ControlKind control_kind_v{&control_name<C>};

// Same address within a program; the names decide across shared libraries that each hold a copy.
inline bool same_kind(const ControlKind* a, const ControlKind* b) {
  return a == b || (a != nullptr && b != nullptr && a->name() == b->name());
}

}  // namespace detail
ABC_NAMESPACE_END
