#!/usr/bin/env bash
# Usage: deepspeed-clone.sh STATE DEST
# The DeepSpeed clone a night of main needs (`nightly --git DEST --no-fetch`), made fresh each night and never kept in
# the state artifact. A night bisects the first-parent commits between last night's main commit (STATE/state.json,
# main.commit) and tonight's, and builds each probe from its own checkout of DEST: every commit in that window
# needs its whole tree, offline. A --filter=blob:none clone is not enough (its checkouts would fetch the missing
# files commit by commit, and the harness refuses partial clones); a whole clone of DeepSpeed is mostly years of
# history the night never reads. So DEST is a shallow clone of the default branch, deepened 50 commits at a time
# until it holds last night's commit (a day of DeepSpeed's main is a handful of commits), and nothing older: the
# state artifact keeps only the commit's hash and its records. No state yet (the first night): depth 1.
# DEEPSPEED_GIT_URL overrides the repository (a fork, or a local one in tests).
set -euo pipefail
state=$1
dest=$2
url=${DEEPSPEED_GIT_URL:-https://github.com/deepspeedai/DeepSpeed.git}
last=""
if [ -f "$state/state.json" ]; then
  last=$(python3 -c 'import json, sys; print((json.load(open(sys.argv[1])).get("main") or {}).get("commit") or "")' \
    "$state/state.json")
fi
if [ -n "$last" ] && ! [[ "$last" =~ ^[0-9a-f]{40}$ ]]; then
  echo "::error::$state/state.json: main.commit is '${last:0:80}', not a full commit hash"
  exit 1
fi
git clone --quiet --depth 1 --no-tags -- "$url" "$dest"
if [ -n "$last" ]; then
  for _ in $(seq 40); do
    git -C "$dest" cat-file -e "$last^{commit}" 2>/dev/null && break
    [ "$(git -C "$dest" rev-parse --is-shallow-repository)" = true ] || break  # the whole history is here
    git -C "$dest" fetch --quiet --no-tags --deepen 50 origin
  done
  if ! git -C "$dest" cat-file -e "$last^{commit}" 2>/dev/null; then
    echo "::warning::last night's main ($last) is not within 2000 commits of tonight's (a force-push?): the whole" \
      "history is fetched, and the night will say what it can compare"
    if [ "$(git -C "$dest" rev-parse --is-shallow-repository)" = true ]; then
      git -C "$dest" fetch --quiet --no-tags --unshallow origin
    fi
  fi
fi
echo "DeepSpeed's $(git -C "$dest" rev-parse --abbrev-ref HEAD) at $(git -C "$dest" rev-parse HEAD)," \
  "$(git -C "$dest" rev-list --count HEAD) commits deep, into $dest"
