"""``reprobisect corpus``: the harness's accuracy on real regressions, entry by entry, "k of n exact".

Each entry of ``corpus/`` (an ``issue.py`` and its hand-measured ``truth.toml``, corpus/README.md) is put through
the very command a maintainer runs — ``triage issue.py --PACKAGE R1,R2,… --git CLONE`` over the releases the truth
was measured on, with the entry's pins (a performance entry adds ``--instruments --slower-than PERCENT`` and is
scored on its timing search's slower ranges; an interaction entry gives two ranges, ``--PACKAGE … --PARTNER …``, and
its grid search's answer is scored, corpus/grid_scoring.py) — and the answer is scored against the truth
(corpus/scoring.py). Entries
this machine cannot run (a GPU entry on a CPU, more GPUs than it has) and entries whose truth is not measured yet
are listed with why. Entries run side by side (``--entry-jobs``, commands/corpus_jobs.py), each in a process of its
own, so that one that crashes is a row saying so. The table goes to ``corpus.md``, ``corpus.json`` and
``corpus.html`` (with the trend of the whole runs, which each whole run appends to ``corpus/history.jsonl``); any
wrong row exits 1.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Literal

from reprobisect.bisect.slowdown_answer import slower_ranges
from reprobisect.commands.corpus_jobs import default_entry_jobs, failed_row, run_entries
from reprobisect.commands.declared import Flag, add_fields, composed, option, read_fields
from reprobisect.commands.options import CLONES, JOBS, CommonOptions, Subparsers, add_common, number_option
from reprobisect.commands.triage_flow import triage_answers
from reprobisect.commands.triage_options import parse_triage
from reprobisect.corpus.entries import entry_folders, gpus_here, why_not_here
from reprobisect.corpus.grid_scoring import score_grid
from reprobisect.corpus.page import write_page
from reprobisect.corpus.provenance import harness_commit, today
from reprobisect.corpus.run_history import HISTORY, Point, append_point, read_history
from reprobisect.corpus.scoring import Found, Row, score
from reprobisect.corpus.table import Header, NotRun, Ran, Table, markdown, write_table
from reprobisect.corpus.truth import load_truth
from reprobisect.corpus.truth_model import PACKAGES, Truth
from reprobisect.errors import FAIL_EXIT, ConfigError, HarnessError
from reprobisect.model.culprit import Culprit
from reprobisect.model.grid_report import GridReport
from reprobisect.util import bounds
from reprobisect.util.neutral import command_line

__all__ = ["CorpusOptions", "run_from_args", "setup_arguments"]


def refuse_pins(truths: Sequence[Truth], pins: Mapping[str, str]) -> None:
    """A pin of a package a chosen entry varies or pins is refused, naming both: that entry's versions are its
    truth's. A pin of another package is the machine's (``--lightning system`` on an offline GPU node, for the
    DeepSpeed entries) and goes to those entries' triage as given."""
    for name in pins:
        clashing = [t.name for t in truths if name in _varied(t) or name in t.pins]
        if clashing:
            msg = (
                f"--{name}: a corpus entry's versions are its truth's, and {', '.join(clashing)} varies or pins "
                f"{name}; leave it out, pick other entries with --entry, or run triage on the script to pin it"
            )
            raise ConfigError(msg)


def _varied(truth: Truth) -> tuple[str, ...]:
    """The packages whose releases an entry varies: its package, and an interaction's partner."""
    return (truth.package, truth.interaction.partner) if truth.interaction else (truth.package,)


CORPUS_DIR = Flag.of("--corpus", type=Path, default=Path("corpus"))  # the folder (nightly's --corpus: entries)
ENTRY = Flag.of("--entry", action="append", default=[], read=tuple)
ENTRY_BACKEND = Flag.of("--backend", choices=("cpu", "cuda"), default="cpu")  # which entries, not which forms
GPUS = Flag.of("--gpus", type=int)
NO_CULPRITS = Flag.of("--no-culprits", action="store_true")
ENTRY_JOBS = Flag.of("--entry-jobs", type=number_option("--entry-jobs", bounds.JOBS))


