"""What a script run takes besides the script, and the fixes defined on the command line, as ``ScriptOptions``.

A pasted script (``--script``, triage's argument) or a package's own tests (``--pytest``) become repros of this run
(``with_script``), with the expectation, the shim, the variables and the arguments after ``--`` given; fixes from
the command line (``--fix-args/--fix-patch/--fix-override/--fix-env NAME=VALUE``) join them, or matrix.yaml's repros.
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
from collections.abc import Sequence
from pathlib import Path

from reprobisect.commands.declared import Flag, add_fields, as_tuple, option, read_fields
from reprobisect.commands.options import CommonOptions
from reprobisect.config.load import Config
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
from reprobisect.errors import ConfigError
from reprobisect.model.repro import Repro
from reprobisect.util.shell import shown_setting

__all__ = [
    "ScriptOptions",
    "add_cli_fixes",
    "add_script_options",
    "check_script",
    "cli_fix_options",
    "source_options",
    "with_script",
]


SCRIPT = Flag.of("--script", type=Path)
EXPECT_SIGNATURE = Flag.of("--expect-signature")
SHIM = Flag.of("--shim", action="store_true")
INSTRUMENTS = Flag.of("--instruments", action="store_true")
PYTEST = Flag.of("--pytest", action="append", metavar="PATH[::TEST]", read=as_tuple)
PYTEST_K = Flag.of("--pytest-k", metavar="EXPR")
PYTEST_ROOT = Flag.of("--pytest-root", type=Path)
ENV = Flag.of("--env", action="append", metavar="VAR=VALUE", read=as_tuple)
ENV_HELP = (
    "a variable for every run of the script or tests (e.g. PL_RUN_STANDALONE_TESTS=1); runs see no other variable of "
    "yours. A credential-looking VAR's value (TOKEN, SECRET, PASSWORD, KEY, AUTH, ... in the name; --secret-env for "
    "any other) is never written or printed: commands show it as $VAR"
)

# --fix-args/--fix-patch/--fix-override/--fix-env NAME=VALUE: config/scripts.py's CliFixes, field by field
_FIXES = {
    "args": (Flag.of("--fix-args", action="append", default=[], metavar="NAME=ARGS", read=tuple), "extra arguments"),
    "patch": (
        Flag.of("--fix-patch", action="append", default=[], metavar="NAME=PATH[:STRIP]", read=tuple),
        "a patch file",
    ),
    "override": (
        Flag.of("--fix-override", action="append", default=[], metavar="NAME=PKG==VERSION", read=tuple),
        "another version (or PKG@git+URL@ref) of a package, in a cell of its own",
    ),
    "env": (
        Flag.of("--fix-env", action="append", default=[], metavar="NAME=VAR=VALUE", read=tuple),
        "an environment variable (a credential-looking VAR's value is kept secret, as --env's)",
    ),
}


def add_cli_fixes(parser: argparse.ArgumentParser) -> None:
    """``--fix-args/--fix-patch/--fix-override/--fix-env NAME=VALUE``: candidate fixes defined on the command line,
    shown in reports like matrix.yaml's."""
    group = parser.add_argument_group(
        "fixes from the command line",
        "each NAME=VALUE, repeatable; one NAME may take several (arguments and a variable)",
    )
    for part, (flag, help) in _FIXES.items():
        flag.add_to(group, f"fix_{part}", help)


def cli_fix_options(args: argparse.Namespace) -> CliFixes:
    """``add_cli_fixes``'s options as given (each repeatable)."""
    return CliFixes(**{part: flag.read(getattr(args, f"fix_{part}")) for part, (flag, _) in _FIXES.items()})


@dataclasses.dataclass(frozen=True, kw_only=True)
class ScriptOptions:
    """What a script run takes besides the script, read once: the script (or the tests) to run as repros, what goes
    with them, the arguments after ``--``, and the fixes from the command line (which go with matrix.yaml's repros
    too). Each option is declared here once, as its field (``commands/declared.py``)."""

    script: Path | None = option(SCRIPT, help="run any script (e.g. pasted from an issue) instead of a repro")
    expect_signature: str | None = option(
        EXPECT_SIGNATURE, help="with a script: the known name or id that counts as REPRODUCED"
    )
    shim: bool = option(SHIM, help="with a script: run it through the Lightning CPU shim")
    instruments: bool = option(
        INSTRUMENTS,
        help="with a script: let it `import instruments` (the repros' shared module beside matrix.yaml: step events, "
        "the GAN's training check)",
    )
    pytest: tuple[str, ...] = option(
        PYTEST,
        help="a package's own tests as a repro (a file, a folder or a node id of a test tree), run by pytest in the "
        "cell; repeatable, one repro each",
    )
    pytest_k: str | None = option(PYTEST_K, help="with --pytest: only the tests this -k expression selects")
    pytest_root: Path | None = option(
        PYTEST_ROOT, help="with --pytest: the folder pytest runs from (default: above the test tree)"
    )
    env: tuple[str, ...] = option(ENV, help=ENV_HELP)
    script_args: tuple[str, ...] = ()  # what follows ``--``
    fixes: CliFixes = dataclasses.field(default_factory=CliFixes)

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> ScriptOptions:
        """The group as parsed (triage's script is its argument, the others' ``--script``), with what followed
        ``--`` (``args.script_args``: commands/main.py puts it there for a command that takes it)."""
        script_args = tuple(getattr(args, "script_args", ()))
        return read_fields(cls, args, script_args=script_args, fixes=cli_fix_options(args))


