# Finds the Debian 12 packages tapeformer builds on and gathers them in one interface target.
find_package(OpenMP REQUIRED)
find_package(dnnl CONFIG REQUIRED)
find_package(HDF5 REQUIRED COMPONENTS C CXX)
find_package(ZLIB REQUIRED)   # crc32 of the checkpoint integrity header (HDF5 links zlib already)
find_package(yaml-cpp CONFIG REQUIRED)
find_package(CLI11 CONFIG REQUIRED)
find_package(GTest REQUIRED)
find_package(MPI REQUIRED COMPONENTS C)  # Open MPI (libopenmpi-dev): data-parallel training, ring attention
find_program(MPIEXEC_EXECUTABLE NAMES mpirun mpiexec REQUIRED)  # openmpi-bin: runs the tests labelled mpi
find_package(PkgConfig REQUIRED)
pkg_check_modules(CAIRO REQUIRED IMPORTED_TARGET cairo)  # drawing and PNG (inspect/; libcairo2-dev)

# OpenBLAS: link the OpenMP build (libopenblas0-openmp) by its path, so BLAS threads are the same
# libgomp threads oneDNN and our loops use; Debian's alternatives would otherwise pick the pthread
# build, whose spinning threads fight libgomp's (see README, "Threads").
find_library(OPENBLAS_OPENMP NAMES openblas.so.0 libopenblas.so.0
             PATHS /usr/lib/x86_64-linux-gnu/openblas-openmp /usr/lib/aarch64-linux-gnu/openblas-openmp
             NO_DEFAULT_PATH)
if(NOT OPENBLAS_OPENMP)
  message(FATAL_ERROR "OpenBLAS OpenMP build not found: run scripts/setup.sh (package libopenblas0-openmp)")
endif()
find_path(CBLAS_INCLUDE_DIR cblas.h PATHS /usr/include/x86_64-linux-gnu /usr/include/aarch64-linux-gnu /usr/include/openblas)

add_library(tapeformer_deps INTERFACE)
target_include_directories(tapeformer_deps INTERFACE ${HDF5_INCLUDE_DIRS} ${CBLAS_INCLUDE_DIR})
target_link_libraries(tapeformer_deps INTERFACE
  DNNL::dnnl ${OPENBLAS_OPENMP} ${HDF5_CXX_LIBRARIES} ${HDF5_LIBRARIES}
  yaml-cpp CLI11::CLI11 MPI::MPI_C OpenMP::OpenMP_CXX ZLIB::ZLIB PkgConfig::CAIRO)
