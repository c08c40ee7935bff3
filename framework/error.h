// The exception types of tapeformer and TF_CHECK, which formats shapes, names and values into them.
//
// Library code throws; it never prints or exits. The program maps InputError (bad recipe, data,
// checkpoint or command line) to exit code 2 and every other Error to exit code 1.
//
//   TF_CHECK(a.shape() == b.shape(), "add: shapes differ: ", a.shape(), " vs ", b.shape());
#pragma once
#include <sstream>
#include <stdexcept>
#include <string>

namespace tf {

// An internal failure or a misuse of the library's API (exit code 1 in the program).
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Bad user input: a recipe, data file, checkpoint or command line (exit code 2 in the program).
class InputError : public Error {
 public:
  using Error::Error;
};

template <class... Parts>
std::string concat(const Parts&... parts) {
  std::ostringstream out;
  (out << ... << parts);
  return out.str();
}

}  // namespace tf

#define TF_CHECK(cond, ...)                                   \
  do {                                                        \
    if (!(cond)) throw ::tf::Error(::tf::concat(__VA_ARGS__)); \
  } while (0)

#define TF_CHECK_INPUT(cond, ...)                                  \
  do {                                                             \
    if (!(cond)) throw ::tf::InputError(::tf::concat(__VA_ARGS__)); \
  } while (0)
