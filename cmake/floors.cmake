# One static library per floor of the house (README, "Architecture"), each linking only the floors
# below it:
#   tapeformer_framework
#   tapeformer_layers  tapeformer_optim  tapeformer_data     (each on framework only)
#   tapeformer_export                                         (on layers, data, framework)
#   tapeformer_train                                          (on the four above)
#   tapeformer_inspect                                        (on train and below)
# and tapeformer_lib, everything, for the program, the tests and the benchmarks.
#
# A static library does not fail to link by itself when it calls upward (the linker may find the
# symbol later on the command line), so each floor also gets floor_check_<floor>: a program that
# links every object of the floor (whole archive) with only the floors below it. A call from a
# floor to one above leaves an undefined symbol there and fails the build. tests/repo/floors_test.cpp
# checks the same for #include lines.

# tapeformer_floor(<floor> [BELOW <floor>...]): the library of the current folder's sources.
function(tapeformer_floor floor)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "" "BELOW")
  file(GLOB_RECURSE sources CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/*.cpp)
  set(below tapeformer_deps)
  foreach(other ${arg_BELOW})
    list(APPEND below tapeformer_${other})
  endforeach()
  add_library(tapeformer_${floor} STATIC ${sources})
  target_include_directories(tapeformer_${floor} PUBLIC ${PROJECT_SOURCE_DIR})
  target_link_libraries(tapeformer_${floor} PUBLIC ${below})
  add_executable(floor_check_${floor} ${PROJECT_SOURCE_DIR}/cmake/floor_check.cpp)
  target_link_libraries(floor_check_${floor} PRIVATE "$<LINK_LIBRARY:WHOLE_ARCHIVE,tapeformer_${floor}>" ${below})
endfunction()