@dataclasses.dataclass(frozen=True, kw_only=True)
class CorpusOptions:
    """``corpus``'s command line, read once; each option declared here once, as its field, in the order ``--help``
    lists them (commands/declared.py)."""

    corpus: Path = option(CORPUS_DIR, help="the folder of entries")
    entries: tuple[str, ...] = option(ENTRY, help="run only this entry (repeatable)", dest="entry")
    backend: Literal["cpu", "cuda"] = option(
        ENTRY_BACKEND, help="cpu: the CPU entries; cuda: the GPU entries too (on GPUs), the CPU ones still on the CPU"
    )
    gpus: int | None = option(GPUS, help="GPUs this machine has (default: as nvidia-smi lists them)")
    git: tuple[str, ...] = option(
        CLONES,
        help="a whole clone of the package whose releases an entry varies; PACKAGE= (deepspeed, lightning) gives it "
        "to that package's entries only, repeatable, so that one call scores both kinds; a bare CLONE is every entry's",
    )  # [PACKAGE=]CLONE, as given
    no_culprits: bool = option(
        NO_CULPRITS,
        help="score ranges and signatures only; the pull request columns say 'not asked' and count as wrong",
    )
    jobs: int = option(JOBS, help="runs at a time within an entry's triage")
    entry_jobs: int | None = option(
        ENTRY_JOBS,
        help="entries at a time, each in its own process on its share of the cores (default: half the cores, at "
        "most one per entry); a performance entry always runs alone",
    )  # None: default_entry_jobs
    common: CommonOptions = composed(add_common, CommonOptions.from_args)

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> CorpusOptions:
        """The command line as parsed (a pin is held against the chosen entries once they are read)."""
        return read_fields(cls, args)


def setup_arguments(subparsers: Subparsers) -> None:
    """Add ``corpus`` and its options (``CorpusOptions``)."""
    parser = subparsers.add_parser(
        "corpus",
        help="triage every corpus entry this machine can run and score it against its truth: k of n exact",
        description="reprobisect corpus --entry ds-bf16-stray-grad --git ~/DeepSpeed",
    )
    add_fields(parser, CorpusOptions)
    parser.set_defaults(run=run_from_args, out=Path("reports/corpus"))


def _gpus(options: CorpusOptions) -> int:
    return int(options.gpus) if options.gpus is not None else gpus_here()


def _why_not(truth: Truth, options: CorpusOptions, gpus: int) -> str | None:
    """Why this entry is not run here, or None."""
    missing = truth.unmeasured()
    if missing:
        shown = ", ".join(missing[:6]) + (f" and {len(missing) - 6} more" if len(missing) > 6 else "")
        return f"truth not measured for {shown}: python tools/corpus_truth.py {truth.folder}"
    return why_not_here(truth, backend=options.backend, gpus=gpus)


def _passed(common: CommonOptions) -> list[str]:
    """The options of ``add_common`` handed on to each entry's triage as they were given."""
    given = {
        "--config": common.config,
        "--envs": common.envs,
        "--base-python": common.base_python,
        "--wheelhouse": common.wheelhouse,
        "--cpus-per-run": common.cpus_per_run,
    }
    words = [item for option, value in given.items() if value is not None for item in (option, str(value))]
    words += [] if common.confinement.sandbox else ["--no-sandbox"]
    # the names only (never a value): each triage runs in this process, where they are secrets already, and its
    # re-run line must keep them so, or a maintainer's re-run hands the run their own $VAR
    words += [word for name in common.secret_env for word in ("--secret-env", name)]
    return [*words, "--network", common.confinement.network]


def _triage_argv(truth: Truth, options: CorpusOptions) -> list[str]:
    """The triage command line a maintainer would type for this entry."""
    argv = [str(truth.script), f"--{truth.package}", ",".join(truth.releases)]
    if truth.interaction is not None:  # the grid's second range: triage searches the grid (bisect/grid.py)
        argv += [f"--{truth.interaction.partner}", ",".join(truth.interaction.partner_releases)]
    pins = {**options.common.pins, **truth.pins}  # refuse_pins left only the machine's pins of other packages
    argv += [item for name, value in sorted(pins.items()) for item in (f"--{name}", value)]
    argv += [w for name, version in sorted(truth.requires.items()) for w in ("--require", f"{name}=={version}")]
    argv += ["--backend", "cpu" if truth.backend == "cpu" else "cuda", "--timeout", str(truth.timeout)]
    argv += ["--out", str(options.common.out / truth.name), "--jobs", "1" if truth.slowdown else str(options.jobs)]
    if truth.slowdown is not None:  # a performance entry: its steps timed, the answer a timing search's
        argv += ["--instruments", "--slower-than", f"{truth.slowdown.threshold:g}", "--metric", truth.slowdown.metric]
    argv += _passed(options.common) + _culprit_words(truth, options)
    return argv + (["--debug"] if options.common.debug else [])


