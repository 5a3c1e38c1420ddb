#!/usr/bin/env bash
# Usage: nightly-issue.sh REPORTS
# REPORTS holds this run's nightly-report-<backend>/ folders (nightly.md, nightly.json). For every backend
# whose nightly.json says "regressed": true, its nightly.md goes into one body, and ONE open issue labelled
# nightly-regression gets it: a comment when such an issue is open, else a new issue titled by the first
# regressed backend's nightly.json "title". Needs gh (GH_TOKEN, GH_REPO) and jq.
set -euo pipefail
reports=$1
label=nightly-regression
body=$(mktemp)
title=""
for json in "$reports"/nightly-report-*/nightly.json; do
  [ -f "$json" ] || continue
  [ "$(jq -r '.regressed' "$json")" = true ] || continue
  dir=$(dirname "$json")
  [ -n "$title" ] || title=$(jq -r '.title' "$json")
  { echo "## ${dir##*/nightly-report-}"; echo; cat "$dir/nightly.md"; echo; } >>"$body"
done
if [ -z "$title" ]; then
  echo "::error::a nightly job exited 1 (regression) but no nightly.json under $reports says \"regressed\": true"
  exit 1
fi
# GitHub refuses bodies over 65536 characters; the whole report stays in the run's artifacts.
python3 - "$body" <<'PY'
import sys
path = sys.argv[1]
with open(path, encoding="utf-8", errors="replace") as f:
    text = f.read()
if len(text) > 60000:
    with open(path, "w", encoding="utf-8") as f:
        f.write(text[:60000] + "\n\n(cut here: the whole report is in the run's nightly-report-* artifacts)\n")
PY
echo "Run: ${GITHUB_SERVER_URL:-}/${GITHUB_REPOSITORY:-}/actions/runs/${GITHUB_RUN_ID:-}" >>"$body"
gh label create "$label" --color B60205 --description "A nightly run found a regression" --force
issue=$(gh issue list --label "$label" --state open --limit 1 --json number --jq '.[0].number // empty')
if [ -n "$issue" ]; then
  gh issue comment "$issue" --body-file "$body"
else
  gh issue create --title "$title" --label "$label" --body-file "$body"
fi
