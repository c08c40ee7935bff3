// Test helpers for errors: the message of the tf::Error a call throws, and a check that it names
// what it should.
//
//   testing::expect_error([&] { ops::sum(x, {2}); }, "sum: axis 2 out of range for shape (2, 3)");
//   const std::string message = testing::error_message<InputError>([&] { load_recipe(path); });
#pragma once
#include <gtest/gtest.h>

#include <exception>
#include <optional>
#include <string>
#include <type_traits>

#include "framework/error.h"

namespace tf::testing {

namespace detail {

// The message of the E that f throws, or nothing after failing the test when f throws nothing or
// an exception that is not an E.
template <class E, class F>
std::optional<std::string> caught(F&& f) {
  const char* expected = std::is_same_v<E, InputError> ? "tf::InputError" : "tf::Error";
  try {
    f();
  } catch (const E& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "expected " << expected << ", got another exception: " << e.what();
    return std::nullopt;
  } catch (...) {
    ADD_FAILURE() << "expected " << expected << ", got something that is not a std::exception";
    return std::nullopt;
  }
  ADD_FAILURE() << "expected " << expected << ", nothing was thrown";
  return std::nullopt;
}

}  // namespace detail

// The message of the E (tf::Error or a subclass) that f throws. When f throws nothing, or an
// exception that is not an E, the test fails and the result is "".
template <class E = Error, class F>
std::string error_message(F&& f) {
  return detail::caught<E>(f).value_or("");
}

// Expects f to throw an E whose message contains fragment.
template <class E = Error, class F>
void expect_error(F&& f, const std::string& fragment) {
  if (const std::optional<std::string> message = detail::caught<E>(f)) {
    EXPECT_NE(message->find(fragment), std::string::npos) << "\"" << fragment << "\" is not in: " << *message;
  }
}

}  // namespace tf::testing
