"""Options that several subcommands share, defined once here, and the typed object their values become.

An option several commands take with one meaning is declared once: a ``Flag`` here (``OUT``, ``DEBUG``, ``FRESH``,
``CLONE``, ``JOBS``, ...; commands/declared.py), which each command's options class makes a field with its own help,
in the order its ``--help`` lists them. A help text that differs between commands is the field's, not a copy of the
option (tests/unit/test_declared_options.py).

A command reads its parsed command line once, into one frozen options object of its own (``BisectOptions``,
``MatrixOptions``, ...), right after parsing; the groups several commands share are small options objects of their
own, composed into those: ``CommonOptions`` here (``add_common``'s block), ``ScriptOptions``
(commands/script_options.py), ``EngineOptions`` (commands/engine_options.py). Every option that becomes a version,
a ref or a URL for pip, uv or git is checked as the object is built (never an option in disguise), so a command's
steps take typed values and nothing below ``commands/`` sees an argparse ``Namespace``.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import os
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Literal, TypeAlias

from reprobisect.cells.base import base_interpreter
from reprobisect.cells.offline_wheelhouse import use_wheelhouse
from reprobisect.commands.declared import Flag, add_fields, as_tuple, composed, option, read_fields
from reprobisect.config.expand import PINNED_AXES
from reprobisect.config.load import check_pin, default_config_path
from reprobisect.model.store import Store
from reprobisect.run.context import MatrixExecutor, RunContext
from reprobisect.run.phases import PROFILE_ENV
from reprobisect.run.sandbox import Confinement
from reprobisect.util import bounds
from reprobisect.util.bounds import Bound
from reprobisect.util.invocation import default_cells_dir
from reprobisect.util.redact import declare_secret_name, register_secret, secret_name

__all__ = [
    "CommonOptions",
    "Subparsers",
    "add_common",
    "add_envs",
    "checked",
    "number_option",
    "prepare",
    "register_option_secrets",
    "run_context",
    "split",
]

# What ``ArgumentParser.add_subparsers`` returns; typeshed names no public type for it.
Subparsers: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"

_PIN_EXTRA = {
    "torch": " or 'system'",
    "torchvision": ", 'system' or 'match' (the release made for the cell's torch; a pair made for another "
    "torch is not installable together)",
}


def _default_base() -> str:
    """This interpreter when it has torch (a GPU image's python3), else the one the harness's venv was made from."""
    if importlib.util.find_spec("torch") is not None:
        return sys.executable
    return str(getattr(sys, "_base_executable", sys.executable))


def split(values: Sequence[str] | None) -> tuple[str, ...]:
    """``--fix a,b --fix c`` as ``("a", "b", "c")``; nothing given is ``()``."""
    return tuple(item for value in values or () for item in value.split(",") if item)


OUT = Flag.of("--out", type=Path, default=Path("reports"))  # the records' folder: every command that runs or reads them
DEBUG = Flag.of("--debug", action="store_true")
FORMS = Flag.of("--form", action="append", read=split)  # several forms, comma-separated or repeated
FORM = Flag.of("--form")  # one form: a search or a minimization follows one
FRESH = Flag.of("--fresh", action="store_true")
REPROS = Flag.of("--repro", action="append", read=split)  # matrix.yaml's repros, several, comma-separated or repeated
CLONE = Flag.of("--git", type=Path)  # one whole clone of one package
CLONES = Flag.of(
    "--git", action="append", default=[], metavar="[PACKAGE=]CLONE", read=tuple
)  # a clone per package, or one
CULPRITS = Flag.of("--culprits", action="store_true")  # a clone the harness makes of the package's repository


def number_option(name: str, bound: Bound) -> Callable[[str], int | float]:
    """An argparse ``type`` for option ``name``: the number, or argparse's usage error (exit 2) with one line that
    names the option, quotes the value cut to a readable length and says the range."""

    def parse(text: str) -> int | float:
        try:
            return bound.parse(text)
        except ValueError:
            # argparse says "argument --timeout: " before this: the value and the range are what it adds
            raise argparse.ArgumentTypeError(bound.refusal("", text)) from None

    parse.__name__ = name  # argparse names the type in some messages
    return parse


BACKEND = Flag.of("--backend", choices=("auto", "cuda", "cpu"), default="auto")  # which forms of a repro run
FIXES = Flag.of("--fix", action="append", read=split)  # several fixes, comma-separated or repeated
NPROC = Flag.of("--nproc")  # ranks per run, an axis (replaces matrix.yaml's ``nproc`` axis)
NPROC_HELP = "ranks per run, comma-separated values (an axis; each rank gets torchrun's variables)"
REPEAT = Flag.of("--repeat", type=number_option("--repeat", bounds.REPEATS), default=1)  # runs of each unit
JOBS = Flag.of("--jobs", type=number_option("--jobs", bounds.JOBS), default=1)  # runs (probes, candidates) at a time
TIMEOUT = Flag.of("--timeout", type=number_option("--timeout", bounds.TIMEOUT))  # per run; None: each repro's own
TIMEOUT_HELP = "seconds per run (default: the repro's)"


ENVS = Flag.of("--envs", type=Path, default_from=default_cells_dir)
CONFIG = Flag.of("--config", type=Path, default_from=default_config_path)
BASE_PYTHON = Flag.of("--base-python", default_from=lambda: os.environ.get("REPROBISECT_BASE_PYTHON", _default_base()))
WHEELHOUSE = Flag.of("--wheelhouse", type=Path, default_from=lambda: os.environ.get("REPROBISECT_WHEELHOUSE"))
CPUS_PER_RUN = Flag.of("--cpus-per-run", type=number_option("--cpus-per-run", Bound(0, 4096)))
SANDBOX = Flag.of("--no-sandbox", action="store_false")
NETWORK = Flag.of("--network", choices=("on", "off"), default="on")
PROFILE = Flag.of("--profile", action="store_true")


def _pin_flag(name: str) -> Flag:
    """``--torch``, ``--deepspeed``, ...: a pinned package's flag, its value checked as the options are read."""

    def read(value: str | None) -> str | None:
        return checked(value, f"--{name}")

    return Flag.of(f"--{name}", read=read)


PINS = {name: _pin_flag(name) for name in PINNED_AXES}  # one flag per pinned package


def add_envs(parser: argparse.ArgumentParser, help: str = "one venv per cell lives here") -> None:
    """``--envs DIR``: where the cells (and the op cache beside them) live; the help says where that is now."""
    where = f"default here: {default_cells_dir()} ($REPROBISECT_ENVS, else ./.cells under nox, else the user's cache "
    where += "folder)"
    ENVS.add_to(parser, "envs", f"{help}; {where}")


def add_common(parser: argparse.ArgumentParser, *, pin_help: Mapping[str, str] | None = None) -> None:
    """The block every cell-building command ends with: files, the base interpreter, pins, wheelhouse,
    confinement, --debug (``CommonOptions``). ``pin_help`` replaces the help of a pin whose meaning the command
    changes."""
    add_fields(parser, CommonOptions, help=pin_help)


def _pin_help(name: str) -> str:
    return f"pin {name}: a version, a specifier, 'latest'" + _PIN_EXTRA.get(name, "")


def register_option_secrets(args: argparse.Namespace) -> None:
    """Hide the secrets of a parsed command line from everything the harness writes and prints, before anything
    runs: ``--secret-env`` names first, then the value of every ``--env``/``--fix-env`` variable of a secret's
    name (``util.redact.secret_name``). Items in a wrong form too: the error that refuses one must not show it."""
    for name in getattr(args, "secret_env", None) or ():
        declare_secret_name(name)
    for item in getattr(args, "env", None) or ():
        _register_setting(item)
    for item in getattr(args, "fix_env", None) or ():
        _register_setting(item.partition("=")[2])


def register_argv_secrets(words: Sequence[str]) -> None:
    """Before the command line is parsed: hide the value of every ``NAME=VALUE`` word (``--env``'s, ``--fix-env``'s
    ``FIX=NAME=VALUE``, ``--env=NAME=VALUE``) whose name is a secret's. argparse quotes a word it refuses
    ("unrecognized arguments: --evn HF_TOKEN=…"), and it does so before ``register_option_secrets`` could run."""
    for word in words:
        if word == "--":
            return  # the script's own arguments: never ours to read
        item = word.split("=", 1)[1] if word.startswith("--") and "=" in word else word
        _register_setting(item)
        _register_setting(item.partition("=")[2])  # FIX=NAME=VALUE


def _register_setting(item: str) -> None:
    name, sep, value = item.partition("=")
    if sep and secret_name(name.strip()):
        register_secret(value)


def _variable_name(text: str) -> str:
    """``--secret-env``'s value: an environment variable's name."""
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", text):
        msg = f"{text[:80]!r} is not an environment variable name (letters, digits and '_', not first a digit)"
        raise argparse.ArgumentTypeError(msg)
    return text


def checked(value: str | None, option: str) -> str | None:
    """An option's value that becomes a version, a ref or a URL for pip, uv or git: refused when it would be read
    as an option or break a line (``check_pin``); None stays None."""
    return None if value is None else check_pin(value, option)


SECRET_ENV = Flag.of("--secret-env", action="append", type=_variable_name, metavar="VAR", read=as_tuple)


@dataclasses.dataclass(frozen=True, kw_only=True)
class CommonOptions:
    """``add_common``'s block, read once: the files, the base interpreter, the pins, the wheelhouse, the cores and
    the confinement of each run, ``--profile`` and ``--debug``. Each option declared here once, as its field, in the
    order ``--help`` lists them (commands/declared.py); a pin that would be read as an option (or breaks a line) is
    refused as the object is built."""

    config: Path = option(
        CONFIG, help="the matrix file (default: ./matrix.yaml, else the one installed with the package)"
    )
    out: Path = option(OUT, help="records, logs and summaries go here")
    envs: Path = composed(add_envs, lambda args: args.envs)
    base_python: str = option(BASE_PYTHON, help="interpreter cells are made from; 'system' torch is its torch")
    torch: str | None = option(PINS["torch"], help=_pin_help("torch"))
    deepspeed: str | None = option(PINS["deepspeed"], help=_pin_help("deepspeed"))
    lightning: str | None = option(PINS["lightning"], help=_pin_help("lightning"))
    torchvision: str | None = option(PINS["torchvision"], help=_pin_help("torchvision"))
    wheelhouse: Path | None = option(
        WHEELHOUSE, help="offline: install only from this folder of wheels (env REPROBISECT_WHEELHOUSE)"
    )
    cpus_per_run: int | None = option(
        CPUS_PER_RUN,
        help="pin each run to N cores of its own (0: unpinned); default 1 on the cuda backend, unpinned on the CPU",
    )
    sandbox: bool = option(
        SANDBOX,
        help="run repros unconfined (by default each runs in a bubblewrap sandbox: own PID namespace, read-only "
        "file system, private HOME and /tmp)",
    )
    network: Literal["on", "off"] = option(
        NETWORK, help="off: each sandboxed run has only a loopback of its own (gloo and one-host NCCL still work)"
    )
    profile: bool = option(
        PROFILE,
        help="time each run's phases (sandbox start, imports, CUDA init, ops, script, exit report, teardown, record), "
        "print them after each run and keep them in its record (config.profile)",
    )
    secret_env: tuple[str, ...] = option(
        SECRET_ENV,
        help="treat VAR as a secret whatever its name (repeatable): its value, given by --env, --fix-env or "
        "matrix.yaml, is never written or printed, and runs never get your own $VAR. Names with TOKEN, SECRET, "
        "PASSW, APIKEY, API_KEY, AUTH, CREDENTIAL, PRIVATE, COOKIE or WEBHOOK in them, a part KEY, KEYS or PASS "
        "(WANDB_API_KEY, DB_PASS), or starting with AWS_, GITHUB_, AZURE_, GOOGLE_ or HF_TOKEN are secrets already",
    )  # made secrets before anything runs (register_option_secrets)
    debug: bool = option(DEBUG, help="show tracebacks of harness errors")

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> CommonOptions:
        """The block as parsed."""
        return read_fields(cls, args)

    @property
    def pins(self) -> Mapping[str, str]:
        """The pins given, by package name."""
        given = {name: getattr(self, name) for name in PINNED_AXES}  # one field per pinned package
        return {name: value for name, value in given.items() if value}

    @property
    def confinement(self) -> Confinement:
        """Each run's sandbox: ``--no-sandbox``, ``--network``."""
        return Confinement(sandbox=self.sandbox, network=self.network)

    def environ(self) -> Mapping[str, str]:
        """The environment runs start from: this process's, with ``--profile``'s switch for the runs' phase clock."""
        return {**os.environ, PROFILE_ENV: "1"} if self.profile else os.environ


def prepare(common: CommonOptions, *, wheelhouse: bool = True) -> None:
    """What every command of ``add_common`` does first, once its options are read: (unless the command builds the
    wheelhouse itself) make installs offline from ``--wheelhouse``. Nothing is written before this passes."""
    if wheelhouse and common.wheelhouse:
        use_wheelhouse(common.wheelhouse)


def run_context(common: CommonOptions, executor: MatrixExecutor | None = None) -> RunContext:
    """Where a command's runs happen, from ``add_common``'s options: ``--base-python``, ``--out`` (the records),
    ``--envs`` (the cells), this process's environment (``CommonOptions.environ``) and the engine the cells run on
    (``EngineOptions.engine()``, made once per command: its losses and overhead are said at the end; None: here)."""
    return RunContext(
        base=base_interpreter(common.base_python),
        store=Store(common.out),
        envs_dir=common.envs,
        environ=common.environ(),
        executor=executor,
    )