def _culprit_words(truth: Truth, options: CorpusOptions) -> list[str]:
    """``--git CLONE`` (or ``--culprits``) where the triage searches commits. An interaction entry's grid searches
    the commit behind each edge along each of its two packages (bisect/edge_culprits.py): a clone named for a package
    (``--git lightning=CLONE``) goes to it, and ``--culprits`` has the harness clone the others (a bare ``--git
    CLONE`` names no package, and triage refuses one beside two ranges)."""
    if options.no_culprits:
        return []
    if truth.interaction is not None:
        named = {name: path for name, path in _clones(options.git).items() if name is not None}
        axes = (truth.package, truth.interaction.partner)
        words = [w for axis in axes if axis in named for w in ("--git", f"{axis}={named[axis]}")]
        return words + ([] if all(axis in named for axis in axes) else ["--culprits"])
    clone = _clone_for(truth.package, options.git)
    return ["--git", str(clone)] if clone is not None else ["--culprits"]


def _clones(given: Sequence[str]) -> dict[str | None, Path]:
    """``--git`` values by package (None: a bare CLONE, for every entry); a package named twice or unknown is an
    error naming the value."""
    clones: dict[str | None, Path] = {}
    for value in given:
        package, sep, path = value.partition("=")
        name = package.strip().lower() if sep else None
        if name is not None and name not in PACKAGES:
            msg = f"--git {value!r}: {package!r} is not a corpus package ({', '.join(PACKAGES)}); give PACKAGE=CLONE"
            raise ConfigError(msg)
        if name in clones:
            msg = f"--git {value!r}: a clone for {name or 'every entry'} was given twice"
            raise ConfigError(msg)
        clones[name] = Path(path if sep else value)
    return clones


def _clone_for(package: str, given: Sequence[str]) -> Path | None:
    """The clone an entry of ``package`` is triaged with: the one named for its package, else a bare one, else None
    (the harness's own clone, ``--culprits``)."""
    clones = _clones(given)
    return clones.get(package, clones.get(None))


def run_entry(truth: Truth, options: CorpusOptions) -> Row:
    """Triage one entry as a maintainer would, then score the answer."""
    argv = _triage_argv(truth, options)
    rerun = command_line(["reprobisect", "triage", *argv])
    print(f"\n== corpus entry {truth.name}: {rerun}", flush=True)
    start = time.monotonic()
    try:
        triaged = triage_answers(parse_triage(argv), rerun=rerun)
    except HarnessError as exc:
        return failed_row(truth.name, f"harness error: {exc}", time.monotonic() - start)
    seconds = time.monotonic() - start
    if truth.interaction is not None:
        return _grid_row(truth, triaged.grids, seconds)
    mine = [(a, c) for a, c in triaged.answers if a.axis == truth.package]
    if len(mine) != 1:
        return failed_row(truth.name, f"{len(mine)} answers across {truth.package} (one expected)", seconds)
    answer, culprits = mine[0]
    affected: list[list[str]] = answer.affected
    if truth.slowdown is not None:  # a performance entry: the timing search's slower ranges and its commits
        timed = [(report, c) for a, report, c in triaged.timed if a.axis == truth.package]
        if len(timed) != 1 or timed[0][0] is None:
            return failed_row(truth.name, "no timing search answered (see the summary's 'Slower' section)", seconds)
        affected, culprits = slower_ranges(timed[0][0]), timed[0][1]
    states = {r: (s.outcome, s.signature) for r, s in answer.states.items()}
    if options.no_culprits:
        culprits = [Culprit(kind=k, first=s.first, last=s.last, target=None, why="not asked (--no-culprits)")
                    for s in truth.affected for k in ("introduced", "fixed")]  # fmt: skip
    found = Found(states=states, affected=affected, culprits=culprits, seconds=seconds)
    return score(truth, found)


