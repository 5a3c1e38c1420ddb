"""Scripts as repros: any script (pasted from an issue, a file of a package's own) becomes a Repro with the same
forms a canonical repro has, its own arguments, and candidate fixes given on the command line.

A script is untrusted code but the options that describe it are the user's own: they are checked here, once,
with errors that name the option and the value, before anything is planned or built.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
import shlex
from collections.abc import Mapping, Sequence
from pathlib import Path

from reprobisect.config.load import Config, check_name, check_pin
from reprobisect.config.patch_paths import check_patch
from reprobisect.errors import ConfigError
from reprobisect.model.repro import Fix, Repro, script_forms
from reprobisect.util.shell import setting_word, shown_setting

__all__ = [
    "FIX_OPTIONS",
    "INSTRUMENTS_ENV",
    "PYTEST_RUNNER",
    "CliFixes",
    "ReproOptions",
    "cli_fixes",
    "env_settings",
    "instruments_of",
    "pytest_repro",
    "pytest_root",
    "script_name",
    "script_repro",
    "with_fixes",
]

# The child file that runs pytest as a repro (the harness never imports it; a path, not a module).
PYTEST_RUNNER = Path(__file__).resolve().parents[1] / "run" / "child" / "pytest_runner.py"

# The options that define a fix on the command line, each ``NAME=VALUE``: what the fix changes.
FIX_OPTIONS = ("fix_args", "fix_patch", "fix_override", "fix_env")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")
# Variables the harness sets itself for every run: a fix that changed them would change how the run is made.
_HARNESS_ENV = ("REPROBISECT_", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_", "TORCHELASTIC_")
_PACKAGE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")


def script_name(script: Path) -> str:
    """``script-<stem>``: the repro name records and logs of a script go under (a safe folder name)."""
    stem = re.sub(r"[^A-Za-z0-9._+-]", "_", script.stem)[:48].strip(".") or "x"
    return f"script-{stem}"


@dataclasses.dataclass(frozen=True, kw_only=True)
class ReproOptions:
    """How a script or a package's tests run as a repro, alike for both: the arguments they get, the signature
    expected, the CPU shim, the fixes beside ``none``, environment settings, the timeout and the command that re-runs
    them, up to the cell's pins."""

    args: Sequence[str] = ()
    expect: str | None = None
    shim: bool = False
    fixes: Mapping[str, Fix] | None = None
    env: Mapping[str, str] | None = None
    timeout: float | None = None  # None: the kind's own (900 s a script, 1800 s a test selection)
    rerun: Sequence[str] = ()


def script_repro(
    script: Path,
    options: ReproOptions | None = None,
    *,
    name: str | None = None,
    title: str | None = None,
    report: str = "",
    instruments: Path | None = None,
) -> Repro:
    """A repro made on the spot from any script, with the forms of a canonical one (``model.repro.script_forms``).
    ``instruments``: the repros' shared module, which the script may then ``import instruments`` (its folder goes at
    the end of the run's ``sys.path``; the file is readable in the sandbox and part of the run's key)."""
    opts = options or ReproOptions()
    args, env = opts.args, opts.env
    if not script.is_file():
        msg = f"script {script}: no such file"
        raise ConfigError(msg)
    path = script.resolve()
    inputs = (instruments.resolve(),) if instruments is not None else ()
    forms = script_forms(path, args=tuple(args), shim=opts.shim, inputs=inputs)
    extra = {INSTRUMENTS_ENV: str(instruments.resolve().parent)} if instruments is not None else {}
    forms = {n: dataclasses.replace(f, env={**f.env, **extra, **(env or {})}) for n, f in forms.items()}
    return Repro(
        name=name or script_name(path),
        title=title or f"script {script}",
        report=report,
        expected_signature=opts.expect,
        timeout=opts.timeout or 900,
        forms=forms,
        fixes={"none": Fix(name="none", description="the script as written"), **(opts.fixes or {})},
        rerun=tuple(opts.rerun),
        script_args=tuple(args),
        reports_steps=instruments is not None,  # with the instruments a script can say which step it failed in
    )


INSTRUMENTS_ENV = "REPROBISECT_INSTRUMENTS"  # a folder the bootstrap appends to the run's sys.path


def instruments_of(config: Config) -> Path:
    """The repros' shared instruments module: ``repros/instruments.py`` beside the config file."""
    path = config.path.parent / "repros" / "instruments.py"
    if not path.is_file():
        msg = f"--instruments: {path} is not there; it comes with the repros beside {config.path.name}"
        raise ConfigError(msg)
    return path


def pytest_root(path: Path) -> Path:
    """The folder pytest runs from for a test file: above the topmost folder of its tree with a ``conftest.py`` or an
    ``__init__.py`` (Lightning's CI runs ``python -m pytest`` in ``tests/``, above ``tests_fabric/``)."""
    folder = path if path.is_dir() else path.parent
    while folder.parent != folder and ((folder / "conftest.py").is_file() or (folder / "__init__.py").is_file()):
        folder = folder.parent
    return folder


