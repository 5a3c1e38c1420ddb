#!/usr/bin/env bash
# Issue #41: is the GPU image's import cost its missing byte code? One short call, no harness code:
# what the image's Python says about byte caches, whether its packages hold .pyc files, and `import torch` /
# `import torch, deepspeed` (0.16.5, a venv over the image's packages) bare, then with PYTHONPYCACHEPREFIX
# (the first fills it, the next read it). Run as: OUT=$OUT bash reports/gpu/2026-12-06-bytecode/probe.sh
set -u
out=${OUT:-/tmp/bc-probe}; mkdir -p "$out"; log=$out/probe.log
exec > >(tee "$log") 2>&1
python3 tools/wheelpack.py unpack .whlpack/wheels.tar.xz .whl >/dev/null
nvidia-smi -L; nproc; which python3; python3 -VV
env | grep -E '^(PYTHON|PIP_|UV_)' | sort
python3 - <<'PY'
import importlib.util, os, site, sys, sysconfig
print("dont_write_bytecode", sys.flags.dont_write_bytecode, "pycache_prefix", sys.pycache_prefix)
for name in ("torch", "transformers", "sklearn", "scipy", "lightning", "triton", "sympy", "json"):
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.origin:
        print(name, "absent"); continue
    root = os.path.dirname(spec.origin)
    py = pyc = 0
    for folder, _dirs, files in os.walk(root):
        for f in files:
            if f.endswith(".py"):
                py += 1
                pyc += os.path.exists(importlib.util.cache_from_source(os.path.join(folder, f)))
    print(f"{name}: {root} writable={os.access(root, os.W_OK)} .py={py} with .pyc={pyc}")
PY
python3 -m venv --system-site-packages /tmp/dsv && python3 -c "import site; print(*site.getsitepackages(), sep=chr(10))" > /tmp/dsv/lib/python3.12/site-packages/image.pth && /tmp/dsv/bin/python -m pip install -q --no-deps --no-index --find-links .whl deepspeed==0.16.5 hjson 2>&1 | tail -2
/tmp/dsv/bin/python -c "import deepspeed; print(deepspeed.__version__)" 2>&1 | tail -3
t() { local label=$1; shift; local s=$(date +%s.%N); "$@" >/dev/null 2>&1; echo "$label $(python3 -c "print(round($(date +%s.%N)-$s,2))") s"; }
for i in 1 2 3; do t "bare import torch #$i" python3 -c "import torch"; done
for i in 1 2; do t "bare import torch,deepspeed #$i" /tmp/dsv/bin/python -c "import torch, deepspeed"; done
export PYTHONPYCACHEPREFIX=/tmp/pyc-prefix
PYTHONDONTWRITEBYTECODE= t "prefix fill import torch" python3 -c "import torch"
PYTHONDONTWRITEBYTECODE= t "prefix fill import torch,deepspeed" /tmp/dsv/bin/python -c "import torch, deepspeed"
for i in 1 2 3; do t "prefix import torch #$i" python3 -c "import torch"; done
for i in 1 2 3; do t "prefix import torch,deepspeed #$i" /tmp/dsv/bin/python -c "import torch, deepspeed"; done
du -sh /tmp/pyc-prefix; find /tmp/pyc-prefix -name '*.pyc' | wc -l
t "prefix, 8 at once (last)" bash -c 'for i in 1 2 3 4 5 6 7 8; do /tmp/dsv/bin/python -c "import torch, deepspeed" & done; wait'
unset PYTHONPYCACHEPREFIX
t "bare, 8 at once (last)" bash -c 'for i in 1 2 3 4 5 6 7 8; do /tmp/dsv/bin/python -c "import torch, deepspeed" & done; wait'
/tmp/dsv/bin/python -X importtime -c "import torch, deepspeed" 2> "$out/importtime-bare.txt"
PYTHONPYCACHEPREFIX=/tmp/pyc-prefix /tmp/dsv/bin/python -X importtime -c "import torch, deepspeed" 2> "$out/importtime-prefix.txt"
gzip -9 "$out"/importtime-*.txt
