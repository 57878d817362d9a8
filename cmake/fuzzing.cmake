# LM_LIBFUZZER=ON: the fuzz targets (tests/fuzz/) link clang's libFuzzer, and every C++ target is
# compiled with its coverage instrumentation (-fsanitize=fuzzer-no-link), so the libraries the
# targets call guide the search. Used with LM_SANITIZE=address,undefined by scripts/fuzz/run.sh
# in its own build folder; the normal build links the targets with tests/fuzz/standalone_driver.cc.
option(LM_LIBFUZZER "Link the fuzz targets with libFuzzer (clang only; scripts/fuzz/run.sh)" OFF)

if(LM_LIBFUZZER)
  if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "LM_LIBFUZZER needs clang (CXX=clang++), not ${CMAKE_CXX_COMPILER_ID}")
  endif()
  add_compile_options("$<$<COMPILE_LANGUAGE:CXX>:-fsanitize=fuzzer-no-link>")
  message(STATUS "Fuzz targets: libFuzzer")
endif()
