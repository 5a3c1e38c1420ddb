"""Corpus entries as repros: the regression corpus a night runs beside the canonical repros.

An entry (``corpus/<name>/issue.py`` with its ``truth.toml``) is a script whose truth says where the bug was; run
each night like any repro, an entry whose truth says fixed and that fails again is caught the way any regression is
(it passed on the baseline, it fails tonight). What this machine cannot run (a GPU entry on a CPU night, more GPUs
than it has, pins the night's slice contradicts) is listed with why, never dropped in silence.
"""

from __future__ import annotations

import dataclasses
import difflib
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

from reprobisect.config.scripts import ReproOptions, script_repro
from reprobisect.corpus.truth import load_truth
from reprobisect.corpus.truth_model import Truth
from reprobisect.errors import ConfigError
from reprobisect.model.repro import Repro

__all__ = ["ALL", "CorpusSlice", "corpus_slice", "entry_folders", "entry_repro", "gpus_here", "why_not_here"]

ALL = "all"  # every entry of the corpus folder
REPRO_PREFIX = "corpus-"


def entry_folders(
    root: Path, names: Sequence[str], *, asked_by: str = "corpus entry", folder: str = "--corpus DIR"
) -> list[Path]:
    """The entry folders ``names`` asks for (every folder with a truth.toml for none, or for ``all``); errors name
    the option that asked (``asked_by``) and the one that gives the folder."""
    if not root.is_dir():
        msg = f"{root}: no corpus folder here; give {folder} (the checkout's corpus/)"
        raise ConfigError(msg)
    found = sorted(p.parent for p in root.glob("*/truth.toml"))
    if not names or ALL in names:
        return found
    known = {p.name: p for p in found}
    for name in names:
        if name not in known:
            close = difflib.get_close_matches(name, list(known), 1, 0.6)
            hint = f"perhaps you meant {close[0]!r}" if close else f"entries: {', '.join(known) or 'none'}"
            msg = f"{asked_by} {name!r}: no such entry under {root}; {hint}"
            raise ConfigError(msg)
    return [known[name] for name in dict.fromkeys(names)]


def gpus_here() -> int:
    """How many GPUs ``nvidia-smi -L`` lists (0 without it)."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return 0
    listed = subprocess.run([smi, "-L"], capture_output=True, text=True, check=False, timeout=60)
    return sum(line.startswith("GPU ") for line in listed.stdout.splitlines()) if listed.returncode == 0 else 0


def why_not_here(truth: Truth, *, backend: str, gpus: int, axes: Mapping[str, str] | None = None) -> str | None:
    """Why this entry does not run on this machine (or in a slice with these ``axes``), or None."""
    if truth.backend != "cpu" and backend != "cuda":
        return f"needs {truth.gpus} GPU(s) (backend {truth.backend}): run with --backend cuda on a GPU machine"
    if truth.gpus > gpus:
        return f"needs {truth.gpus} GPUs, this machine has {gpus}"
    if truth.requires and axes is not None:  # corpus's own triage gives them (--require); a slice's cells do not
        needed = ", ".join(f"{name}=={version}" for name, version in sorted(truth.requires.items()))
        return f"its cells need {needed} beside the matrix's packages, which this slice's cells do not install"
    for name, value in sorted((axes or {}).items()):
        wanted = truth.pins.get(name)
        if wanted is not None and wanted != value:
            return f"its truth pins {name} {wanted}; this slice runs {name} {value}"
    return None


def entry_repro(truth: Truth, instruments: Path | None = None) -> Repro:
    """The entry's ``issue.py`` as a repro named ``corpus-<entry>``, titled by its truth, with its timeout; a
    performance entry times its steps with ``instruments`` (the repros' shared module), which it then imports."""
    words = ("reprobisect", "triage", str(truth.script), *(["--instruments"] if truth.slowdown else []))
    options = ReproOptions(timeout=float(truth.timeout), rerun=words)
    return script_repro(
        truth.script,
        options,
        name=REPRO_PREFIX + truth.name,
        title=f"corpus: {truth.title}",
        report=truth.report,
        instruments=instruments if truth.slowdown is not None else None,
    )


@dataclasses.dataclass(frozen=True, kw_only=True)
class CorpusSlice:
    """The entries a night runs (as repros, by name) and those it cannot, each with why."""

    repros: Mapping[str, Repro]
    not_run: tuple[str, ...]


def corpus_slice(
    root: Path,
    names: Sequence[str],
    *,
    backend: str,
    axes: Mapping[str, str],
    strict: bool,
    instruments: Path | None = None,
) -> CorpusSlice:
    """The entries ``names`` asks for, as repros where this machine and slice can run them. ``strict``: a corpus
    folder that is not there is an error (asked for on the command line); else every entry is listed as not run
    (matrix.yaml asks, run from a folder without the checkout's corpus). ``instruments``: what a performance
    entry's script imports to time its steps."""
    if not names:
        return CorpusSlice(repros={}, not_run=())
    if not root.is_dir() and not strict:
        return CorpusSlice(repros={}, not_run=(f"corpus {', '.join(names)}: no corpus folder at {root}",))
    gpus = gpus_here() if backend == "cuda" else 0
    repros: dict[str, Repro] = {}
    not_run: list[str] = []
    for folder in entry_folders(root, names, folder="--corpus-dir DIR"):  # the nightly's option
        truth = load_truth(folder)
        why = why_not_here(truth, backend=backend, gpus=gpus, axes=axes)
        if why is None:
            repro = entry_repro(truth, instruments)
            repros[repro.name] = repro
        else:
            not_run.append(f"corpus entry {truth.name}: {why}")
    return CorpusSlice(repros=repros, not_run=tuple(not_run))
