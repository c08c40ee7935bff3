# TAPEFORMER_FUZZ=ON: libFuzzer targets in tests/fuzz (docs/fuzzing.md). Needs clang. Everything is
# compiled with coverage instrumentation for libFuzzer (-fsanitize=fuzzer-no-link) plus AddressSanitizer
# and UndefinedBehaviorSanitizer, so the library's own code guides the fuzzer and reports its bugs;
# the fuzz executables alone link libFuzzer's main (-fsanitize=fuzzer, tests/fuzz/CMakeLists.txt).
option(TAPEFORMER_FUZZ "Build the libFuzzer targets in tests/fuzz (clang only)" OFF)
if(TAPEFORMER_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "TAPEFORMER_FUZZ needs clang (libFuzzer): configure with -DCMAKE_CXX_COMPILER=clang++ "
                        "-DCMAKE_C_COMPILER=clang, or use tests/fuzz/run.sh")
  endif()
  add_compile_options(-fsanitize=fuzzer-no-link,address,undefined -fno-omit-frame-pointer
                      -fno-sanitize-recover=undefined -g)
  add_link_options(-fsanitize=address,undefined)
endif()
