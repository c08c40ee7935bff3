#!/usr/bin/env bash
# Regenerates the checkpoint fuzz seeds: tests/fuzz/make_checkpoint_seeds.sh [TAPEFORMER_BINARY]
# Trains two tiny runs (a GPT with AdamW, a BERT with SGD momentum) for 2 steps on a short text, keeps
# their last checkpoints (with the integrity header), and derives truncated variants at fixed
# offsets. Bit-flipped whole files come from the fuzzer itself: the findings kept in the corpus
# (hdf5_*.h5, checkpoints from before the integrity header; finding_*.h5), kept whole, so the corpus
# is about 400 KB.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
bin="${1:-$here/build/tools/tapeformer}"
out="$here/tests/fuzz/corpus/checkpoint"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# Five distinct characters: a small vocabulary keeps the embeddings (and the file) small.
for i in $(seq 40); do printf 'abc ab ca. '; done >"$work/text.txt"
small=(--set model.d_model=8 --set model.n_heads=2 --set model.n_layers=1 --set model.max_seq_len=8
       --set data.seq_len=8 --set data.corpus=files --set "data.train_path=$work/text.txt"
       --set "data.cache_dir=$work/cache" --set train.steps=2 --set train.batch_size=2
       --set schedule.warmup_steps=0 --set eval.interval=0 --set log.interval=1 --set checkpoint.interval=0)
OMP_NUM_THREADS=1 "$bin" train "$here/recipes/tiny_gpt.yaml" "${small[@]}" --set sample.tokens=0 \
  --set "checkpoint.dir=$work/gpt" >/dev/null
OMP_NUM_THREADS=1 "$bin" train "$here/recipes/tiny_bert.yaml" "${small[@]}" --set optim.name=sgd \
  --set optim.weight_decay=0 --set "checkpoint.dir=$work/bert" >/dev/null

cp "$work"/gpt/ckpt_*.h5 "$out/gpt_valid.h5"
cp "$work"/bert/ckpt_*.h5 "$out/bert_valid.h5"
python3 - "$out" <<'PY'
import sys, pathlib
out = pathlib.Path(sys.argv[1])
gpt = (out / "gpt_valid.h5").read_bytes()
# Truncations: inside the superblock, inside the root group's metadata, and past the first datasets.
for n in (40, 800, 4096):
    (out / f"gpt_truncated_{n}.h5").write_bytes(gpt[:n])
(out / "not_hdf5.h5").write_bytes(b"tapeformer checkpoint? no: plain text\n")
PY
du -b "$out" | tail -1