def _grid_row(truth: Truth, grids: Sequence[GridReport], seconds: float) -> Row:
    """An interaction entry's row from the one grid search over its two axes (a wrong row if there is none)."""
    axes = set(_varied(truth))
    mine = [g for g in grids if {g.row_axis, g.col_axis} == axes]
    if len(mine) != 1:
        why = f"{len(mine)} grid answers over {' × '.join(_varied(truth))} (one expected: is the matrix a grid?)"
        return failed_row(truth.name, why, seconds)
    return score_grid(truth, mine[0], seconds)


UNANSWERED = "no answer yet when this table was written: the run rewrites it whole when every entry has answered"


class PartialTable:
    """The table so far, written again as each entry answers: a run stopped before its end (a full disk, a killed
    job, the session's time) still leaves every row it made, each entry it did not finish named as such. Only the
    whole run's table is appended to the history."""

    def __init__(
        self,
        truths: Sequence[Truth],
        not_run: Sequence[NotRun],
        command: str,
        header: Header,
        *,
        start: float,
        out: Path,
    ) -> None:
        self.order, self.not_run, self.command, self.header = [t.name for t in truths], list(not_run), command, header
        self.start, self.out = start, out
        self.rows: dict[str, Ran] = {}
        self.lock = threading.Lock()

    def __call__(self, name: str, ran: Ran) -> None:
        with self.lock:
            self.rows[name] = ran
            pending = [NotRun(entry=entry, why=UNANSWERED) for entry in self.order if entry not in self.rows]
            header = dataclasses.replace(self.header, wall_seconds=round(time.monotonic() - self.start, 1))
            rows = [self.rows[entry] for entry in self.order if entry in self.rows]
            table = Table(rows=rows, not_run=[*self.not_run, *pending], command=self.command, header=header)
            try:
                write_table(table, self.out)
            except OSError as exc:  # a full disk: the run goes on, and its end says so again if it must
                print(f"{self.out}: the table so far was not written ({exc.strerror or exc})", file=sys.stderr)


def run_from_args(args: argparse.Namespace) -> int:
    """Run the entries, write and print the table and its page; append the run to the history when it was whole
    (no ``--entry``); 1 when any row is wrong."""
    options = CorpusOptions.from_args(args)
    _clones(options.git)  # a wrong --git is refused before any entry runs
    truths = [load_truth(folder) for folder in entry_folders(options.corpus, options.entries, asked_by="--entry")]
    refuse_pins(truths, options.common.pins)
    gpus = _gpus(options) if options.backend == "cuda" else 0
    commit, date, start = harness_commit(), today(), time.monotonic()  # the code as it was when the run began
    runnable: list[Truth] = []
    not_run: list[NotRun] = []
    for truth in truths:
        why = _why_not(truth, options, gpus)
        if why is None:
            runnable.append(truth)
        else:
            not_run.append(NotRun(entry=truth.name, why=why))
    jobs = options.entry_jobs or default_entry_jobs(len(runnable))
    out, command = options.common.out, command_line(["reprobisect", *sys.argv[1:]])
    header = Header(commit=commit, date=date, backend=options.backend, entry_jobs=jobs, wall_seconds=0.0)
    partial = PartialTable(runnable, not_run, command, header, start=start, out=out)
    rows = run_entries(runnable, functools.partial(run_entry, options=options), entry_jobs=jobs, out=out, done=partial)
    header = dataclasses.replace(header, wall_seconds=round(time.monotonic() - start, 1))
    table = Table(rows=rows, not_run=not_run, command=command, header=header)
    md, js = write_table(table, out)
    history = options.corpus / HISTORY
    if not options.entries and rows:  # a whole run: the corpus's number
        point = Point(date=date, commit=commit, k=table.exact, n=len(rows), wall_seconds=header.wall_seconds,
                      backend=options.backend)  # fmt: skip
        try:
            append_point(history, point)
        except OSError as exc:  # a link or a folder where the file should be: said, the table stands
            print(f"{history}: the run was not appended to the history ({exc.strerror or exc}); it must be a plain "
                  "file the harness can write", file=sys.stderr)  # fmt: skip
    page = write_page(table, read_history(history), out)
    print("\n" + markdown(table), flush=True)
    print(f"written: {md}, {js} and {page}" + (f"; the run appended to {history}" if not options.entries else ""))
    return FAIL_EXIT if any(not ran.exact for ran in rows) else 0
