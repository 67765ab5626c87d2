# The tools' contract for bad input, as a CTest check: exit status 2 and exactly one line on stderr,
# matching EXPECT. A crash, an abort or a Python traceback (many lines) fails it.
#
#   cmake -DCMD="prog|arg|arg" -DEXPECT=regex -P expect_usage_error.cmake
#
# CMD separates its words with "|": a ";" would be split by add_test before it got here.
string(REPLACE "|" ";" cmd "${CMD}")
execute_process(COMMAND ${cmd} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
string(REGEX MATCHALL "\n" newlines "${err}")
list(LENGTH newlines lines)
if(NOT rc STREQUAL "2")
  message(FATAL_ERROR "expected exit status 2, got '${rc}'; stderr:\n${err}")
elseif(NOT lines EQUAL 1 OR NOT err MATCHES "\n$")
  message(FATAL_ERROR "expected one line on stderr, got ${lines}:\n${err}")
elseif(NOT err MATCHES "${EXPECT}")
  message(FATAL_ERROR "stderr does not match '${EXPECT}':\n${err}")
endif()
message(STATUS "ok: ${err}")
