// Internals shared by the HDF5 writer (hdf5_io.cpp) and reader (hdf5_reader.cpp): path
// handling, type names, and the error capture that makes HDF5's failures readable. Not a public
// header: only those two files include it.
#pragma once
#include <H5Cpp.h>

#include <string>
#include <vector>

#include "framework/tensor.h"

namespace tf::hdf5 {

// Installs the error handler below (once); every H5Writer and H5Reader calls it first.
void init();

// "H5Dopen2 failed (incorrect metadata checksum after all read tries)": the exception's message
// and the innermost cause HDF5 reported for it (see hdf5_io.cpp), which it then forgets.
std::string detail(const H5::Exception& e);
void forget_cause();  // before an operation, so that an old cause is not reported with a new error

std::vector<std::string> split_path(const std::string& path);
std::string normalize(const std::string& group);  // "/a/b" for "a/b", "/a/b/" and "/a//b"; "/" for ""
std::string join(const std::string& group, const std::string& name);
// True when a group or dataset exists at `path`; walks the path, because HDF5 fails rather than
// answering false when an intermediate group is missing.
bool exists(const H5::H5File& file, const std::string& path);

std::string describe_type(hid_t type);  // "32-bit float", "unsigned 8-bit integer", "string"
const H5::PredType& file_type(DType d);
const H5::PredType& memory_type(DType d);

// Calls f(H5::H5Object&) on the group or dataset at `path`, which must exist.
template <class F>
void with_object(const H5::H5File& file, const std::string& path, F&& f) {
  const std::string p = normalize(path);
  if (p != "/" && exists(file, p) && file.childObjType(p) == H5O_TYPE_DATASET) {
    H5::DataSet ds = file.openDataSet(p);
    f(static_cast<H5::H5Object&>(ds));
    return;
  }
  H5::Group g = file.openGroup(p);
  f(static_cast<H5::H5Object&>(g));
}

}  // namespace tf::hdf5
