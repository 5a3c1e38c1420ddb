#!/usr/bin/env bash
# Issue #41: a level's guesses (5de8ba77) beside the code before them (007fa7cc), on this machine's CPU, --jobs 4:
# `minimize` of the 53-line GAN of reports/gpu/2026-12-05-run-cost/call-4/minimized.py (its levels are most of the
# work), cells built once beforehand and shared, verdicts apart. Run from the repository root:
#   OLD=/tmp/old-src bash reports/cpu/2026-12-06-level-guesses/compare.sh   (OLD: `git archive 007fa7cc src`)
set -u
out=${OUT:-/tmp/lg}
mkdir -p "$out"
script=reports/gpu/2026-12-05-run-cost/call-4/minimized.py
common=(--backend cpu --lightning 2.6.6 --bad deepspeed==0.16.5 --good deepspeed==0.16.4 --envs "$out/cells")
PYTHONPATH=$OLD/src python3 -m reprobisect minimize "$script" "${common[@]}" --out "$out/warm" --jobs 4 \
    --budget 1runs >"$out/warm.log" 2>&1
for who in old new; do
  src=$PWD/src; [ "$who" = old ] && src=$OLD/src
  s=$(date +%s)
  PYTHONPATH=$src python3 -m reprobisect minimize "$script" "${common[@]}" --out "$out/$who" --jobs 4 \
      --budget "${BUDGET:-150}" >"$out/minimize-$who.log" 2>&1
  echo "minimize ($who): exit $?, $(( $(date +%s) - s )) s"
  python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(sys.argv[2], {k: d.get(k) for k in ('runs','seconds','runs_per_minute','stopped','original','minimized','candidates','refused_without_a_run')})" \
      "$out/$who/minimize/script-minimized/minimize.json" "$who"
done
