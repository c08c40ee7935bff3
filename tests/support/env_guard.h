// EnvGuard: an environment variable set (or unset) for a scope.
#pragma once
#include <cstdlib>
#include <optional>
#include <string>

namespace tf::testing {

// Sets an environment variable for a scope (for this process and the programs it starts), and puts
// back what was there.
class EnvGuard {
 public:
  // value nullopt: unset for the scope.
  EnvGuard(const char* name, const std::optional<std::string>& value) : name_(name) {
    if (const char* old = std::getenv(name)) previous_ = old;
    value ? ::setenv(name, value->c_str(), 1) : ::unsetenv(name);
  }
  ~EnvGuard() { previous_ ? ::setenv(name_, previous_->c_str(), 1) : ::unsetenv(name_); }
  EnvGuard(const EnvGuard&) = delete;
  EnvGuard& operator=(const EnvGuard&) = delete;

 private:
  const char* name_;
  std::optional<std::string> previous_;
};

}  // namespace tf::testing
