"""The one way the harness runs a short tool (uv, git, pip, nvidia-smi, a probe in a cell's python): argv
only, a timeout always, text output captured, and on failure one error of the caller's kind that names what
was being done, the command, the exit status or the timeout, and the tail of what the tool printed.

Each tool runs in a session of its own, so that a timeout or a stop kills everything it started (uv's build
backends, a compiler), and waits in short slices: a Ctrl-C, or a stop of ``util.stop.stoppable_children`` while
it waits in a worker thread (a cell build of ``--jobs`` > 1), kills it at once instead of waiting for its end.

Repro runs do not come here: ``run.child_process`` owns those (process group, log file, sandbox, live tail)."""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from reprobisect.errors import HarnessError, ToolError
from reprobisect.util.files import write_atomic
from reprobisect.util.redact import redact_bytes, secret_values
from reprobisect.util.stop import POLL_SECONDS, stop_requested

__all__ = ["TAIL_LINES", "cannot_start", "output_tail", "run_logged", "run_tool"]

TAIL_LINES = 20
# How to get a tool the harness starts, for the one line that says it is missing (the rest: "install it").
_HOW_TO_GET = {
    "uv": "pip install uv",
    "nox": "pip install nox",
    "git": "your system's package manager, e.g. apt-get install git",
    "patch": "your system's package manager, e.g. apt-get install patch",
    "nvidia-smi": "the NVIDIA driver",
    "ds_report": "deepspeed (it comes with the package)",
}


def cannot_start(what: str, cmd: Sequence[str], exc: OSError) -> str:
    """The message for a tool that did not start. Where the program itself is missing (FileNotFoundError naming
    it, not the working folder) the message names the program and how to get it, because "No such file or
    directory" alone left a user guessing which file (``reprobisect wheelhouse`` without uv on PATH)."""
    program = cmd[0] if cmd else ""
    if isinstance(exc, FileNotFoundError) and program and exc.filename == program:
        name = Path(program).name
        where = "no such program" if os.sep in program else "not found on PATH"
        how = _HOW_TO_GET.get(name, f"the package that provides {name!r:.80}")
        return f"{what}: {program!r:.120}: {where}; install it with {how}"
    shown = shlex.join(cmd) if len(shlex.join(cmd)) <= 300 else shlex.join(cmd)[:297] + "..."
    return f"{what}: `{shown}` cannot start ({exc.strerror or exc})"


def output_tail(text: str | bytes | None, lines: int = TAIL_LINES) -> str:
    """The last ``lines`` lines of a tool's output, for an error message."""
    if isinstance(text, bytes):
        text = text.decode(errors="replace")
    return "\n".join((text or "").strip().splitlines()[-lines:])


def run_tool(
    argv: Sequence[str | Path],
    *,
    what: str,
    timeout: float,
    error: type[HarnessError] = ToolError,
    check: bool = True,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    stdin: str | None = None,
    capture: bool = True,
) -> subprocess.CompletedProcess[str]:
    """Run ``argv`` and return what it did; raise ``error`` when it cannot start, runs past ``timeout`` seconds,
    or (with ``check``) exits non-zero. ``what`` says what the harness was doing, as in "listing deepspeed's
    releases". Without ``capture`` the tool prints to the terminal (a report tool a user reads)."""
    cmd = [str(part) for part in argv]
    shown = shlex.join(cmd) if len(shlex.join(cmd)) <= 300 else shlex.join(cmd)[:297] + "..."
    try:
        process = subprocess.Popen(
            cmd,
            stdin=subprocess.PIPE if stdin is not None else None,
            stdout=subprocess.PIPE if capture else None,
            stderr=subprocess.PIPE if capture else None,
            text=True,
            errors="replace",
            env=dict(env) if env is not None else None,
            cwd=cwd,
            start_new_session=True,
        )
        stdout, stderr = _finish(process, timeout=timeout, stdin=stdin)
        done = subprocess.CompletedProcess(cmd, process.returncode, stdout, stderr)
    except subprocess.TimeoutExpired as exc:
        tail = output_tail(exc.stderr or exc.stdout)
        msg = f"{what}: `{shown}` did not finish in {timeout:g} s" + (f"; it printed:\n{tail}" if tail else "")
        raise error(msg) from exc
    except OSError as exc:
        raise error(cannot_start(what, cmd, exc)) from exc
    if check and done.returncode != 0:
        tail = output_tail(done.stderr) or output_tail(done.stdout)
        msg = f"{what}: `{shown}` exited with status {done.returncode}" + (f":\n{tail}" if tail else "")
        raise error(msg)
    return done


