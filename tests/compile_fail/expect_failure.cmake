# Compiles SOURCE with -D${DEFINE}. EXPECT empty: the compile must succeed. Otherwise it must fail,
# and the compiler output must carry, with CALLEE given, the compiler's "no matching ..." naming
# ${CALLEE}; without it, abc's static_assert naming the member ${EXPECT}.
set(include_flags)
foreach(dir IN LISTS INCLUDES)
  list(APPEND include_flags -I${dir})
endforeach()
execute_process(
  COMMAND ${CXX} -std=c++17 -fsyntax-only ${include_flags} -D${DEFINE} ${SOURCE}
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(EXPECT STREQUAL "")
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${SOURCE} with -D${DEFINE} failed to compile:\n${err}")
  endif()
  return()
endif()
if(rc EQUAL 0)
  message(FATAL_ERROR "${EXPECT}: compiled, expected a compile error")
endif()
if(DEFINED CALLEE)
  set(PATTERN "no matching [^\n]*${CALLEE}")
else()
  set(PATTERN "abc::BoundedAttention<Control>: Control must provide[^\n]*${EXPECT}")
endif()
string(REGEX MATCH "${PATTERN}" hit "${err}")
if(NOT hit)
  message(FATAL_ERROR "${EXPECT}: no error matching '${PATTERN}' in:\n${err}")
endif()
message(STATUS "rejected as expected: ${hit}")
