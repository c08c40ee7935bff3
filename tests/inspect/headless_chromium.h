// Headless Chromium for tests: renders a local page to a PNG screenshot within a time limit and
// collects the console messages the page caused; measures how much of a screenshot is not background
// and how much is coloured (pictures).
// Debian's chromium package (scripts/setup.sh --test installs it); tests skip with kChromiumMissing
// where it is absent.
//
//   const auto chromium = tf::testing::find_chromium();
//   if (chromium.empty()) GTEST_SKIP() << tf::testing::kChromiumMissing;
//   const Rendering r = render_in_chromium(chromium, page, work_dir, {1000, 4000});
//   EXPECT_TRUE(r.finished) << r.why;  EXPECT_TRUE(r.console.empty());
//   EXPECT_GT(measure_screenshot(r.screenshot).ink_share, 0.05);
#pragma once
#include <cairo.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

namespace tf::testing {

inline constexpr const char* kChromiumMissing =
    "headless Chromium is not installed, so the page cannot be rendered: install it with "
    "`scripts/setup.sh --test` (or `apt-get install chromium`)";

// The `chromium` program on PATH, or an empty path when it is not installed.
inline std::filesystem::path find_chromium() {
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path ? path : "/usr/bin");
  for (std::string dir; std::getline(dirs, dir, ':');) {
    const std::filesystem::path candidate = std::filesystem::path(dir) / "chromium";
    if (!dir.empty() && ::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return {};
}

struct WindowSize {
  int width, height;  // pixels; the screenshot has this size
};

struct Rendering {
  bool finished = false;             // chromium exited 0 within the time limit and wrote the screenshot
  std::string why;                   // when not finished: the exit status or the timeout, and chromium's log
  std::vector<std::string> console;  // Note [console messages]: every message and uncaught exception
  std::filesystem::path screenshot;  // PNG of the window, work_dir/screenshot.png
};

// Note [console messages]
// With --enable-logging=stderr Chromium's browser process logs every console message of the page and
// every uncaught exception as a line `...:INFO:CONSOLE:<line>] "<text>", source: <url> (<line>)`
// (Chromium 156; older versions write `CONSOLE(<line>)]`). The line does not carry the level
// (console.log and console.error look alike), so every such line counts: the report has no script,
// so any message at all is Chromium objecting to the page. A failed load ("Failed to load resource")
// reaches only the DevTools protocol, not this log; report_test checks that the report refers to
// nothing outside itself. headless_chromium_test proves the log is read, on pages made to fail.
inline std::vector<std::string> console_lines(const std::string& log) {
  std::vector<std::string> out;
  std::stringstream lines(log);
  for (std::string line; std::getline(lines, line);)
    if (line.find(":CONSOLE") != std::string::npos) out.push_back(line);
  return out;
}

// Waits up to `limit` for `pid`, the leader of its own process group, and then ends the group: at
// once (stragglers, if any) when it exited, else SIGTERM (Chromium then takes its crash handlers, which
// sit in groups of their own, down with it), 5 s of grace, SIGKILL. The wait status, or none when the
// limit passed.
inline std::optional<int> wait_or_end_group(pid_t pid, std::chrono::seconds limit) {
  int status = 0;
  auto exited = [&] { return ::waitpid(pid, &status, WNOHANG) == pid; };
  const auto deadline = std::chrono::steady_clock::now() + limit;
  for (; std::chrono::steady_clock::now() < deadline; std::this_thread::sleep_for(std::chrono::milliseconds(50)))
    if (exited()) {
      ::kill(-pid, SIGKILL);
      return status;
    }
  ::kill(-pid, SIGTERM);
  bool gone = false;
  for (int i = 0; i < 100 && !(gone = exited()); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ::kill(-pid, SIGKILL);
  if (!gone) ::waitpid(pid, &status, 0);
  return std::nullopt;
}

// Renders `page` (a local file) in a window of `size` and screenshots it, with a profile, config
// and cache of its own under `work_dir` so that concurrent tests do not share state. Chromium leads
// its own process group, ended past `limit`: a hung browser fails the test instead of hanging ctest.
inline Rendering render_in_chromium(const std::filesystem::path& chromium, const std::filesystem::path& page,
                                    const std::filesystem::path& work_dir, WindowSize size,
                                    std::chrono::seconds limit = std::chrono::seconds(90)) {
  namespace fs = std::filesystem;
  fs::create_directories(work_dir);
  Rendering r;
  r.screenshot = work_dir / "screenshot.png";
  const fs::path log_file = work_dir / "chromium.log";
  // Root needs --no-sandbox; the background-networking flags keep Chromium off a closed network.
  std::vector<std::string> args = {chromium.string(),
                                   "--headless",
                                   "--no-sandbox",
                                   "--disable-gpu",
                                   "--hide-scrollbars",
                                   "--no-first-run",
                                   "--disable-background-networking",
                                   "--disable-component-update",
                                   "--disable-sync",
                                   "--user-data-dir=" + (work_dir / "profile").string(),
                                   "--enable-logging=stderr",
                                   "--v=0",
                                   "--window-size=" + std::to_string(size.width) + "," + std::to_string(size.height),
                                   "--screenshot=" + r.screenshot.string(),
                                   "file://" + fs::absolute(page).string()};
  // Crashpad and fontconfig write under $HOME/.config and .cache: keep them in work_dir too.
  std::vector<std::string> env = {"XDG_CONFIG_HOME=" + (work_dir / "config").string(),
                                  "XDG_CACHE_HOME=" + (work_dir / "cache").string()};
  for (char** e = environ; *e; ++e)
    if (const std::string_view var(*e); !var.starts_with("XDG_CONFIG_HOME=") && !var.starts_with("XDG_CACHE_HOME="))
      env.push_back(*e);
  std::vector<char*> argv, envp;
  for (auto& a : args) argv.push_back(a.data());
  for (auto& e : env) envp.push_back(e.data());
  argv.push_back(nullptr);
  envp.push_back(nullptr);

  const pid_t pid = ::fork();
  if (pid == 0) {
    // Only async-signal-safe calls between fork and exec.
    ::setpgid(0, 0);
    const int log = ::open(log_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(log, 1);
    ::dup2(log, 2);
    ::execve(argv[0], argv.data(), envp.data());
    ::_exit(127);
  }
  if (pid < 0) return Rendering{false, "fork failed", {}, r.screenshot};
  ::setpgid(pid, pid);  // also here, so that the group exists before the parent may signal it

  const std::optional<int> status = wait_or_end_group(pid, limit);
  if (!status)
    r.why = "chromium did not finish within " + std::to_string(limit.count()) + " s and was stopped";
  else if (!WIFEXITED(*status) || WEXITSTATUS(*status) != 0)
    r.why = "chromium ended with wait status " + std::to_string(*status);
  else if (!fs::exists(r.screenshot))
    r.why = "chromium exited 0 but wrote no screenshot";
  else
    r.finished = true;
  std::ifstream in(log_file);
  const std::string log{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  r.console = console_lines(log);
  if (!r.finished) r.why += "; its log:\n" + log;
  return r;
}

struct Screenshot {
  int width = 0, height = 0;
  // Share of pixels not of the most common colour (the background): 0 when blank.
  double ink_share = 0;
  // Share of coloured pixels (channels more than 32 apart): the pictures, not the page's greys and text.
  double tinted_share = 0;
};

// Decodes a PNG (cairo's reader, libpng underneath) and measures it; a picture that does not decode
// measures 0 x 0.
inline Screenshot measure_screenshot(const std::filesystem::path& png) {
  Screenshot s;
  cairo_surface_t* image = cairo_image_surface_create_from_png(png.c_str());
  if (cairo_surface_status(image) == CAIRO_STATUS_SUCCESS) {
    s.width = cairo_image_surface_get_width(image);
    s.height = cairo_image_surface_get_height(image);
    const unsigned char* data = cairo_image_surface_get_data(image);
    const int stride = cairo_image_surface_get_stride(image);
    std::unordered_map<uint32_t, size_t> count;  // colour (RGB) -> pixels
    size_t tinted = 0;
    for (int y = 0; y < s.height; ++y)
      for (int x = 0; x < s.width; ++x) {
        const uint32_t rgb = reinterpret_cast<const uint32_t*>(data + y * stride)[x] & 0xffffff;
        ++count[rgb];
        const int r = rgb >> 16, g = (rgb >> 8) & 0xff, b = rgb & 0xff;
        tinted += std::max({r, g, b}) - std::min({r, g, b}) > 32;
      }
    size_t background = 0;
    for (const auto& [colour, n] : count) background = std::max(background, n);
    const double pixels = static_cast<double>(s.width) * s.height;
    s.ink_share = pixels > 0 ? 1.0 - background / pixels : 0.0;
    s.tinted_share = pixels > 0 ? tinted / pixels : 0.0;
  }
  cairo_surface_destroy(image);
  return s;
}

}  // namespace tf::testing
