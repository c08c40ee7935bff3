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
#include <utility>
#include <vector>

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

// Bad input that belongs to named settings (recipe keys such as "model.n_heads"), as data rather
// than as words in the message: a recipe reader points at the line of the first key its file set.
class ConfigError : public InputError {
 public:
  ConfigError(std::vector<std::string> keys, const std::string& message)
      : InputError(message), keys(std::move(keys)) {}
  std::vector<std::string> keys;  // the settings that decide the error, the one to point at first
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

// Adds a ConfigError to `found` (a std::vector<ConfigError>) and goes on, so that a validation can
// report every problem at once. keys: a braced list of setting names, e.g.
// TF_NOTE_CONFIG(found, n > 0, ({"model.n_heads"}), "...").
#define TF_NOTE_CONFIG(found, cond, keys, ...)                                                          \
  do {                                                                                                  \
    if (!(cond)) (found).emplace_back(std::vector<std::string> keys, ::tf::concat(__VA_ARGS__));        \
  } while (0)

#define TF_CHECK_INPUT(cond, ...)                                  \
  do {                                                             \
    if (!(cond)) throw ::tf::InputError(::tf::concat(__VA_ARGS__)); \
  } while (0)