def run_logged(
    argv: Sequence[str | Path],
    *,
    log: Path,
    what: str,
    timeout: float,
    error: type[HarnessError] = ToolError,
    env: Mapping[str, str] | None = None,
) -> None:
    """Run a long tool (a venv build, an install) with its output appended to ``log``, the command first; on
    failure raise ``error`` naming the log and quoting its last lines. ``env``: its whole environment (None: ours)."""
    cmd = [str(part) for part in argv]
    with log.open("a") as handle:
        handle.write(f"$ {shlex.join(cmd)}\n")
        handle.flush()
        try:
            process = subprocess.Popen(
                cmd,
                stdout=handle,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                env=None if env is None else dict(env),
            )
            _finish(process, timeout=timeout)
        except subprocess.TimeoutExpired as exc:
            msg = f"{what} did not finish in {timeout:g} s; see {log}"
            raise error(msg) from exc
        except OSError as exc:
            raise error(cannot_start(what, cmd, exc)) from exc
        finally:
            _redact_log(log)
    if process.returncode != 0:
        tail = output_tail(log.read_text(errors="replace"), 15)
        msg = f"{what} failed (exit {process.returncode}); see {log}:\n{tail}"
        raise error(msg)


def _finish(process: subprocess.Popen[Any], *, timeout: float, stdin: str | None = None) -> tuple[Any, Any]:
    """What ``process`` printed (None where it was not captured), once it ended within ``timeout`` seconds. Past
    the timeout its session is killed and TimeoutExpired raised with what it printed; on a Ctrl-C here or a stop
    elsewhere (``stop_requested``) its session is killed and KeyboardInterrupt raised."""
    deadline = time.monotonic() + timeout
    pending = stdin  # communicate() takes the input once; a retry after a slice must not pass it again
    try:
        while True:
            if stop_requested():
                raise KeyboardInterrupt
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                _kill_session(process)
                out, err = _drain(process)
                raise subprocess.TimeoutExpired(process.args, timeout, output=out, stderr=err)
            try:
                return process.communicate(input=pending, timeout=min(remaining, POLL_SECONDS))
            except subprocess.TimeoutExpired:
                pending = None
    except KeyboardInterrupt:
        _kill_session(process)
        _drain(process)
        raise


def _kill_session(process: subprocess.Popen[Any]) -> None:
    """SIGKILL to the tool's session (its process group: it was started with ``start_new_session``)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError):
        process.kill()


def _drain(process: subprocess.Popen[Any]) -> tuple[Any, Any]:
    """What a killed tool printed; a descendant that left its session and holds the pipe open is not waited for."""
    try:
        return process.communicate(timeout=5)
    except subprocess.TimeoutExpired:
        for stream in (process.stdout, process.stderr):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()
        process.wait()
        return None, None


def _redact_log(log: Path) -> None:
    """A tool's log, the user's secrets redacted once it ended: a build (a probed commit's setup.py) that printed
    one leaves no copy behind, nor in the error that quotes the log's tail."""
    if not secret_values():
        return
    with contextlib.suppress(OSError):
        data = log.read_bytes()
        redacted = redact_bytes(data)
        if redacted != data:
            write_atomic(log, redacted, what="the tool's log")
