#!/bin/bash
# The whole CPU corpus, one run of the code at /work/corpus-run's HEAD, from empty caches, lines stamped with their time.
cd /work/corpus-run
start=$(date +%s)
PYTHONPATH=src /work/main/.nox/tests/bin/python -m reprobisect corpus --corpus corpus \
  --git deepspeed=/work/ds-clone --git lightning=/work/pl-clone \
  --base-python /work/ct-base/bin/python --jobs 2 --out /work/corpus-whole/out 2>&1 \
  | while IFS= read -r line; do printf '%s %s\n' "$(date -u +%H:%M:%S)" "$line"; done
echo "rc=${PIPESTATUS[0]} wall=$(( $(date +%s) - start ))"
