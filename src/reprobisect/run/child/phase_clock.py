"""Where a run's own time goes, seen from inside its interpreter (``REPROBISECT_PROFILE=1``, ``--profile``).

A GPU run of a script that trains for a second took 18-34 s; the harness's side of that (sandbox, record) is
measured by the harness, this side by the run: the time spent importing (every outermost ``import`` of the
main thread, summed), the time the first ``torch.cuda`` initialisation took (the CUDA context), when the script
started and ended, and how long the other exit handlers and the bootstrap's own exit report took. It prints one
``@@repro {"event": "profile", ...}`` line after the exit report. The figures are the run's word: the harness
uses them to say where time went, never to decide an outcome.

Installed by the bootstrap before anything else is imported; standard library only. Wrapping ``__import__``
costs about a microsecond per import statement, which is why it is off unless asked for.
"""

import builtins
import json
import sys
import threading
import time

MARK = "@@repro "


class Profile:
    """Clocks of one run: wall-clock instants (``time.time``, the harness's clock too) and summed seconds."""

    def __init__(self):
        self.started = time.time()
        self.script_started = None
        self.script_ended = None
        self.report_started = None
        self.imports = 0.0
        self.cuda_init = 0.0
        self._depth = 0
        self._cuda_in_import = 0.0
        self._main = threading.main_thread()
        self._cuda_wrapped = False

    def install(self):
        """Time the main thread's outermost imports, and the CUDA initialisation once torch is imported."""
        original = builtins.__import__

        def timed_import(name, globals=None, locals=None, fromlist=(), level=0):
            if self._depth or threading.current_thread() is not self._main:
                return original(name, globals, locals, fromlist, level)
            self._depth += 1
            start = time.perf_counter()
            try:
                return original(name, globals, locals, fromlist, level)
            finally:
                self._depth -= 1
                self.imports += time.perf_counter() - start
                self._wrap_cuda()

        builtins.__import__ = timed_import

    def _wrap_cuda(self):
        """Time ``torch.cuda._lazy_init``, which every first CUDA use goes through (the C++ side calls it by
        name on the module, so replacing the attribute catches those too)."""
        if self._cuda_wrapped:
            return
        cuda = sys.modules.get("torch.cuda")
        lazy_init = getattr(cuda, "_lazy_init", None)
        if lazy_init is None:
            return
        self._cuda_wrapped = True

        def timed_lazy_init():
            if cuda.is_initialized():
                return lazy_init()
            start = time.perf_counter()
            try:
                return lazy_init()
            finally:
                spent = time.perf_counter() - start
                self.cuda_init += spent
                if self._depth:  # inside an import: counted there too, taken out of the imports below
                    self._cuda_in_import += spent

        cuda._lazy_init = timed_lazy_init

    def script_start(self):
        self.script_started = time.time()

    def script_end(self):
        self.script_ended = time.time()

    def report_start(self):
        self.report_started = time.time()

    def print_event(self):
        """The profile line, after the exit report (whose own time it includes)."""
        now = time.time()
        ended = self.script_ended or now
        report_started = self.report_started or now
        payload = {
            "event": "profile",
            "started": self.started,
            "script_started": self.script_started or self.started,
            "script_ended": ended,
            "imports": round(max(0.0, self.imports - self._cuda_in_import), 4),
            "cuda_init": round(self.cuda_init, 4),
            "atexit": round(max(0.0, report_started - ended), 4),
            "report": round(max(0.0, now - report_started), 4),
            "reported": now,
        }
        print("\n" + MARK + json.dumps(payload), flush=True)
