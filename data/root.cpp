// The data root; see root.h.
#include "data/root.h"

#include <pwd.h>
#include <unistd.h>

#include <cstdlib>

#include "framework/error.h"

namespace tf::data {

namespace {

std::string environment(const char* name) {
  const char* value = std::getenv(name);
  return value ? value : "";
}

// The spec ignores a relative XDG_CACHE_HOME ("all paths ... must be absolute").
std::filesystem::path cache_home() {
  const std::filesystem::path xdg = environment("XDG_CACHE_HOME");
  if (!xdg.empty() && xdg.is_absolute()) return xdg;
  std::string home = environment("HOME");
  if (home.empty())
    if (const passwd* user = getpwuid(getuid()); user && user->pw_dir) home = user->pw_dir;
  TF_CHECK_INPUT(!home.empty(), "the data root: HOME is not set and the user has no home folder; set "
                 "TAPEFORMER_DATA (or a recipe's data.root) to the folder for corpora and token shards");
  return std::filesystem::path(home) / ".cache";
}

}  // namespace

std::filesystem::path data_root(const std::string& configured) {
  if (!configured.empty()) return configured;
  if (std::string env = environment("TAPEFORMER_DATA"); !env.empty()) return env;
  return cache_home() / "tapeformer";
}

std::string data_root_origin(const std::string& configured) {
  if (!configured.empty()) return "data.root";
  if (!environment("TAPEFORMER_DATA").empty()) return "TAPEFORMER_DATA";
  return "the default data root";
}

}  // namespace tf::data
