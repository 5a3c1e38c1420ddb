"""Build DeepSpeed's just-in-time ops in a cell before any timed run: ``python build_ops.py NAME...``.

Run by the harness (run/op_prebuild.py) in the cell's interpreter with the environment the runs get (the op cache,
``DS_ACCELERATOR``, ``TORCH_CUDA_ARCH_LIST``, the compiler): each op is loaded through DeepSpeed's own builder,
so it lands in the shared op cache under the very key a run computes, and the runs only load it. Prints the op
cache's ``op`` events and one ``prebuild`` line per name; exits 1 when any op failed to build (the runs then meet
the same failure and the harness classifies it there, as an environment error). Standard library and the cell's
own packages only.
"""

import json
import os
import runpy
import sys

MARK = "@@repro "


def _say(**fields):
    print("\n" + MARK + json.dumps({"event": "prebuild", **fields}), flush=True)


def main():
    cache = os.environ.get("REPROBISECT_OP_CACHE")
    if cache:
        here = os.path.dirname(os.path.abspath(__file__))
        runpy.run_path(os.path.join(here, "op_cache.py"))["install"](cache)
    from deepspeed.ops.op_builder.all_ops import ALL_OPS

    failed = 0
    for name in sys.argv[1:]:
        builder = ALL_OPS.get(name)
        if builder is None or not builder.is_compatible(verbose=False):
            _say(name=name, status="not available here")
            continue
        try:
            builder.load(verbose=False)
        except Exception as exc:  # the runs will meet it too, and be classified by it
            failed += 1
            _say(name=name, status="failed", error=f"{type(exc).__name__}: {exc}"[:300])
            continue
        _say(name=name, status="ready")
    return 1 if failed else 0


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    # Every op is built or said by now. Some packages leave behind what an interpreter waits for at exit: importing
    # DeepSpeed 0.18.2 on torch 2.3.1 with Python 3.12 starts torch's inductor process pool, whose exit never ends
    # (corpus/ia-ds-dynamo-py312), and held this helper until its 30-minute timeout. Nothing is left to clean up.
    os._exit(code)
