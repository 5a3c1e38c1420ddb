#!/usr/bin/env bash
# A fresh machine as issue #13 describes it: clean clone, new venv, empty HOME (so empty pip/uv caches),
# the README's commands typed as written. Usage: fresh.sh NAME "torch spec"
set -u
name=$1; torchspec=$2
root=/tmp/fresh-$name
rm -rf "$root"; mkdir -p "$root/home"
export HOME=$root/home
unset XDG_CACHE_HOME UV_CACHE_DIR PIP_CACHE_DIR REPROBISECT_ENVS REPROBISECT_BASE_PYTHON
cd "$root"
step() { local s; s=$(date +%s); echo "\$ $*"; "$@"; local rc=$?; echo "[exit $rc, $(( $(date +%s) - s )) s]"; return 0; }
echo "# $(date -u +%FT%TZ) fresh machine: HOME=$HOME, torch spec '$torchspec'"
step git clone -q /work/main repo
cd repo; git log --oneline -1
tmp_before=$(du -sk /tmp --exclude="$root" 2>/dev/null | cut -f1)
step python3 -m venv .venv
. .venv/bin/activate
step pip install -q nox uv $torchspec
python -c "import torch; print('torch', torch.__version__, 'cuda available:', torch.cuda.is_available())"
du -sh .venv
step nox -s repro_gan
step nox -s tests
echo "--- left outside the repository:"
ls -la /tmp | grep -v "fresh-\|transcripts" | tail -n +2 | head -30
du -sh "$HOME"/.cache/* 2>/dev/null
