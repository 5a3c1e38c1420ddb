#!/usr/bin/env bash
# Usage: restore-nightly-state.sh ARTIFACT DIR
# Puts the artifact ARTIFACT (e.g. nightly-state-cpu) of the most recent earlier run of nightly.yml on this
# branch that still has one into DIR, with the GitHub CLI (GH_TOKEN and GH_REPO set by the step). No such
# run (the first night, or every state expired) leaves DIR empty and is not an error; a failing API call is.
set -euo pipefail
name=$1
dir=$2
mkdir -p "$dir"
runs=$(gh run list --workflow nightly.yml --branch "${GITHUB_REF_NAME:?}" --limit 30 \
  --json databaseId --jq '.[].databaseId')
for run in $runs; do
  [ "$run" = "${GITHUB_RUN_ID:-}" ] && continue
  # Asking which runs have the artifact (rather than trying each download) keeps a failed download a failure.
  found=$(gh api "repos/{owner}/{repo}/actions/runs/$run/artifacts?name=$name" \
    --jq '[.artifacts[] | select(.expired | not)] | length')
  if [ "$found" -gt 0 ]; then
    gh run download "$run" -n "$name" -D "$dir"
    echo "Restored $name from run $run into $dir"
    exit 0
  fi
done
echo "::notice::No earlier run has $name: the nightly starts from an empty state (the first night)"