def add_script_options(parser: argparse.ArgumentParser, *, script: bool = True) -> None:
    """What a script run takes besides the script: its expectation, the shim, and fixes defined on the command
    line (``--fix-args/--fix-patch/--fix-override/--fix-env NAME=VALUE``, each repeatable). Arguments for the
    script itself follow a ``--`` at the end of the command line."""
    add_fields(parser, ScriptOptions, skip=() if script else ("script",))
    add_cli_fixes(parser)


def with_script(
    config: Config,
    options: ScriptOptions,
    *,
    timeout: float | None,
    repros: Sequence[str],
    rerun: tuple[str, ...],
) -> tuple[Config, tuple[str, ...]]:
    """``config`` with the script and the ``--pytest`` tests (if any) as repros, and the fixes from the command line
    added to them or to ``repros`` (all of matrix.yaml's when empty); returns the names of the repros it made.
    ``rerun`` is the command that re-runs them (reports print it), to which their own options are added; ``timeout``
    is each run's (None: the repro's)."""
    fixes = cli_fixes(options.fixes)
    env = env_settings(options.env)
    if options.script is None and not options.pytest:
        _refuse_without_script(options)
        names = set(repros or config.repros)
        updated = {n: with_fixes(r, fixes) if fixes and n in names else r for n, r in config.repros.items()}
        return dataclasses.replace(config, repros=updated), ()
    if options.script is not None and options.pytest:
        msg = "a script and --pytest contradict each other: triage one at a time"
        raise ConfigError(msg)
    shared = ReproOptions(
        args=options.script_args,
        expect=options.expect_signature,
        shim=options.shim,
        fixes=fixes,
        env=env,
        timeout=timeout or None,
    )
    made = [*_script_repro(config, options, shared, rerun), *_pytest_repros(options, shared, rerun)]
    clash = sorted({r.name for r in made} & set(config.repros)) or [
        r.name for i, r in enumerate(made) if r.name in {m.name for m in made[:i]}
    ]
    if clash:
        msg = f"{clash[0]!r}: two repros of this run (or one of {config.path.name}) would share this name; rename one"
        raise ConfigError(msg)
    return dataclasses.replace(config, repros={**config.repros, **{r.name: r for r in made}}), tuple(
        r.name for r in made
    )


def _refuse_without_script(options: ScriptOptions) -> None:
    """What goes with a script or --pytest, given without either: refused, it would be ignored."""
    given = [options.expect_signature, options.shim, options.script_args, options.env, options.instruments]
    if any(given) or options.pytest_k or options.pytest_root:
        msg = (
            "--expect-signature, --shim, --instruments, --env, --pytest-k, --pytest-root and arguments after '--' "
            "go with a script or --pytest (a repro's live in matrix.yaml)"
        )
        raise ConfigError(msg)


def _rerun_options(options: ScriptOptions) -> list[str]:
    """The options a made repro's re-run command repeats: its expectation and its variables."""
    return [
        *(["--expect-signature", options.expect_signature] if options.expect_signature else []),
        *(item for setting in options.env for item in ("--env", shown_setting(setting))),
    ]


def _script_repro(config: Config, options: ScriptOptions, shared: ReproOptions, rerun: tuple[str, ...]) -> list[Repro]:
    """The script as a repro (none without one); a script that does not exist is refused."""
    if options.script is None:
        return []
    check_script(options.script)
    words = (
        *rerun,
        str(options.script),
        *_rerun_options(options),
        *(["--shim"] if options.shim else []),
        *(["--instruments"] if options.instruments else []),
    )
    instruments = instruments_of(config) if options.instruments else None
    return [script_repro(options.script, dataclasses.replace(shared, rerun=words), instruments=instruments)]


def _pytest_repros(options: ScriptOptions, shared: ReproOptions, rerun: tuple[str, ...]) -> list[Repro]:
    """Each ``--pytest`` selection as a repro."""
    stems = collections.Counter(_unqualified(spec) for spec in options.pytest)
    selection = [
        *(["--pytest-k", options.pytest_k] if options.pytest_k else []),
        *(["--pytest-root", str(options.pytest_root)] if options.pytest_root else []),
    ]
    shim = ["--shim"] if options.shim else []
    return [
        pytest_repro(
            spec,
            dataclasses.replace(shared, rerun=(*rerun, "--pytest", spec, *selection, *_rerun_options(options), *shim)),
            keyword=options.pytest_k,
            root=options.pytest_root,
            qualified=stems[_unqualified(spec)] > 1,  # two test_deepspeed.py files: named by their paths
        )
        for spec in options.pytest
    ]


def _unqualified(spec: str) -> tuple[str, str]:
    """What a --pytest repro's name is made of without its path: the file's stem and the node."""
    path, _, node = spec.partition("::")
    return Path(path).stem, node


def check_script(script: Path | None) -> None:
    """A --script that does not exist is bad input: say so before anything is planned or written."""
    if script is not None and not script.is_file():
        msg = f"--script {script}: no such file"
        raise ConfigError(msg)


def source_options(repro: str | None, options: ScriptOptions, common: CommonOptions) -> list[str]:
    """The options that name what is run — ``--script issue.py --env K=V -- ARGS`` or ``--repro NAME`` — for a
    command that runs it again."""
    if repro:
        return ["--repro", repro]
    words = ["--script", str(options.script)] if options.script else []
    for test in options.pytest:
        words += ["--pytest", test]
    for setting in options.env:
        words += ["--env", shown_setting(setting)]
    if options.shim:
        words.append("--shim")
    if options.expect_signature:
        words += ["--expect-signature", options.expect_signature]
    if common.wheelhouse:
        words += ["--wheelhouse", str(common.wheelhouse)]
    words += ["--out", str(common.out), "--envs", str(common.envs)]  # where its records are: a re-run reuses them
    return [*words, *(["--", *options.script_args] if options.script_args else [])]
