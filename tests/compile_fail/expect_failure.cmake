# Compiles SOURCE with -D${DEFINE}. EXPECT empty: the compile must succeed. Otherwise it must fail,
# and the compiler output must carry abc's static_assert naming the member ${EXPECT}.
set(include_flags)
foreach(dir IN LISTS INCLUDES)
  list(APPEND include_flags -I${dir})
endforeach()
execute_process(
  COMMAND ${CXX} -std=c++17 -fsyntax-only ${include_flags} -D${DEFINE} ${SOURCE}
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(EXPECT STREQUAL "")
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "a complete control failed to compile:\n${err}")
  endif()
  return()
endif()
if(rc EQUAL 0)
  message(FATAL_ERROR "a control missing ${EXPECT} compiled")
endif()
string(REGEX MATCH "abc::BoundedAttention<Control>: Control must provide[^\n]*${EXPECT}" hit "${err}")
if(NOT hit)
  message(FATAL_ERROR "no static_assert naming ${EXPECT} in:\n${err}")
endif()
message(STATUS "rejected as expected: ${hit}")
