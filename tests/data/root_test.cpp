// The data root (data/root.h): the recipe's data.root, else TAPEFORMER_DATA, else the XDG cache
// folder, else ~/.cache; and a run finds an installed corpus under it from any folder.
#include "data/root.h"

#include <gtest/gtest.h>

#include "framework/error.h"
#include "support/env_guard.h"
#include "train/recipe.h"

namespace tf::data {
namespace {

using tf::testing::EnvGuard;

TEST(DataRoot, TheRecipeWinsThenTheEnvironmentThenXdgThenHome) {
  const EnvGuard home("HOME", "/home/someone");
  {
    const EnvGuard xdg("XDG_CACHE_HOME", std::nullopt);
    const EnvGuard env("TAPEFORMER_DATA", std::nullopt);
    EXPECT_EQ(data_root(""), "/home/someone/.cache/tapeformer");
    EXPECT_EQ(data_root_origin(""), "the default data root");
  }
  {
    const EnvGuard xdg("XDG_CACHE_HOME", "/var/cache/me");
    const EnvGuard env("TAPEFORMER_DATA", std::nullopt);
    EXPECT_EQ(data_root(""), "/var/cache/me/tapeformer");
  }
  {
    // The base-directory spec: a relative XDG_CACHE_HOME is ignored.
    const EnvGuard xdg("XDG_CACHE_HOME", "relative/cache");
    const EnvGuard env("TAPEFORMER_DATA", std::nullopt);
    EXPECT_EQ(data_root(""), "/home/someone/.cache/tapeformer");
  }
  {
    const EnvGuard xdg("XDG_CACHE_HOME", "/var/cache/me");
    const EnvGuard env("TAPEFORMER_DATA", "/scratch/corpora");
    EXPECT_EQ(data_root(""), "/scratch/corpora");
    EXPECT_EQ(data_root_origin(""), "TAPEFORMER_DATA");
    EXPECT_EQ(data_root("/mnt/data"), "/mnt/data");
    EXPECT_EQ(data_root_origin("/mnt/data"), "data.root");
  }
}

TEST(DataRoot, TheRecipesFoldersDefaultUnderItAndAnExplicitFolderWins) {
  const EnvGuard env("TAPEFORMER_DATA", "/scratch/corpora");
  train::DataConfig d;
  EXPECT_EQ(d.brown_folder(), "/scratch/corpora/brown");
  EXPECT_EQ(d.linux_folder(), "/scratch/corpora/linux");
  EXPECT_EQ(d.cache_folder(), "/scratch/corpora/shards");
  d.root = "here";
  EXPECT_EQ(d.cache_folder(), "here/shards");
  d.cache_dir = "/tmp/shards";
  d.brown_dir = "/opt/brown";
  EXPECT_EQ(d.cache_folder(), "/tmp/shards");
  EXPECT_EQ(d.brown_folder(), "/opt/brown");
}

TEST(DataRoot, WithoutHomeTheUsersHomeFolderComesFromThePasswordDatabase) {
  const EnvGuard env("TAPEFORMER_DATA", std::nullopt);
  const EnvGuard xdg("XDG_CACHE_HOME", std::nullopt);
  const EnvGuard home("HOME", std::nullopt);
  // Without HOME the user's home folder comes from the password database; only when that is empty
  // too is it an error (not the case for any user this test runs as).
  const std::filesystem::path root = data_root("");
  EXPECT_EQ(root.filename(), "tapeformer");
  EXPECT_EQ(root.parent_path().filename(), ".cache");
}

}  // namespace
}  // namespace tf::data
