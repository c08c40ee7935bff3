// The data root: one folder for everything tapeformer downloads or derives, the corpora that
// scripts/setup.sh installs (brown/, linux/) and the token shards that preparation writes (shards/).
// Everything in it can be made again, so it lives with the user's caches, not in the source tree
// (docs/data.md, "Where data lives").
//
// The first that is set wins: the recipe's data.root, the TAPEFORMER_DATA environment variable,
// $XDG_CACHE_HOME/tapeformer (the XDG base-directory spec's cache folder), ~/.cache/tapeformer.
// scripts/setup.sh follows the same rule.
//
//   std::filesystem::path root = tf::data::data_root("");  // ~/.cache/tapeformer
//   tf::data::data_root_origin("");                         // "the default data root"
#pragma once
#include <filesystem>
#include <string>

namespace tf::data {

std::filesystem::path data_root(const std::string& configured);
// How the root was chosen, for messages: "data.root", "TAPEFORMER_DATA", "the default (...)".
std::string data_root_origin(const std::string& configured);

}  // namespace tf::data
