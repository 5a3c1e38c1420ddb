#!/usr/bin/env bash
# Issue #36 on a GPU, call 1: the two GPU entries' truth by hand, outside the harness (tools/corpus_truth.py: a
# plain venv per release or commit over the image's torch, `python issue.py`), eight at a time on one GPU.
#   ds-fp16-fused-never-steps           every release it lists; #7515 and #7645 at their commits and parents
#   ds-bf16-zero0-fused-frozen-memory   every release it lists; #7515 and #8029 at theirs, and 819af0e59
# Offline: DeepSpeed from .whl (carried packed as .whlpack), commits from .gpu/dsgpu, a replay of DeepSpeed's
# first-parent commits v0.17.5..v0.17.6, v0.18.1..v0.18.2 and v0.19.0..819af0e59 made by
# reports/gpu/2026-12-04-culprits/slim_history.py (its hashes are not upstream's; the map is in README.md).
# Carry [".whlpack", ".gpu/dsgpu"]; run as: OUT=$OUT bash reports/gpu/2026-12-06-corpus-gpu/truth.sh
set -u
out=${OUT:-/tmp/truth}
mkdir -p "$out"
if [ -f .whlpack/wheels.tar.xz ] && [ ! -f .whl/.unpacked ]; then
  python3 tools/wheelpack.py unpack .whlpack/wheels.tar.xz .whl >/dev/null && touch .whl/.unpacked
fi
export CORPUS_TRUTH_INSTALLER=pip TORCH_CUDA_ARCH_LIST=9.0 PYTHONUNBUFFERED=1 PIP_NO_INDEX=1 PIP_FIND_LINKS=$PWD/.whl PIP_NO_CACHE_DIR=1
{ nvidia-smi -L; nproc; python3 -c 'import torch; print("torch", torch.__version__)'; } >"$out/gpu.txt" 2>&1
never=corpus/ds-fp16-fused-never-steps
frozen=corpus/ds-bf16-zero0-fused-frozen-memory
clone=$PWD/.gpu/dsgpu
sha() { git -C "$clone" log --format=%h --grep "$1" -n 1; }
{
  for r in 0.17.5 0.17.6 0.18.0 0.18.1 0.18.2; do echo "$never --releases $r"; done
  for r in 0.17.5 0.17.6 0.18.0 0.18.1 0.18.2 0.18.3 0.18.4 0.18.5 0.18.6 0.18.7 0.18.8 0.18.9 0.19.0 0.19.1; do
    echo "$frozen --releases $r"
  done
  for c in "$(sha '(#7515)')" "$(sha '(#7509)')" "$(sha '(#7645)')" "$(sha '(#7656)')"; do
    echo "$never --git $clone --commit $c"
  done
  for c in "$(sha '(#7515)')" "$(sha '(#7509)')" "$(sha '(#8029)')" "$(sha '(#8024)')" "$(sha '(#8033)')"; do
    echo "$frozen --git $clone --commit $c"
  done
} >"$out/jobs.txt"
s=$(date +%s)
# shellcheck disable=SC2086
timeout -k 10 "${TRUTH_TIMEOUT:-520}" xargs -P "${PARALLEL:-8}" -L 1 sh -c 'python3 tools/corpus_truth.py $0 "$@" --work /tmp/tw-$(basename $0) 2>&1' \
  <"$out/jobs.txt" | tee "$out/truth.log"
echo "all: $(( $(date +%s) - s )) s" | tee -a "$out/truth.log"
for e in "$never" "$frozen"; do
  n=$(basename "$e"); cp "$e/truth.toml" "$out/$n.truth.toml"; cp "$e/truth-logs.tar.xz" "$out/$n.truth-logs.tar.xz"
done
true