def pytest_repro(
    spec: str,
    options: ReproOptions | None = None,
    *,
    keyword: str | None = None,
    root: Path | None = None,
    qualified: bool = False,
) -> Repro:
    """A package's own tests as a repro: ``PATH``, ``PATH::NODE`` (a test file of a tree outside this repository, a
    test in it) and an optional ``-k`` expression, run by pytest in the cell (run/child/pytest_runner.py). One
    outcome per run; the first failing test's exception is the signature; each test's result is kept. ``shim``: the
    CPU form runs the tests through the Lightning CPU shim (Lightning's own DeepSpeed tests need CUDA otherwise).
    ``qualified``: the name holds the file's path in the tree, not only its stem (Lightning has a
    ``test_deepspeed.py`` under both ``tests_fabric/strategies`` and ``tests_pytorch/strategies``)."""
    opts = options or ReproOptions()
    args, env = opts.args, opts.env
    path_text, sep, node = spec.partition("::")
    path = Path(path_text).expanduser()
    if not path.exists():
        msg = f"--pytest {spec!r}: {path} does not exist; give a test file, a folder or FILE::TEST"
        raise ConfigError(msg)
    path = path.resolve()
    tree = (root or pytest_root(path)).resolve()
    if not path.is_relative_to(tree):
        msg = f"--pytest {spec!r}: {path} is not inside --pytest-root {tree}"
        raise ConfigError(msg)
    target = str(path.relative_to(tree)) + (f"::{node}" if sep else "")
    selection = [target, *(["-k", keyword] if keyword else [])]
    source = path.relative_to(tree).with_suffix("").as_posix() if qualified else path.stem
    label = re.sub(r"[^A-Za-z0-9._+-]+", "_", f"{source}-{node.split('::')[-1]}" if sep else source)
    name = f"pytest-{label}".rstrip("._-")
    if len(name) > 64:  # cut, with a hash of the whole: parametrized ids differ only at their end
        name = f"{name[:55].rstrip('._-')}-{hashlib.sha256(target.encode()).hexdigest()[:8]}"
    forms = script_forms(
        PYTEST_RUNNER, args=(str(tree), *selection, *args), inputs=(tree,), pytest=True, shim=opts.shim
    )
    forms = {n: dataclasses.replace(f, env={**f.env, **(env or {})}) for n, f in forms.items()}
    return Repro(
        name=name,
        title=f"pytest {target}" + (f" -k {keyword!r}" if keyword else ""),
        report="",
        expected_signature=opts.expect,
        timeout=opts.timeout or 1800,
        forms=forms,
        fixes={"none": Fix(name="none", description="the tests as written"), **(opts.fixes or {})},
        rerun=tuple(opts.rerun),
        script_args=tuple(args),
    )


def env_settings(items: Sequence[str], option: str = "--env") -> dict[str, str]:
    """``VAR=VALUE`` settings for a script's runs (``--env PL_RUN_STANDALONE_TESTS=1``): the scrubbed environment
    of a run passes no other variable of the user's."""
    settings: dict[str, str] = {}
    for item in items:
        settings.update([_env(f"{option} {item}", item)])
    return settings


@dataclasses.dataclass(frozen=True, kw_only=True)
class CliFixes:
    """The ``--fix-args/--fix-patch/--fix-override/--fix-env NAME=VALUE`` options, as given (repeatable)."""

    args: Sequence[str] = ()
    patch: Sequence[str] = ()
    override: Sequence[str] = ()
    env: Sequence[str] = ()


def _split(option: str, item: str) -> tuple[str, str]:
    name, sep, value = item.partition("=")
    if not sep or not name:
        msg = f"--{option} {item!r}: expected NAME=VALUE, e.g. --{option} {_EXAMPLES[option]}"
        raise ConfigError(msg)
    return check_name("fix", name.strip(), f"--{option}"), value


_EXAMPLES = {
    "fix-args": "'lower-lr=--lr 1e-4'",
    "fix-patch": "my-fix=fix.diff (or my-fix=fix.diff:0 for patch -p0)",
    "fix-override": "newer-lightning=lightning==2.6.6 (or lightning=git+https://...@ref)",
    "fix-env": "no-overlap=DS_OVERLAP_COMM=0",
}


def _patch(item: str, value: str) -> tuple[Path, int]:
    path_text, strip = value, 1
    match = re.fullmatch(r"(.+):(\d)", value)
    if match and not Path(value).is_file():
        path_text, strip = match.group(1), int(match.group(2))
    path = Path(path_text).expanduser()
    if not path.is_file():
        msg = f"--fix-patch {item!r}: {path} is not a file; give NAME=PATH.diff (PATH:0 for patch -p0)"
        raise ConfigError(msg)
    check_patch(path, strip, where=f"--fix-patch {item!r}")  # before any cell is built, as matrix.yaml's
    return path.resolve(), strip


