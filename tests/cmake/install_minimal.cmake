# abc consumer test: a plain configure and install on a machine with neither Catch2 nor Google
# Benchmark (both hidden from find_package) succeeds, skipping the tests and benches it cannot build.
#   cmake -DABC_SOURCE_DIR=... -DWORK_DIR=... -P install_minimal.cmake
foreach(step
    "-S;${ABC_SOURCE_DIR};-B;${WORK_DIR}/build;-DCMAKE_DISABLE_FIND_PACKAGE_Catch2=ON;-DCMAKE_DISABLE_FIND_PACKAGE_benchmark=ON;-DABC_BUILD_EXAMPLES=OFF;-DABC_BUILD_BENCHMARKS=OFF"
    "--install;${WORK_DIR}/build;--prefix;${WORK_DIR}/prefix")
  execute_process(COMMAND ${CMAKE_COMMAND} ${step} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "cmake ${step} failed (${rc}):\n${out}\n${err}")
  endif()
  string(APPEND log "${out}")
endforeach()
if(NOT log MATCHES "Catch2 not found; the tests are skipped")
  message(FATAL_ERROR "the configure step did not say that the tests are skipped:\n${log}")
endif()
foreach(file include/abc/abc.hpp share/cmake/abc/abcConfig.cmake share/pkgconfig/abc.pc share/doc/abc/LICENSE)
  if(NOT EXISTS "${WORK_DIR}/prefix/${file}")
    message(FATAL_ERROR "not installed: ${file}")
  endif()
endforeach()
