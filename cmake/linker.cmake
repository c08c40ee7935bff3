# The linker: lld where it is installed (Debian's lld), else gold (in binutils, so always there), else the
# compiler's default (bfd). The build links some 130 programs against large static libraries; one test
# took 2.6 s to link with bfd, 1.6 s with gold and 0.8 s with lld under the sanitizers, 0.83, 0.29 and
# 0.27 s in Release (2026-12-06, Zen 5). TAPEFORMER_LINKER names one (lld, gold, bfd) or auto.
set(TAPEFORMER_LINKER auto CACHE STRING "Linker: auto (lld, else gold, else the default), lld, gold or bfd")
include(CheckLinkerFlag)
if(TAPEFORMER_LINKER STREQUAL "auto")
  set(linker_candidates lld gold)
else()
  set(linker_candidates ${TAPEFORMER_LINKER})
endif()
foreach(linker IN LISTS linker_candidates)
  check_linker_flag(CXX "-fuse-ld=${linker}" TAPEFORMER_LINKER_${linker}_WORKS)
  if(TAPEFORMER_LINKER_${linker}_WORKS)
    add_link_options(-fuse-ld=${linker})
    message(STATUS "Linking with ${linker}")
    break()
  elseif(NOT TAPEFORMER_LINKER STREQUAL "auto")
    message(FATAL_ERROR "TAPEFORMER_LINKER=${TAPEFORMER_LINKER}: the compiler cannot link with -fuse-ld=${linker}")
  endif()
endforeach()
