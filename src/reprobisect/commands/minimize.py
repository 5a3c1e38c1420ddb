"""``reprobisect minimize SCRIPT --bad PIN [--good PIN] [-- ARGS]``: cut a script from an issue down to the smallest
one that still fails on the bad release (the same way) and, with ``--good``, not on the good one.

Prints a progress line every 15 s, and at the end the sizes, the verdicts in both cells, the commands that re-check
the result and where its files are (``out/minimize/NAME/``: ``minimized.py``, ``minimized.diff``,
``minimize.json``, ``minimize.md``). Ctrl-C keeps the best so far (and exits 130).
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import signal
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from reprobisect.commands.declared import Flag, add_fields, composed, option, read_fields
from reprobisect.commands.options import (
    BACKEND,
    FORM,
    JOBS,
    TIMEOUT,
    CommonOptions,
    Subparsers,
    add_common,
    prepare,
    run_context,
)
from reprobisect.commands.script_options import ENV, EXPECT_SIGNATURE, SHIM
from reprobisect.config.expand import PINNED_AXES
from reprobisect.config.load import check_pin, load_config
from reprobisect.config.scripts import env_settings
from reprobisect.errors import INTERRUPTED_EXIT, ConfigError
from reprobisect.minimize.request import MinimizeRequest, parse_budget

if TYPE_CHECKING:
    from reprobisect.minimize.request import MinimizeResult

__all__ = [
    "MinimizeOptions",
    "parse_cell_pins",
    "require_reducers",
    "run_from_args",
    "setup_arguments",
]

# What a minimization runs that no other command does (pyproject's dependencies): imported only once it starts.
_REDUCERS = ("pyflakes", "picire")


def setup_arguments(subparsers: Subparsers) -> None:
    """Add ``minimize`` and its options (``MinimizeOptions``)."""
    parser = subparsers.add_parser(
        "minimize",
        help="shrink a script to the smallest one that still fails on the bad release and not on the good one",
        description="Arguments after '--' go to the script. Example: reprobisect minimize issue.py "
        "--bad deepspeed==0.16.5 --good deepspeed==0.16.4 --jobs 2 --budget 20m",
    )
    add_fields(parser, MinimizeOptions)
    parser.set_defaults(run=run_from_args, script_args=())


def parse_cell_pins(values: Sequence[str] | None, option: str) -> dict[str, str] | None:
    """``--bad deepspeed==0.16.5,lightning==2.5.0`` as ``{"deepspeed": "0.16.5", "lightning": "2.5.0"}``."""
    if not values:
        return None
    found: dict[str, str] = {}
    for item in (part.strip() for value in values for part in value.split(",")):
        if not item:
            continue
        name, sep, version = item.partition("==")
        name = name.strip().lower()
        if not sep or name not in PINNED_AXES or not version.strip():
            msg = f"{option} {item!r}: expected PACKAGE==VERSION with PACKAGE one of {', '.join(PINNED_AXES)}"
            raise ConfigError(msg)
        found[name] = check_pin(version.strip(), f"{option} {item!r}")
    return found


SCRIPT = Flag.of("script", type=Path)
# --bad and --good: the pins of one cell each (not bisect's one revision)
BAD = Flag.of("--bad", action="append", required=True, metavar="PACKAGE==VERSION", read=tuple)
GOOD = Flag.of("--good", action="append", metavar="PACKAGE==VERSION", read=lambda values: tuple(values or ()) or None)
BUDGET = Flag.of("--budget", action="append", default=[], read=tuple)
KEEP_TRACEBACK = Flag.of("--try-traceback-lines", action="store_false")


@dataclasses.dataclass(frozen=True, kw_only=True)
class MinimizeOptions:
    """``minimize``'s command line, read once; ``--bad`` and ``--good`` as given (``parse_cell_pins`` reads them).
    Each option declared here once, as its field, in the order ``--help`` lists them (commands/declared.py)."""

    script: Path = option(SCRIPT, help="the script to minimize (it is run as untrusted code)")
    bad: tuple[str, ...] = option(
        BAD, help="the cell where the script fails: pins of one or more packages (comma-separated or repeated)"
    )
    good: tuple[str, ...] | None = option(
        GOOD,
        help="the cell where it does not fail that way; a candidate is kept only if it still tells the two apart",
    )
    expect_signature: str | None = option(
        EXPECT_SIGNATURE, help="the known name or signature id the bad cell must show"
    )
    form: str | None = option(FORM, help="the form to run (default: cuda on a GPU, cpu-deepspeed on the CPU)")
    shim: bool = option(SHIM, help="run the script through the Lightning CPU shim")
    env: tuple[str, ...] = option(ENV, help="a variable for every run")  # VAR=VALUE, as given
    jobs: int = option(dataclasses.replace(JOBS, default=2), help="candidates run at a time (default 2)")
    budget: tuple[str, ...] = option(
        BUDGET,
        help="stop after this long or this many runs: 600, 10m, 1h, 200runs (repeat for both); default none: "
        "the reducer stops when a whole pass removes nothing",
    )
    keep_traceback: bool = option(
        KEEP_TRACEBACK,
        help="also try removing the statements the original's failure passed through (kept by default: without "
        "them a candidate cannot fail the same way, except by another path)",
    )
    backend: Literal["auto", "cuda", "cpu"] = option(BACKEND, help=None)
    timeout: float | None = option(
        TIMEOUT, help="seconds per candidate run (default: 5 times the original's slowest run, at least 60)"
    )
    script_args: tuple[str, ...] = ()  # what follows ``--``
    common: CommonOptions = composed(add_common, CommonOptions.from_args)

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> MinimizeOptions:
        """The command line as parsed."""
        return read_fields(cls, args, script_args=tuple(args.script_args))


def _request(options: MinimizeOptions) -> MinimizeRequest:
    """The options as a MinimizeRequest; bad input is refused here, before anything runs."""
    if options.jobs < 1:
        msg = f"--jobs {options.jobs}: must be at least 1"
        raise ConfigError(msg)
    if not options.script.is_file():
        msg = f"{options.script}: no such file"
        raise ConfigError(msg)
    bad = parse_cell_pins(options.bad, "--bad") or {}
    good = parse_cell_pins(options.good, "--good")
    if good is not None and set(good) != set(bad):
        msg = f"--good pins {', '.join(sorted(good))} but --bad pins {', '.join(sorted(bad))}: pin the same packages"
        raise ConfigError(msg)
    if good == bad:
        msg = "--good and --bad name the same cell: give the release where the script does not fail"
        raise ConfigError(msg)
    common = options.common
    return MinimizeRequest(
        script=options.script,
        bad=bad,
        good=good,
        pins=common.pins,
        backend=options.backend,
        form=options.form,
        script_args=options.script_args,
        expect=options.expect_signature,
        shim=options.shim,
        env=env_settings(options.env),
        timeout=options.timeout,
        cpus_per_run=common.cpus_per_run,
        confinement=common.confinement,
        jobs=options.jobs,
        keep_traceback=options.keep_traceback,
        budget=parse_budget(options.budget),
        out=common.out,
    )


def run_from_args(args: argparse.Namespace) -> int:
    """Minimize, write the files, print the result; 130 when Ctrl-C stopped it (the best so far is written)."""
    require_reducers()
    options = MinimizeOptions.from_args(args)
    prepare(options.common)
    request = _request(options)
    from reprobisect.minimize.original import read_script
    from reprobisect.minimize.outputs import write_outputs  # imports pyflakes and picire: only once minimizing
    from reprobisect.minimize.pipeline import minimize

    source = read_script(options.script)  # ConfigError, not a traceback, for a file that is not UTF-8 text
    result = minimize(load_config(options.common.config), request, run_context(options.common))
    write_outputs(result, request, source)
    _print(result, request)
    if result.interrupted:  # the best so far is on disk: Ctrl-C means Ctrl-C again
        signal.signal(signal.SIGINT, signal.default_int_handler)
    return INTERRUPTED_EXIT if result.interrupted else 0


def require_reducers(find: Callable[[str], object] = importlib.util.find_spec) -> None:
    """ConfigError (exit 2) naming what a minimization needs and this Python lacks, and how to install it: every
    other command runs without them (a GPU node that only triages), so they are looked for only here."""
    missing = [name for name in _REDUCERS if not _importable(name, find)]
    if missing:
        msg = (
            f"minimize needs {' and '.join(missing)}, not installed for {sys.executable}: "
            f"{sys.executable} -m pip install {' '.join(missing)}"
        )
        raise ConfigError(msg)


def _importable(name: str, find: Callable[[str], object]) -> bool:
    try:
        return find(name) is not None
    except (ImportError, ValueError):  # a finder that refuses the name, or a module without a spec
        return False


def _print(result: MinimizeResult, request: MinimizeRequest) -> None:
    from reprobisect.minimize.outputs import plain_command, recheck_commands  # as in run_from_args

    o, m = result.original, result.minimized
    print(
        f"\n{o.lines} → {m.lines} lines ({o.lines / max(1, m.lines):.2f}× fewer), {o.tokens} → {m.tokens} tokens "
        f"({o.tokens / max(1, m.tokens):.2f}× fewer) in {result.runs} runs, {result.seconds:.0f} s; "
        f"stopped: {result.stopped}"
    )
    print(f"The minimized script: {result.verdict.why}")
    print("\n" + result.text.rstrip())
    print("\nRe-check it:\n  " + "\n  ".join(recheck_commands(result.folder / "minimized.py", result.cells)))
    print(f"Or outside the harness, with the bad (or good) pins installed: {plain_command(request, result.cells)}")
    if result.kept:
        print(f"Kept: {result.kept}.")
    print(f"\nFiles: {result.folder}/ (minimized.py, minimized.diff, minimize.json, minimize.md)")
