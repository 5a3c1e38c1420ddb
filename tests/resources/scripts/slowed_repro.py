"""Run another repro script unchanged, except that every DeepSpeed ``engine.step()`` sleeps first.

Used to make the report's baseline comparison face a real run that is slower on purpose:
``slowed_repro.py SCRIPT [--slow-ms MS] [script args...]``. Without ``--slow-ms`` it only adds the
wrapper's own start-up, which no step time sees. The exit status is the wrapped script's.
"""

import runpy
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]  # a relative SCRIPT is taken from the repository root


def _slow_initialize(initialize, seconds):
    def wrapped(*args, **kwargs):
        result = initialize(*args, **kwargs)
        engine = result[0]
        step = engine.step

        def slow_step(*a, **k):
            time.sleep(seconds)
            return step(*a, **k)

        engine.step = slow_step
        return result

    return wrapped


def main():
    script, args = str(ROOT / sys.argv[1]), sys.argv[2:]
    slow_ms = 0.0
    if "--slow-ms" in args:
        at = args.index("--slow-ms")
        slow_ms = float(args[at + 1])
        del args[at : at + 2]
    if slow_ms:
        import deepspeed

        deepspeed.initialize = _slow_initialize(deepspeed.initialize, slow_ms / 1000)
    sys.argv = [script, *args]
    runpy.run_path(script, run_name="__main__")


if __name__ == "__main__":
    main()
