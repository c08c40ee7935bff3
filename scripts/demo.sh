#!/usr/bin/env bash
# The main job: installs what is missing, builds, and runs tapeformer's demonstration.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$here/scripts/setup.sh"
"$here/scripts/build.sh"
"$here/build/tools/tapeformer" gradcheck --ops