def _override(item: str, value: str) -> tuple[str, str]:
    """``pkg==1.2``, ``pkg=SPEC`` or ``pkg @ URL``: a package and what it is pinned to in this fix's cell."""
    match = re.fullmatch(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(==|=|@)\s*(\S.*)", value)
    if match is None or not _PACKAGE.fullmatch(match.group(1)):
        msg = (
            f"--fix-override {item!r}: expected NAME=PACKAGE==VERSION or NAME=PACKAGE@URL, e.g. --fix-override "
            + (_EXAMPLES["fix-override"])
        )
        raise ConfigError(msg)
    return match.group(1).lower(), check_pin(match.group(3).strip(), f"--fix-override {item!r}")


def _env(item: str, value: str) -> tuple[str, str]:
    """``VAR=VALUE`` of an option named in ``item`` (``--fix-env NAME=VAR=VALUE``, ``--env VAR=VALUE``)."""
    var, sep, setting = value.partition("=")
    if not sep or not _ENV_NAME.fullmatch(var):
        msg = f"{item!r}: expected VARIABLE=VALUE with a variable name of letters, digits and '_'"
        raise ConfigError(msg)
    if var.startswith(_HARNESS_ENV):
        msg = f"{item!r}: {var} is set by the harness for every run; it cannot be changed"
        raise ConfigError(msg)
    if any(ord(c) < 32 and c != "\t" for c in setting) or len(setting) > 4096:
        msg = f"{item!r}: the value holds a control character or is longer than 4096 characters"
        raise ConfigError(msg)
    return var, setting


def cli_fixes(given: CliFixes) -> dict[str, Fix]:
    """Fixes defined on the command line, by name. One name may take several options (arguments and a variable,
    say); a patch and an override never share one, as in matrix.yaml. Each fix keeps the options that made it, so
    a report can print a command that re-runs it."""
    parts: dict[str, dict[str, object]] = {}
    words: dict[str, list[str]] = {}

    def part(name: str, option: str, item: str) -> dict[str, object]:
        words.setdefault(name, []).extend([f"--{option}", item])
        return parts.setdefault(name, {"args": [], "env": {}, "override": {}})

    for item in given.args:
        name, value = _split("fix-args", item)
        try:
            split = shlex.split(value)
        except ValueError as exc:
            msg = f"--fix-args {item!r}: {exc} (quote as in a shell)"
            raise ConfigError(msg) from exc
        args = part(name, "fix-args", item)["args"]
        assert isinstance(args, list)
        args.extend(split)
    for item in given.patch:
        name, value = _split("fix-patch", item)
        part(name, "fix-patch", item)["patch"] = _patch(item, value)
    for item in given.override:
        name, value = _split("fix-override", item)
        package, pin = _override(item, value)
        override = part(name, "fix-override", item)["override"]
        assert isinstance(override, dict)
        override[package] = pin
    for item in given.env:
        name, value = _split("fix-env", item)
        var, setting = _env(f"--fix-env {item}", value)
        env = part(name, "fix-env", shown_setting(item, fix=True))["env"]
        assert isinstance(env, dict)
        env[var] = setting
    return {name: _fix(name, data, tuple(words[name])) for name, data in parts.items()}


def _fix(name: str, data: Mapping[str, object], words: tuple[str, ...]) -> Fix:
    if name == "none":
        msg = "--fix-*: 'none' is the unmodified repro; give the fix another name"
        raise ConfigError(msg)
    patch = data.get("patch")
    override = data["override"]
    args, env = data["args"], data["env"]
    assert isinstance(override, dict) and isinstance(args, list) and isinstance(env, dict)
    if patch is not None and override:
        msg = f"fix {name!r}: a fix is a patch or an override, not both; make two fixes"
        raise ConfigError(msg)
    path, strip = patch if isinstance(patch, tuple) else (None, 1)
    described = [
        *([f"arguments {shlex.join(args)}"] if args else []),
        *([f"patch {path.name}"] if path is not None else []),
        *([" ".join(f"{k} {v}" for k, v in override.items())] if override else []),
        *([" ".join(setting_word(k, v) for k, v in env.items())] if env else []),
    ]
    return Fix(
        name=name,
        description="; ".join(described) + " (command line)",
        args=tuple(args),
        patch=path,
        patch_strip=strip,
        override=dict(override),
        env=dict(env),
        cli=words,
    )


def with_fixes(repro: Repro, fixes: Mapping[str, Fix]) -> Repro:
    """``repro`` with fixes from the command line added; a name matrix.yaml already gives is refused."""
    clash = sorted(set(fixes) & set(repro.fixes))
    if clash:
        msg = f"--fix-*: {clash[0]!r} is already a fix of {repro.name} in matrix.yaml; give yours another name"
        raise ConfigError(msg)
    return dataclasses.replace(repro, fixes={**repro.fixes, **fixes})
