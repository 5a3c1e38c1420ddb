"""The one way the harness runs a short tool (uv, git, pip, nvidia-smi, a probe in a cell's python): argv
only, a timeout always, text output captured, and on failure one error of the caller's kind that names what
was being done, the command, the exit status or the timeout, and the tail of what the tool printed.

Repro runs do not come here: ``run.runner`` owns those (process group, log file, sandbox, live tail)."""

from __future__ import annotations

import shlex
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

from reprobisect.errors import HarnessError, ToolError

__all__ = ["TAIL_LINES", "output_tail", "run_logged", "run_tool"]

TAIL_LINES = 20


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
        done = subprocess.run(
            cmd,
            capture_output=capture,
            text=True,
            errors="replace",
            timeout=timeout,
            check=False,
            env=dict(env) if env is not None else None,
            cwd=cwd,
            input=stdin,
        )
    except subprocess.TimeoutExpired as exc:
        tail = output_tail(exc.stderr or exc.stdout)
        msg = f"{what}: `{shown}` did not finish in {timeout:g} s" + (f"; it printed:\n{tail}" if tail else "")
        raise error(msg) from exc
    except OSError as exc:
        msg = f"{what}: `{shown}` cannot start ({exc.strerror or exc})"
        raise error(msg) from exc
    if check and done.returncode != 0:
        tail = output_tail(done.stderr) or output_tail(done.stdout)
        msg = f"{what}: `{shown}` exited with status {done.returncode}" + (f":\n{tail}" if tail else "")
        raise error(msg)
    return done


def run_logged(
    argv: Sequence[str | Path], *, log: Path, what: str, timeout: float, error: type[HarnessError] = ToolError
) -> None:
    """Run a long tool (a venv build, an install) with its output appended to ``log``, the command first; on
    failure raise ``error`` naming the log and quoting its last lines."""
    cmd = [str(part) for part in argv]
    with log.open("a") as handle:
        handle.write(f"$ {shlex.join(cmd)}\n")
        handle.flush()
        try:
            done = subprocess.run(cmd, stdout=handle, stderr=subprocess.STDOUT, check=False, timeout=timeout)
        except subprocess.TimeoutExpired as exc:
            msg = f"{what} did not finish in {timeout:g} s; see {log}"
            raise error(msg) from exc
        except OSError as exc:
            msg = f"{what}: `{shlex.join(cmd)[:300]}` cannot start ({exc.strerror or exc})"
            raise error(msg) from exc
    if done.returncode != 0:
        tail = output_tail(log.read_text(errors="replace"), 15)
        msg = f"{what} failed (exit {done.returncode}); see {log}:\n{tail}"
        raise error(msg)
