#!/usr/bin/env bash
# Usage: lightning-tests.sh DEST
# Lightning's own tests at the release the nightly slice pins (matrix.yaml: nightly.axes.lightning), for
# `nightly --pytest`: the night runs the DeepSpeed strategy tests of the very Lightning it installs. A shallow clone
# of that tag with only tests/ checked out (sparse): a few megabytes.
set -euo pipefail
dest=$1
version=$(python3 -c 'import sys, yaml; print(yaml.safe_load(open("matrix.yaml"))["nightly"]["axes"]["lightning"])')
if ! [[ "$version" =~ ^[0-9]+(\.[0-9]+)+$ ]]; then
  echo "::error::matrix.yaml: nightly.axes.lightning is '${version:0:80}', not a release whose tag holds its tests"
  exit 1
fi
url=${LIGHTNING_GIT_URL:-https://github.com/Lightning-AI/pytorch-lightning.git}
git clone --quiet --depth 1 --branch "$version" --no-checkout --filter=blob:none -- "$url" "$dest"
git -C "$dest" sparse-checkout set tests
git -C "$dest" checkout --quiet "$version"
echo "Lightning $version's tests/ in $dest"
