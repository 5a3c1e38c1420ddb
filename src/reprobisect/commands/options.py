"""Options that several subcommands share, defined once here, and the small readers of what they hold.

Each ``add_*`` function adds one option (or the common block) where the caller puts it: argparse lists
options in the order they were added, so a command keeps its own order and its ``--help`` stays as it was.
A help text that differs between commands is a parameter, not a copy of the option.
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import importlib.util
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TypeAlias

from reprobisect.cells.base import base_interpreter
from reprobisect.cells.offline_wheelhouse import use_wheelhouse
from reprobisect.config.expand import PINNED_AXES
from reprobisect.config.load import Config, check_pin, default_config_path
from reprobisect.config.scripts import (
    CliFixes,
    ReproOptions,
    cli_fixes,
    env_settings,
    instruments_of,
    pytest_repro,
    script_repro,
    with_fixes,
)
from reprobisect.engine.slurm import SlurmExecutor, SlurmOptions, slurm_arg
from reprobisect.errors import ConfigError
from reprobisect.model.store import Store
from reprobisect.run.context import MatrixExecutor, RunContext
from reprobisect.run.phases import PROFILE_ENV
from reprobisect.run.sandbox import Confinement

__all__ = [
    "Subparsers",
    "add_backend",
    "add_cli_fixes",
    "add_common",
    "add_executor",
    "add_fixes",
    "add_forms",
    "add_nproc",
    "add_script_options",
    "add_timeout",
    "check_script",
    "confinement",
    "engine_summary",
    "executor",
    "pins",
    "prepare",
    "run_context",
    "split",
    "with_script",
]

# What ``ArgumentParser.add_subparsers`` returns; typeshed names no public type for it.
Subparsers: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"

_PIN_EXTRA = {
    "torch": " or 'system'",
    "torchvision": ", 'system' or 'match' (the release made for the cell's torch; a pair made for another "
    "torch is not installable together)",
}
# Options whose value becomes a version, a ref or a URL handed to pip, uv or git (checked by ``prepare``).
_VALUE_OPTIONS = (*PINNED_AXES, "python", "good", "bad", "repo", "baseline_release", "up_to", "signature")


def _default_base() -> str:
    """This interpreter when it has torch (a GPU image's python3), else the one the harness's venv was made from."""
    if importlib.util.find_spec("torch") is not None:
        return sys.executable
    return str(getattr(sys, "_base_executable", sys.executable))


def _non_negative(text: str) -> int:
    """An argparse type: a whole number >= 0 (argparse turns the ValueError into a one-line usage error).

    argparse names the function in that error ("invalid _non_negative value"), so the name is kept."""
    value = int(text)
    if value < 0:
        msg = f"{text!r} is negative"
        raise ValueError(msg)
    return value


def add_backend(parser: argparse.ArgumentParser, help: str | None = None) -> None:
    """``--backend auto|cuda|cpu``: which forms of a repro run."""
    parser.add_argument("--backend", choices=("auto", "cuda", "cpu"), default="auto", help=help)


def add_fixes(parser: argparse.ArgumentParser, help: str = "fix name(s); default: all") -> None:
    """``--fix``, repeatable and comma-separated (read it with ``split``)."""
    parser.add_argument("--fix", action="append", help=help)


def add_forms(parser: argparse.ArgumentParser, help: str = "form(s) instead of the backend's") -> None:
    """``--form``, repeatable and comma-separated (read it with ``split``)."""
    parser.add_argument("--form", action="append", help=help)


def add_script_options(parser: argparse.ArgumentParser, *, script: bool = True) -> None:
    """What a script run takes besides the script: its expectation, the shim, and fixes defined on the command
    line (``--fix-args/--fix-patch/--fix-override/--fix-env NAME=VALUE``, each repeatable). Arguments for the
    script itself follow a ``--`` at the end of the command line."""
    if script:
        parser.add_argument("--script", type=Path, help="run any script (e.g. pasted from an issue) instead of a repro")
    parser.add_argument("--expect-signature", help="with a script: the known name or id that counts as REPRODUCED")
    parser.add_argument("--shim", action="store_true", help="with a script: run it through the Lightning CPU shim")
    parser.add_argument(
        "--instruments",
        action="store_true",
        help="with a script: let it `import instruments` (the repros' shared module beside matrix.yaml: step events, "
        "the GAN's training check)",
    )
    parser.add_argument(
        "--pytest",
        action="append",
        metavar="PATH[::TEST]",
        help="a package's own tests as a repro (a file, a folder or a node id of a test tree), run by pytest in the "
        "cell; repeatable, one repro each",
    )
    parser.add_argument("--pytest-k", metavar="EXPR", help="with --pytest: only the tests this -k expression selects")
    parser.add_argument(
        "--pytest-root", type=Path, help="with --pytest: the folder pytest runs from (default: above the test tree)"
    )
    parser.add_argument(
        "--env",
        action="append",
        metavar="VAR=VALUE",
        help="a variable for every run of the script or tests (e.g. PL_RUN_STANDALONE_TESTS=1); runs see no other "
        "variable of yours",
    )
    add_cli_fixes(parser)


def add_cli_fixes(parser: argparse.ArgumentParser) -> None:
    """``--fix-args/--fix-patch/--fix-override/--fix-env NAME=VALUE``: candidate fixes defined on the command line,
    shown in reports like matrix.yaml's."""
    group = parser.add_argument_group(
        "fixes from the command line",
        "each NAME=VALUE, repeatable; one NAME may take several (arguments and a variable)",
    )
    group.add_argument("--fix-args", action="append", default=[], metavar="NAME=ARGS", help="extra arguments")
    group.add_argument("--fix-patch", action="append", default=[], metavar="NAME=PATH[:STRIP]", help="a patch file")
    group.add_argument(
        "--fix-override",
        action="append",
        default=[],
        metavar="NAME=PKG==VERSION",
        help="another version (or PKG@git+URL@ref) of a package, in a cell of its own",
    )
    group.add_argument(
        "--fix-env", action="append", default=[], metavar="NAME=VAR=VALUE", help="an environment variable"
    )


def add_nproc(parser: argparse.ArgumentParser) -> None:
    """``--nproc 1,2``: ranks per run, an axis (replaces matrix.yaml's ``nproc`` axis)."""
    parser.add_argument(
        "--nproc", help="ranks per run, comma-separated values (an axis; each rank gets torchrun's variables)"
    )


def with_script(
    config: Config,
    args: argparse.Namespace,
    script: Path | None,
    *,
    repros: Sequence[str],
    rerun: tuple[str, ...],
) -> tuple[Config, tuple[str, ...]]:
    """``config`` with the script and the ``--pytest`` tests (if any) as repros, and the fixes from the command line
    added to them or to ``repros`` (all of matrix.yaml's when empty); returns the names of the repros it made.
    ``rerun`` is the command that re-runs them (reports print it), to which their own options are added."""
    fixes = cli_fixes(CliFixes(args=args.fix_args, patch=args.fix_patch, override=args.fix_override, env=args.fix_env))
    script_args = tuple(getattr(args, "script_args", ()))
    pytests = tuple(getattr(args, "pytest", None) or ())
    env = env_settings(getattr(args, "env", None) or ())
    instruments = bool(getattr(args, "instruments", False))  # --instruments: the script may import them
    if script is None and not pytests:
        given = [getattr(args, "expect_signature", None), getattr(args, "shim", False), script_args, env, instruments]
        if any(given) or getattr(args, "pytest_k", None) or getattr(args, "pytest_root", None):
            msg = (
                "--expect-signature, --shim, --instruments, --env, --pytest-k, --pytest-root and arguments after '--' "
                "go with a script or --pytest (a repro's live in matrix.yaml)"
            )
            raise ConfigError(msg)
        names = set(repros or config.repros)
        updated = {n: with_fixes(r, fixes) if fixes and n in names else r for n, r in config.repros.items()}
        return dataclasses.replace(config, repros=updated), ()
    if script is not None and pytests:
        msg = "a script and --pytest contradict each other: triage one at a time"
        raise ConfigError(msg)
    options = [
        *(["--expect-signature", args.expect_signature] if args.expect_signature else []),
        *(item for setting in getattr(args, "env", None) or () for item in ("--env", setting)),
    ]
    shared = ReproOptions(
        args=script_args,
        expect=args.expect_signature,
        shim=args.shim,
        fixes=fixes,
        env=env,
        timeout=args.timeout or None,
    )
    made = []
    if script is not None:
        check_script(script)
        made.append(
            script_repro(
                script,
                dataclasses.replace(
                    shared,
                    rerun=(
                        *rerun,
                        str(script),
                        *options,
                        *(["--shim"] if args.shim else []),
                        *(["--instruments"] if instruments else []),
                    ),
                ),
                instruments=instruments_of(config) if instruments else None,
            )
        )
    stems = collections.Counter(_unqualified(spec) for spec in pytests)
    for spec in pytests:
        selection = [
            *(["--pytest-k", args.pytest_k] if args.pytest_k else []),
            *(["--pytest-root", str(args.pytest_root)] if args.pytest_root else []),
        ]
        made.append(
            pytest_repro(
                spec,
                dataclasses.replace(
                    shared, rerun=(*rerun, "--pytest", spec, *selection, *options, *(["--shim"] if args.shim else []))
                ),
                keyword=args.pytest_k,
                root=args.pytest_root,
                qualified=stems[_unqualified(spec)] > 1,  # two test_deepspeed.py files: named by their paths
            )
        )
    clash = sorted({r.name for r in made} & set(config.repros)) or [
        r.name for i, r in enumerate(made) if r.name in {m.name for m in made[:i]}
    ]
    if clash:
        msg = f"{clash[0]!r}: two repros of this run (or one of {config.path.name}) would share this name; rename one"
        raise ConfigError(msg)
    return dataclasses.replace(config, repros={**config.repros, **{r.name: r for r in made}}), tuple(
        r.name for r in made
    )


def _unqualified(spec: str) -> tuple[str, str]:
    """What a --pytest repro's name is made of without its path: the file's stem and the node."""
    path, _, node = spec.partition("::")
    return Path(path).stem, node


def add_timeout(parser: argparse.ArgumentParser, help: str = "seconds per run (default: the repro's)") -> None:
    """``--timeout SECONDS`` per run; None leaves each repro's own."""
    parser.add_argument("--timeout", type=float, help=help)


def add_envs(
    parser: argparse.ArgumentParser, help: str = "one venv per cell lives here (env REPROBISECT_ENVS)"
) -> None:
    """``--envs DIR``: where the cells (and the op cache beside them) live."""
    parser.add_argument("--envs", type=Path, default=Path(os.environ.get("REPROBISECT_ENVS", ".cells")), help=help)


def add_common(parser: argparse.ArgumentParser, *, pin_help: Mapping[str, str] | None = None) -> None:
    """The block every cell-building command ends with: files, the base interpreter, pins, wheelhouse,
    confinement, --debug. ``pin_help`` replaces the help of a pin whose meaning the command changes."""
    parser.add_argument(
        "--config",
        type=Path,
        default=default_config_path(),
        help="the matrix file (default: ./matrix.yaml, else the one installed with the package)",
    )
    parser.add_argument("--out", type=Path, default=Path("reports"), help="records, logs and summaries go here")
    add_envs(parser)
    parser.add_argument(
        "--base-python",
        default=os.environ.get("REPROBISECT_BASE_PYTHON", _default_base()),
        help="interpreter cells are made from; 'system' torch is its torch",
    )
    for name in PINNED_AXES:
        default_help = f"pin {name}: a version, a specifier, 'latest'" + _PIN_EXTRA.get(name, "")
        parser.add_argument(f"--{name}", help=(pin_help or {}).get(name, default_help))
    parser.add_argument(
        "--wheelhouse",
        type=Path,
        default=os.environ.get("REPROBISECT_WHEELHOUSE"),
        help="offline: install only from this folder of wheels (env REPROBISECT_WHEELHOUSE)",
    )
    parser.add_argument(
        "--cpus-per-run",
        type=_non_negative,
        default=None,
        help="pin each run to N cores of its own (0: unpinned); default 1 on the cuda backend, unpinned on the CPU",
    )
    parser.add_argument(
        "--no-sandbox",
        dest="sandbox",
        action="store_false",
        help="run repros unconfined (by default each runs in a bubblewrap sandbox: own PID namespace, read-only "
        "file system, private HOME and /tmp)",
    )
    parser.add_argument(
        "--network",
        choices=("on", "off"),
        default="on",
        help="off: each sandboxed run has only a loopback of its own (gloo and one-host NCCL still work)",
    )
    parser.add_argument(
        "--profile",
        action="store_true",
        help="time each run's phases (sandbox start, imports, CUDA init, ops, script, exit report, teardown, record), "
        "print them after each run and keep them in its record (config.profile)",
    )
    parser.add_argument("--debug", action="store_true", help="show tracebacks of harness errors")


def _positive(text: str) -> int:
    """An argparse type: a whole number >= 1."""
    value = int(text)
    if value < 1:
        msg = f"{text!r} is less than 1"
        raise ValueError(msg)
    return value


def add_executor(parser: argparse.ArgumentParser) -> None:
    """``--executor local|slurm`` and what passes through to Slurm (engine/slurm.py): each cell a job, each wave of
    cells (a matrix, a round of bisection probes, a nightly slice) one job array."""
    group = parser.add_argument_group(
        "where runs happen",
        "with --executor slurm, --out and --envs must lie on a filesystem every node sees (records, cells, op cache)",
    )
    group.add_argument(
        "--executor",
        choices=("local", "slurm"),
        default="local",
        help="local: this machine; slurm: one job per cell, one job array per wave (submitit, sacct, scancel)",
    )
    group.add_argument("--slurm-partition", metavar="NAME", help="the partition every job goes to")
    group.add_argument("--slurm-account", metavar="NAME", help="the account the jobs are charged to")
    group.add_argument(
        "--slurm-time", metavar="MINUTES", type=_positive, help="time limit of each cell's job (default 60)"
    )
    group.add_argument("--slurm-constraint", metavar="FEATURES", help="node features the jobs need (--constraint)")
    group.add_argument("--slurm-cpus", metavar="N", type=_positive, help="cores per job (--cpus-per-task)")
    group.add_argument(
        "--slurm-arg",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="any other sbatch option for every job, e.g. qos=high (repeatable); --gres=gpu:N comes from the runs' "
        "nproc on --backend cuda",
    )
    group.add_argument(
        "--slurm-folder", type=Path, metavar="DIR", help="the jobs' pickles and logs (default: --out/slurm)"
    )


def executor(args: argparse.Namespace) -> MatrixExecutor | None:
    """The engine the options ask for, made once per command (its losses and overhead are said at the end);
    None for ``local``. Slurm options without ``--executor slurm`` are refused: they would be ignored."""
    made = getattr(args, "made_executor", None)
    if made is not None or getattr(args, "executor", "local") == "local":
        given = [name for name in _SLURM_OPTIONS if getattr(args, name, None) not in (None, [])]
        if made is None and given:
            msg = f"--{given[0].replace('_', '-')} goes with --executor slurm"
            raise ConfigError(msg)
        return made
    options = SlurmOptions(
        partition=args.slurm_partition,
        account=args.slurm_account,
        time_minutes=args.slurm_time or 60,
        constraint=args.slurm_constraint,
        cpus_per_job=args.slurm_cpus,
        extra=dict(slurm_arg(text) for text in args.slurm_arg),
        folder=args.slurm_folder.resolve() if args.slurm_folder else None,
    )
    args.made_executor = SlurmExecutor(options)
    return args.made_executor  # type: ignore[no-any-return]


_SLURM_OPTIONS = (
    "slurm_partition",
    "slurm_account",
    "slurm_time",
    "slurm_constraint",
    "slurm_cpus",
    "slurm_arg",
    "slurm_folder",
)


def engine_summary(engine: MatrixExecutor | None) -> list[str]:
    """What the engine says at the end of a command: jobs lost (and requeued), overhead per job; nothing locally."""
    return list(engine.summary()) if isinstance(engine, SlurmExecutor) else []


def split(values: Sequence[str] | None) -> tuple[str, ...]:
    """``--fix a,b --fix c`` as ``("a", "b", "c")``; nothing given is ``()``."""
    return tuple(item for value in values or () for item in value.split(",") if item)


def pins(args: argparse.Namespace) -> dict[str, str]:
    """The pins given on the command line, by package name."""
    return {name: getattr(args, name) for name in PINNED_AXES if getattr(args, name)}


def confinement(args: argparse.Namespace) -> Confinement:
    """``--no-sandbox`` and ``--network`` as the runner's Confinement."""
    return Confinement(sandbox=args.sandbox, network=args.network)


def check_script(script: Path | None) -> None:
    """A --script that does not exist is bad input: say so before anything is planned or written."""
    if script is not None and not script.is_file():
        msg = f"--script {script}: no such file"
        raise ConfigError(msg)


def _check_values(args: argparse.Namespace) -> None:
    """Every option that becomes a version, a ref or a URL for pip, uv or git: never an option in disguise."""
    for name in _VALUE_OPTIONS:
        value = getattr(args, name, None)
        if isinstance(value, str):
            check_pin(value, f"--{name.replace('_', '-')}")


def prepare(args: argparse.Namespace, *, wheelhouse: bool = True) -> None:
    """What every command of ``add_common`` does first: refuse an option in disguise, then (unless the
    command builds the wheelhouse itself) make installs offline from ``--wheelhouse``. Nothing is written
    before this passes."""
    _check_values(args)
    if wheelhouse and args.wheelhouse:
        use_wheelhouse(args.wheelhouse)


def run_environ(args: argparse.Namespace) -> Mapping[str, str]:
    """The environment runs start from: this process's, with ``--profile``'s switch for the runs' phase clock."""
    return {**os.environ, PROFILE_ENV: "1"} if getattr(args, "profile", False) else os.environ


def run_context(args: argparse.Namespace) -> RunContext:
    """Where a command's runs happen, from ``add_common``'s options: ``--base-python``, ``--out`` (the records),
    ``--envs`` (the cells), this process's environment (``run_environ``) and the engine (``executor``)."""
    return RunContext(
        base=base_interpreter(args.base_python),
        store=Store(args.out),
        envs_dir=args.envs,
        environ=run_environ(args),
        executor=executor(args),
    )
