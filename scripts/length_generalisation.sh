#!/usr/bin/env bash
# Length generalisation (Press et al. 2022's question, on Brown): a character GPT trained at T = 128
# with each position encoding, evaluated at T = 128, 256, 512 and 1024; RoPE also with position
# interpolation, NTK-aware scaling and YaRN applied at evaluation only. Prints a Markdown table of
# bits/char (docs/attention.md holds one run of it; scripts/plot_table.py draws it as an SVG).
#
#   scripts/length_generalisation.sh [--steps 600] [--batches 8] [--out runs/length]
#
# Needs the program built (scripts/build.sh --target tapeformer) and the Brown corpus (setup.sh --corpus).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
steps=600 batches=8 out="runs/length"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --steps) steps="$2"; shift 2 ;;
    --batches) batches="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    *) echo "usage: $0 [--steps N] [--batches N] [--out DIR]" >&2; exit 2 ;;
  esac
done
cd "$here"
tf=build/tools/tapeformer
lengths=(128 256 512 1024)

# Same recipe, budget and seed for every encoding; only model.position differs.
for position in learned sinusoidal rope alibi t5 none; do
  dir="$out/$position"
  [[ -f "$dir/ckpt_$(printf %08d "$steps").h5" ]] && continue
  mkdir -p "$out"
  "$tf" train recipes/gpt_brown_char.yaml --overwrite --set model.position="$position" \
    --set train.steps="$steps" --set schedule.warmup_steps=$((steps / 10)) --set eval.interval=0 \
    --set checkpoint.interval="$steps" --set sample.tokens=0 --set checkpoint.dir="$dir" > "$dir.log" 2>&1 ||
    { echo "training $position failed: see $dir.log" >&2; exit 1; }
done

# bits/char of the validation split at context T (batch 4, the first $batches batches).
bits() {
  local dir="$1" T="$2"; shift 2
  local json
  json=$("$tf" eval "$dir" --json --batches "$batches" --set model.max_seq_len="$T" --set data.seq_len="$T" \
           --set train.batch_size=4 "$@" 2>/dev/null) || { echo "-"; return; }
  sed -E 's/.*"bits_per_char": ([-0-9.e]+).*/\1/' <<< "$json" | xargs printf "%.3f"
}

echo "| position (trained at T = 128, $steps steps) | T = ${lengths[0]} | T = ${lengths[1]} | T = ${lengths[2]} | T = ${lengths[3]} |"
echo "|---|---|---|---|---|"
row() {
  local label="$1" dir="$2"; shift 2
  local line="| $label"
  for T in "${lengths[@]}"; do
    local s=$((T / 128))
    local extra=()
    [[ "$1" == "scaled" && $s -gt 1 ]] && extra=(--set model.rope_scaling="$2" --set model.rope_scaling_factor="$s")
    # YaRN's ramp alone reads the trained context (the other rules refuse the key as having no effect).
    [[ "$1" == "scaled" && $s -gt 1 && "$2" == "yarn" ]] && extra+=(--set model.rope_original_context=128)
    line+=" | $(bits "$dir" "$T" "${extra[@]}")"
  done
  echo "$line |"
}
for position in learned sinusoidal rope alibi t5 none; do row "$position" "$out/$position" plain; done
for rule in linear ntk yarn; do row "rope + $rule (s = T / 128 at eval)" "$out/rope" scaled "$rule"; done
