#!/usr/bin/env bash
# Issue #54 (3): is a minimized script a reproduction a person can run as plain `python`?
# 1. minimize the long pasted GAN (tests/resources/scripts/minimize/gan_bf16_long.py) between DeepSpeed 0.16.5
#    (bad) and 0.16.4 (good) with today's code, on the CPU;
# 2. run it, and the minimized script committed on 2026-12-05 (before the environment's lines were kept), as
#    plain python in each release's cell: `env -i` with PATH, HOME and only what the result's plain-python line
#    names (DS_ACCELERATOR=cpu), no launcher variables. Prints one line per script and release, exit status and
#    the last line of its output.
# Usage (from the checkout, the harness installed): bash reports/cpu/2026-12-07-plain-python/check.sh OUT ENVS
set -uo pipefail
out=${1:?out folder}; envs=${2:?cells folder}
here=$(cd "$(dirname "$0")" && pwd)
script=tests/resources/scripts/minimize/gan_bf16_long.py
start=$(date +%s)
python -m reprobisect minimize "$script" --bad deepspeed==0.16.5 --good deepspeed==0.16.4 --lightning 2.6.6 \
  --backend cpu --jobs 2 --budget 12m --envs "$envs" --out "$out" > "$out.minimize.txt" 2>&1
status=$?; echo "minimize: exit $status in $(( $(date +%s) - start )) s"; [ "$status" = 0 ] || exit 1
new="$out/minimize/script-gan_bf16_long/minimized.py"
old=reports/cpu/2026-12-05-minimize/minimized.py
grep -h "plain python\|Kept:" "$out.minimize.txt" || true
for release in 0.16.5 0.16.4; do
  cell=$(ls -d "$envs"/*deepspeed-"$release"_lightning-2.6.6 | head -1)
  for which in old new; do
    file=$old; [ "$which" = new ] && file=$new
    tmp=$(mktemp -d)
    cp "$file" "$tmp/minimized.py"
    (cd "$tmp" && env -i PATH=/usr/bin:/bin HOME="$tmp" DS_ACCELERATOR=cpu timeout 300 "$cell/bin/python" minimized.py \
      > "$tmp/out.txt" 2>&1)
    status=$?
    echo "$which minimized.py on deepspeed $release: exit $status: $(grep -v '^\s*$' "$tmp/out.txt" | tail -1 | cut -c1-150)"
    cp "$tmp/out.txt" "$here/$which-$release.txt"
    rm -rf "$tmp"
  done
done
cp "$new" "$here/minimized.py"
cp "$out/minimize/script-gan_bf16_long/minimize.md" "$here/minimize.md"
