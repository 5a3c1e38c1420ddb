"""Run a repro script in a cell's interpreter and report what the run really imported.

This file is executed by path inside the cell's venv, which does not have the harness installed, so
it imports nothing but the standard library. It:

1. optionally installs a shim first (``REPROBISECT_SHIM`` = path of a file with ``install()``), and the
   cache of just-in-time ops (``REPROBISECT_OP_CACHE`` = its folder; see ``op_cache.py``);
2. runs the script as ``__main__`` with the script's own ``sys.argv`` and ``sys.path[0]``;
3. at exit (also after an uncaught exception) prints one ``@@repro {"event": "exit", ...}`` line with
   the versions of every distribution the run imported, the Python, the platform, the GPU (when CUDA
   was used) and the peak memory: all of it the run's own word, which a script can forge, so the harness keeps
   the memory figures as claims and measures its own (``run/measured.py``);
4. with ``REPROBISECT_INSTRUMENTS`` (a folder), appends it to ``sys.path``: ``--instruments`` lets a pasted
   script ``import instruments``, the repros' shared module;
5. with ``REPROBISECT_TRACE_LINES=1``, records which lines of the script ran and prints them at exit as one
   ``@@repro {"event": "lines", "ranges": [[first, last], ...]}`` line (``reprobisect minimize`` cuts what never
   ran before the failure). Only the script's own frames are traced: other code pays one call per function call;
6. with ``REPROBISECT_PROFILE=1``, times the run's imports, CUDA initialisation, script and exit report and prints
   them at exit as one ``@@repro {"event": "profile", ...}`` line (``phase_clock.py`` beside this file; ``--profile``).

The repro's exit status and traceback are left untouched: the harness classifies them.
"""

import atexit
import json
import os
import platform
import resource
import runpy
import signal
import sys
import threading

MARK = "@@repro "
_STDLIB = set(getattr(sys, "stdlib_module_names", ())) | {"__main__", "_distutils_hack"}


def _imported_versions():
    import importlib.metadata as metadata

    tops = {name.partition(".")[0] for name in list(sys.modules)}
    tops = {name for name in tops if name and not name.startswith("_") and name not in _STDLIB}
    mapping = metadata.packages_distributions()
    versions = {}
    for top in sorted(tops):
        for dist in mapping.get(top, ()):
            try:
                versions[dist.lower()] = metadata.version(dist)
            except metadata.PackageNotFoundError:
                continue
    torch = sys.modules.get("torch")
    if torch is not None and getattr(torch, "__version__", None):
        versions["torch"] = str(torch.__version__)  # keeps the local tag, e.g. 2.13.0+cpu
    return versions


def _gpu():
    torch = sys.modules.get("torch")
    if torch is None or not hasattr(torch, "cuda") or not torch.cuda.is_initialized():
        return None
    index = torch.cuda.current_device()
    info = {
        "name": torch.cuda.get_device_name(index),
        "count": torch.cuda.device_count(),
        "cuda": torch.version.cuda,
        "capability": ".".join(map(str, torch.cuda.get_device_capability(index))),
        "peak_memory_bytes": int(torch.cuda.max_memory_allocated(index)),
    }
    info["driver"] = _driver_version()
    return info


def _driver_version():
    """The NVIDIA driver's version, from the kernel module's own line (a file read instead of an nvidia-smi started
    at every GPU run's exit, whose report took 1.1 s there against 0.2-0.5 s on the CPU), else from nvidia-smi;
    None when neither tells."""
    import re

    try:
        with open("/proc/driver/nvidia/version", encoding="utf-8", errors="replace") as handle:
            found = re.search(r"Kernel Module.*?\s(\d+\.\d+(?:\.\d+)?)\s", handle.readline())
        if found:
            return found.group(1)
    except OSError:
        pass
    try:
        import subprocess

        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
        return out.stdout.strip().splitlines()[0] if out.stdout.strip() else None
    except (OSError, subprocess.SubprocessError):
        return None


def _trace_lines(script):
    """Start recording the script's executed lines; the set fills as the script runs."""
    ran = set()

    def in_script(frame, event, arg):
        if event == "line":
            ran.add(frame.f_lineno)
        return in_script

    def on_call(frame, event, arg):
        return in_script if frame.f_code.co_filename == script else None

    sys.settrace(on_call)
    threading.settrace(on_call)
    return ran


def _ranges(numbers):
    ranges = []
    for number in sorted(numbers):
        if ranges and number == ranges[-1][1] + 1:
            ranges[-1][1] = number
        else:
            ranges.append([number, number])
    return ranges


def _report_lines(ran):
    sys.settrace(None)
    threading.settrace(None)
    sys.stdout.flush()
    print("\n" + MARK + json.dumps({"event": "lines", "ranges": _ranges(ran)}), flush=True)


def _report(profile=None):
    if profile is not None:
        profile.report_start()
    payload = {"event": "exit", "python": platform.python_version(), "platform": platform.platform()}
    payload["peak_rss_bytes"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    try:
        payload["versions"] = _imported_versions()
    except Exception as exc:  # a report must never turn a PASS into a failure
        payload["versions_error"] = repr(exc)
    try:
        payload["gpu"] = _gpu()
    except Exception as exc:
        payload["gpu_error"] = repr(exc)
    sys.stdout.flush()
    print("\n" + MARK + json.dumps(payload), flush=True)  # a line of its own, whatever the script left open
    if profile is not None:
        profile.print_event()


def _child_module(name):
    """A namespace of one of the files beside this one (this folder is no package of the cell's)."""
    return runpy.run_path(os.path.join(os.path.dirname(os.path.abspath(__file__)), name))


def _profile():
    """The run's profile (``REPROBISECT_PROFILE=1``), installed before anything else is imported; else None."""
    if os.environ.get("REPROBISECT_PROFILE") != "1":
        return None
    profile = _child_module("phase_clock.py")["Profile"]()
    profile.install()
    return profile


def main():
    if len(sys.argv) < 2:
        print("usage: bootstrap.py SCRIPT [ARGS...]", file=sys.stderr)
        return 2
    script = os.path.abspath(sys.argv[1])
    # A harness started in the background by a shell inherits SIGINT ignored, and so would this child:
    # restore Python's handler, so the timeout's SIGINT shows where the repro was stuck.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    profile = _profile()
    atexit.register(_report, profile)
    shim = os.environ.get("REPROBISECT_SHIM")
    if shim:
        runpy.run_path(shim)["install"]()
    op_cache = os.environ.get("REPROBISECT_OP_CACHE")
    if op_cache:  # just-in-time ops from the cache every cell shares (op_cache.py beside this file)
        _child_module("op_cache.py")["install"](op_cache)
    sys.argv = [script, *sys.argv[2:]]
    sys.path[0] = os.path.dirname(script)
    instruments = os.environ.get("REPROBISECT_INSTRUMENTS")
    if instruments:  # --instruments: `import instruments` finds the repros' shared module, after the script's own
        sys.path.append(instruments)
    if os.environ.get("REPROBISECT_TRACE_LINES") == "1":
        atexit.register(_report_lines, _trace_lines(script))  # runs before _report: atexit is last in, first out
    if profile is not None:
        profile.script_start()
    try:
        runpy.run_path(script, run_name="__main__")
    finally:
        if profile is not None:
            profile.script_end()
    return 0


if __name__ == "__main__":
    sys.exit(main())
