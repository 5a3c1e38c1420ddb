"""Read matrix.yaml once into frozen dataclasses; the only module that knows the YAML's shape.

Every error names the file, the key path, the bad value and what would be right.
"""

from __future__ import annotations

import dataclasses
import difflib
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from reprobisect.config.expand import META_KEYS, CompatibilityRule, MatrixSpec, matches
from reprobisect.config.patch_paths import check_patch
from reprobisect.errors import ConfigError
from reprobisect.model.repro import FORMS, SHIMS, Fix, Form, FormName, Repro, script_forms

__all__ = [
    "Config",
    "NightlySpec",
    "check_name",
    "check_pin",
    "default_config_path",
    "load_config",
]

MAX_CONFIG_BYTES = 1 << 20
MAX_DEPTH = 32
# Repro and fix names become folder and file names of records and logs, and words in commands.
_SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,63}")


def check_name(kind: str, name: str, where: str) -> str:
    """``name`` when it is safe as a file name and a word in a command; else a ConfigError saying what is."""
    if _SAFE_NAME.fullmatch(name) and ".." not in name:
        return name
    msg = (
        f"{where}: {kind} name {name!r} is not allowed; use letters, digits, '.', '_', '+' and '-' "
        "(at most 64, starting with a letter or digit, no '..')"
    )
    raise ConfigError(msg)


def check_pin(value: str, where: str) -> str:
    """A version, specifier, path or URL; never one that a tool would read as an option or that breaks a line."""
    if value.startswith("-"):
        problem = "starts with '-', which pip, uv or git would read as an option"
    elif any(ord(c) < 32 or ord(c) == 127 for c in value):
        problem = "holds a control character (a newline, say)"
    elif len(value) > 500:
        problem = f"is {len(value)} characters long"
    else:
        return value
    msg = f"{where}: {value[:60]!r} {problem}; give a version, a specifier, a path or a URL"
    raise ConfigError(msg)


@dataclasses.dataclass(frozen=True, kw_only=True)
class NightlySpec:
    """The ``nightly:`` section: the slice of the matrix each new DeepSpeed release is put through.

    ``axes`` hold every axis but deepspeed (the nightly fills that one with the new release); they are
    exact on purpose, so that tonight's cells meet the baseline's on everything but DeepSpeed.
    """

    axes: Mapping[str, str]
    repros: tuple[str, ...]
    # regression corpus entries (corpus/<name>/) the night runs beside the repros, ("all",) for every one: an entry
    # whose truth says fixed that fails again is a regression like any other
    corpus: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True, kw_only=True)
class Config:
    """The whole of matrix.yaml, parsed."""

    path: Path
    default_cell: Mapping[str, str]
    matrix: MatrixSpec
    repros: Mapping[str, Repro]
    nightly: NightlySpec | None = None

    def repro(self, name: str) -> Repro:
        """The repro called ``name``, or a ConfigError that lists the known ones."""
        if name not in self.repros:
            raise ConfigError(_unknown(f"{self.path.name}: repros", name, self.repros))
        return self.repros[name]


def _unknown(where: str, value: str, allowed: Any) -> str:
    names = sorted(allowed)
    msg = f"{where}: unknown {value!r}; expected one of {', '.join(map(repr, names))}"
    close = difflib.get_close_matches(value, names, 1, 0.6)
    return msg + (f". Perhaps you meant {close[0]!r}?" if close else "")


class _StrictLoader(yaml.SafeLoader):
    """YAML as a person writes a config: no aliases (a 600-byte file cannot expand to gigabytes), no key given
    twice (the last would silently win), no nesting deeper than ``MAX_DEPTH``."""

    def compose_node(self, parent: yaml.Node | None, index: int) -> yaml.Node | None:
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()  # type: ignore[no-untyped-call]
            raise yaml.composer.ComposerError(
                None, None, "aliases (*name) are not allowed in matrix.yaml: write the value out", event.start_mark
            )
        self._depth = getattr(self, "_depth", 0) + 1
        try:
            if self._depth > MAX_DEPTH:
                raise yaml.composer.ComposerError(
                    None,
                    None,
                    f"nested deeper than {MAX_DEPTH} levels",
                    self.peek_event().start_mark,  # type: ignore[no-untyped-call]
                )
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"key {key!r} given twice (the last would silently win)", key_node.start_mark
                )
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def _keys(value: Any) -> set[str]:
    """The keys a mapping may have when any key is allowed; none when it is not a mapping (mapping() says so)."""
    return {str(k) for k in value} if isinstance(value, dict) else set()


class _Reader:
    """Walks the YAML tree and remembers the key path for error messages."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def fail(self, where: str, message: str) -> ConfigError:
        return ConfigError(f"{self.path.name}: {where}: {message}")

    def mapping(
        self,
        value: Any,
        where: str,
        *,
        allowed: set[str] | frozenset[str] | tuple[str, ...],
        required: set[str] | frozenset[str] = frozenset(),
    ) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise self.fail(where, f"expected a mapping, got {type(value).__name__} {value!r}")
        for key in value:
            if key not in allowed:
                raise ConfigError(_unknown(f"{self.path.name}: {where}", str(key), allowed))
        missing = sorted(required - set(value))
        if missing:
            raise self.fail(where, f"missing required key {missing[0]!r}")
        return value

    def string(self, value: Any, where: str) -> str:
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            raise self.fail(where, f"expected a string, got {value!r}")
        return str(value)

    def strings(self, value: Any, where: str) -> tuple[str, ...]:
        if not isinstance(value, list):
            raise self.fail(where, f"expected a list of strings, got {value!r}")
        return tuple(self.string(item, f"{where}[{i}]") for i, item in enumerate(value))


def _file(reader: _Reader, raw: Any, where: str, root: Path) -> Path:
    path = root / reader.string(raw, where)
    if not path.is_file():
        raise reader.fail(where, f"{path} does not exist")
    return path


def _read_form(reader: _Reader, name: str, raw: Any, where: str, root: Path, inputs: tuple[Path, ...] = ()) -> Form:
    if name not in FORMS:
        raise ConfigError(_unknown(f"{reader.path.name}: {where}", name, FORMS))
    data = reader.mapping(
        raw,
        f"{where}.{name}",
        allowed={"script", "fix_script", "precision", "args", "env", "shim", "distributed_env"},
        required={"script", "precision"},
    )
    script = _file(reader, data["script"], f"{where}.{name}.script", root)
    fix_script = _file(reader, data["fix_script"], f"{where}.{name}.fix_script", root) if "fix_script" in data else None
    shim = data.get("shim")
    if shim is not None and shim not in SHIMS:
        raise ConfigError(_unknown(f"{reader.path.name}: {where}.{name}.shim", str(shim), SHIMS))
    env = reader.mapping(data.get("env", {}), f"{where}.{name}.env", allowed=_keys(data.get("env", {})))
    return Form(
        name=name,
        script=script,
        fix_script=fix_script,
        inputs=inputs,
        precision=reader.string(data["precision"], f"{where}.{name}.precision"),
        args=reader.strings(data.get("args", []), f"{where}.{name}.args"),
        env={str(k): reader.string(v, f"{where}.{name}.env.{k}") for k, v in env.items()},
        shim=shim,
        distributed_env=bool(data.get("distributed_env", False)),
    )


def _read_fix(reader: _Reader, name: str, raw: Any, where: str, forms: set[str], root: Path) -> Fix:
    fix = reader.mapping(
        raw or {}, where, allowed={"args", "description", "form_args", "patch", "strip", "override", "env"}
    )
    per_form = reader.mapping(fix.get("form_args", {}), f"{where}.form_args", allowed=forms)
    patch = None
    if "patch" in fix:
        patch = root / reader.string(fix["patch"], f"{where}.patch")
        if not patch.is_file():
            raise reader.fail(f"{where}.patch", f"{patch} does not exist; put the diff under repros/fixes/")
    strip = fix.get("strip", 1)
    if isinstance(strip, bool) or not isinstance(strip, int) or strip < 0:
        raise reader.fail(f"{where}.strip", f"expected a number of leading path parts (patch -p), got {strip!r}")
    if patch is not None:  # before any cell is built: a patch that names a path outside its package is refused
        check_patch(patch, strip, where=f"{reader.path.name}: {where}.patch")
    override_raw = reader.mapping(fix.get("override", {}), f"{where}.override", allowed=_keys(fix.get("override")))
    env_raw = reader.mapping(fix.get("env", {}), f"{where}.env", allowed=_keys(fix.get("env")))
    kinds = [key for key in ("patch", "override") if key in fix]
    if len(kinds) > 1:
        raise reader.fail(where, "a fix is a patch or an override, not both; make two fixes")
    return Fix(
        name=name,
        description=reader.string(fix.get("description", ""), f"{where}.description"),
        args=reader.strings(fix.get("args", []), f"{where}.args"),
        form_args={f: reader.strings(v, f"{where}.form_args.{f}") for f, v in per_form.items()},
        patch=patch,
        patch_strip=strip,
        override={
            str(k): check_pin(reader.string(v, f"{where}.override.{k}"), f"{reader.path.name}: {where}.override.{k}")
            for k, v in override_raw.items()
        },
        env={
            _env_name(reader, str(k), f"{where}.env"): reader.string(v, f"{where}.env.{k}") for k, v in env_raw.items()
        },
    )


_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")


def _env_name(reader: _Reader, name: str, where: str) -> str:
    if not _ENV_NAME.fullmatch(name):
        raise reader.fail(where, f"{name!r} is not an environment variable name (letters, digits and '_')")
    return name


def _pins(reader: _Reader, raw: Any, where: str) -> dict[str, str]:
    data = reader.mapping(raw, where, allowed=_keys(raw) if isinstance(raw, dict) else set())
    pins = {str(k): reader.string(v, f"{where}.{k}") for k, v in data.items()}
    return {k: v if k in META_KEYS else check_pin(v, f"{reader.path.name}: {where}.{k}") for k, v in pins.items()}


_RULE_KEYS = {"when", "require", "reason"}


def _read_rule(reader: _Reader, raw: Any, where: str) -> CompatibilityRule:
    data = reader.mapping(raw, where, allowed={*_RULE_KEYS, "imports"}, required=_RULE_KEYS)
    imports = reader.strings(data.get("imports", []), f"{where}.imports")  # top-level modules: lightning
    if wrong := [name for name in imports if not (name.isidentifier() and name.isascii())]:
        raise reader.fail(f"{where}.imports", f"{wrong[0]!r} is not a top-level module name such as 'lightning'")
    rule = CompatibilityRule(
        when=_pins(reader, data["when"], f"{where}.when"),
        require=_pins(reader, data["require"], f"{where}.require"),
        reason=reader.string(data["reason"], f"{where}.reason"),
        imports=imports,
    )
    for axis, pattern in rule.require.items():
        when = rule.when.get(axis)
        if when is not None and not matches(axis, when, pattern) and not any(c in when for c in "<>=!~*"):
            raise reader.fail(where, f"when {axis}={when!r} and require {axis}={pattern!r} contradict each other")
    return rule


def _read_matrix(reader: _Reader, raw: Any) -> MatrixSpec:
    data = reader.mapping(
        raw, "matrix", allowed={"axes", "exclude", "include", "compatibility", "prereleases"}, required={"axes"}
    )
    axes_raw = reader.mapping(data["axes"], "matrix.axes", allowed=_keys(data["axes"]))
    axes = {}
    for axis, values in axes_raw.items():
        where = f"matrix.axes.{axis}"
        axes[str(axis)] = tuple(
            check_pin(value, f"{reader.path.name}: {where}")
            for value in reader.strings(values if isinstance(values, list) else [values], where)
        )
        if not axes[str(axis)]:
            raise reader.fail(where, "an axis needs at least one value")
    for axis in ("deepspeed", "lightning", "torch"):
        if axis not in axes:
            close = difflib.get_close_matches(axis, list(axes), 1, 0.75)
            if close:
                raise reader.fail(f"matrix.axes.{close[0]}", f"unknown axis; perhaps you meant {axis!r}?")
    exclude = tuple(_pins(reader, r, f"matrix.exclude[{i}]") for i, r in enumerate(data.get("exclude") or []))
    include = tuple(_pins(reader, r, f"matrix.include[{i}]") for i, r in enumerate(data.get("include") or []))
    rules = tuple(
        _read_rule(reader, r, f"matrix.compatibility[{i}]") for i, r in enumerate(data.get("compatibility") or [])
    )
    known = set(axes) | {"python"} | {axis for entry in include for axis in entry if axis not in META_KEYS}
    for i, rule in enumerate(exclude):
        for axis in rule:
            if axis not in known:
                close = difflib.get_close_matches(axis, sorted(known), 1, 0.6)
                hint = f"; perhaps you meant {close[0]!r}" if close else ""
                raise reader.fail(f"matrix.exclude[{i}]", f"axis {axis!r} is not in matrix.axes{hint}")
    return MatrixSpec(
        axes=axes, exclude=exclude, include=include, rules=rules, prereleases=bool(data.get("prereleases", False))
    )


_SCRIPT_KEYS = {"script", "args", "shim", "title", "report", "expected_signature", "timeout", "fixes"}


def _read_script_repro(reader: _Reader, name: str, data: dict[str, Any], root: Path) -> Repro:
    """The short entry of a script: ``NAME: {script: issue.py}``, with the forms any script gets (a cuda form with a
    one-process distributed environment, a CPU form), optional arguments, expectation and fixes."""
    where = f"repros.{name}"
    reader.mapping(data, where, allowed=_SCRIPT_KEYS, required={"script"})
    script = root / reader.string(data["script"], f"{where}.script")
    if not script.is_file():
        raise reader.fail(f"{where}.script", f"{script} does not exist")
    shim = data.get("shim", False)
    if not isinstance(shim, bool):
        raise reader.fail(
            f"{where}.shim", f"expected true or false (run it through the Lightning CPU shim), got {shim!r}"
        )
    forms = script_forms(script, args=reader.strings(data.get("args", []), f"{where}.args"), shim=shim)
    fixes = _read_fixes(reader, where, data.get("fixes") or {"none": {}}, set(forms), root)
    return Repro(
        name=name,
        title=reader.string(data.get("title", f"script {data['script']}"), f"{where}.title"),
        report=reader.string(data.get("report", ""), f"{where}.report"),
        expected_signature=_expected(reader, where, data),
        timeout=_timeout(reader, where, data),
        forms=forms,
        fixes=fixes,
    )


def _read_fixes(reader: _Reader, where: str, raw: Any, forms: set[str], root: Path) -> dict[str, Fix]:
    fixes_raw = reader.mapping(raw, f"{where}.fixes", allowed=_keys(raw))
    if "none" not in fixes_raw:
        raise reader.fail(f"{where}.fixes", "must define 'none' (the unmodified repro)")
    fixes = {}
    for fix_name, fix_raw in fixes_raw.items():
        check_name("fix", str(fix_name), f"{reader.path.name}: {where}.fixes")
        if fix_name == "all":
            raise reader.fail(f"{where}.fixes.all", "'all' is reserved (--fix all runs every fix): name it otherwise")
        fixes[fix_name] = _read_fix(reader, fix_name, fix_raw, f"{where}.fixes.{fix_name}", forms, root)
    return fixes


def _timeout(reader: _Reader, where: str, data: dict[str, Any]) -> float:
    timeout = data.get("timeout", 900)
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0:
        raise reader.fail(f"{where}.timeout", f"expected a positive number of seconds, got {timeout!r}")
    return float(timeout)


def _expected(reader: _Reader, where: str, data: dict[str, Any]) -> str | None:
    expected = data.get("expected_signature")
    return None if expected is None else reader.string(expected, f"{where}.expected_signature")


def _read_repro(reader: _Reader, name: str, raw: Any, root: Path) -> Repro:
    where = f"repros.{name}"
    check_name("repro", str(name), f"{reader.path.name}: repros")
    if isinstance(raw, dict) and "script" in raw:
        return _read_script_repro(reader, name, raw, root)
    data = reader.mapping(
        raw,
        where,
        allowed={"title", "report", "expected_signature", "timeout", "forms", "fixes", "default_fixes", "inputs"},
        required={"title", "forms", "fixes"},
    )
    # the modules its scripts import beside them (instruments.py): readable in the sandbox and part of each run's key
    inputs = tuple(
        _file(reader, item, f"{where}.inputs[{i}]", root)
        for i, item in enumerate(reader.strings(data.get("inputs", []), f"{where}.inputs"))
    )
    forms_raw = reader.mapping(data["forms"], f"{where}.forms", allowed=set(FORMS))
    forms: dict[FormName, Form] = {}
    for form_name, value in forms_raw.items():
        form = _read_form(reader, form_name, value, f"{where}.forms", root, inputs)
        forms[form.name] = form
    fixes = _read_fixes(reader, where, data["fixes"], set(forms), root)
    return Repro(
        name=name,
        title=reader.string(data["title"], f"{where}.title"),
        report=reader.string(data.get("report", ""), f"{where}.report"),
        expected_signature=_expected(reader, where, data),
        timeout=_timeout(reader, where, data),
        forms=forms,
        fixes=fixes,
        default_fixes=_default_fixes(reader, where, data, fixes),
    )


def _default_fixes(reader: _Reader, where: str, data: dict[str, Any], fixes: dict[str, Fix]) -> tuple[str, ...]:
    """The fixes ``repro NAME`` runs without ``--fix``: the report's code first, then each named one."""
    if "default_fixes" not in data:
        return ()
    names = reader.strings(data["default_fixes"], f"{where}.default_fixes")
    unknown = [name for name in names if name not in fixes]
    if unknown:
        raise reader.fail(f"{where}.default_fixes", f"{unknown[0]!r} is not one of its fixes ({', '.join(fixes)})")
    if not names or names[0] != "none":
        raise reader.fail(f"{where}.default_fixes", f"must start with 'none' (the report's code), got {list(names)}")
    return tuple(dict.fromkeys(names))


def _read_nightly(reader: _Reader, raw: Any, matrix: MatrixSpec, repros: Mapping[str, Repro]) -> NightlySpec:
    data = reader.mapping(raw, "nightly", allowed={"axes", "repros", "corpus"}, required={"axes", "repros"})
    axes = _pins(reader, data["axes"], "nightly.axes")
    for axis in axes:
        if axis == "deepspeed":
            raise reader.fail("nightly.axes.deepspeed", "leave it out: the nightly fills it with each new release")
        if axis not in matrix.axes and axis != "python":
            raise reader.fail(f"nightly.axes.{axis}", f"not an axis of matrix.axes ({', '.join(matrix.axes)})")
    names = reader.strings(data["repros"], "nightly.repros")
    for name in names:
        if name not in repros:
            raise reader.fail("nightly.repros", _unknown("repro", name, repros))
    corpus = reader.strings(data.get("corpus", []), "nightly.corpus")
    for name in corpus:  # a folder under corpus/, or 'all'
        check_name("corpus entry", name, f"{reader.path.name}: nightly.corpus")
    return NightlySpec(axes=axes, repros=names, corpus=corpus)


# Where a built package holds the checkout's matrix.yaml and repros/ (setup.py copies them there): the default matrix
# of an installed harness, run from any folder.
PACKAGED_PROJECT = Path(__file__).resolve().parent.parent / "data" / "project"


def default_config_path(cwd: Path | None = None) -> Path:
    """The matrix a command reads without ``--config``: ``./matrix.yaml`` where there is one (in a checkout, the file
    you edit), else the copy installed with the package (its repros beside it), else the checkout an editable
    install runs from. None of them: ``matrix.yaml``, so that the error names what is missing."""
    here = Path("matrix.yaml")
    if ((cwd or Path.cwd()) / here).is_file():
        return here
    checkout = Path(__file__).resolve().parents[3]  # src/reprobisect/config/load.py → the checkout
    for candidate in (PACKAGED_PROJECT / "matrix.yaml", checkout / "matrix.yaml"):
        if candidate.is_file() and (candidate.parent / "repros").is_dir():
            return candidate
    return here


def load_config(path: Path) -> Config:
    """Parse matrix.yaml; paths inside it are relative to its folder."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError as exc:
        msg = f"{path}: not found; run from the project root (or anywhere, installed) or pass --config PATH"
        raise ConfigError(msg) from exc
    except (OSError, UnicodeDecodeError) as exc:
        msg = f"{path}: cannot read it as UTF-8 text ({exc})"
        raise ConfigError(msg) from exc
    if len(text) > MAX_CONFIG_BYTES:
        msg = f"{path.name}: {len(text)} characters; a matrix file is at most {MAX_CONFIG_BYTES}"
        raise ConfigError(msg)
    try:
        raw = yaml.load(text, Loader=_StrictLoader)  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as exc:
        msg = f"{path.name}: not valid YAML: {exc}"
        raise ConfigError(msg) from exc
    reader = _Reader(path)
    top = reader.mapping(
        raw, "top level", allowed={"version", "default_cell", "matrix", "repros", "nightly"}, required={"repros"}
    )
    if top.get("version", 1) != 1:
        raise reader.fail("version", f"{top['version']!r} is not supported; this harness reads version 1")
    cell = reader.mapping(top.get("default_cell", {}), "default_cell", allowed=_keys(top.get("default_cell")))
    # Without default_cell: the newest deepspeed and lightning over the base interpreter's torch.
    default_cell = {} if cell else {"torch": "system", "deepspeed": "latest", "lightning": "latest"}
    default_cell.update(
        {k: check_pin(reader.string(v, f"default_cell.{k}"), f"{path.name}: default_cell.{k}") for k, v in cell.items()}
    )
    repros_raw = reader.mapping(top["repros"], "repros", allowed=_keys(top["repros"]))
    repros = {name: _read_repro(reader, name, value, path.resolve().parent) for name, value in repros_raw.items()}
    matrix = _read_matrix(reader, top.get("matrix") or {"axes": {k: [v] for k, v in default_cell.items()}})
    for key in default_cell:
        if key not in matrix.axes and key != "python":
            raise ConfigError(_unknown(f"{path.name}: default_cell", key, [*matrix.axes, "python"]))
    nightly = _read_nightly(reader, top["nightly"], matrix, repros) if "nightly" in top else None
    return Config(path=path, default_cell=default_cell, matrix=matrix, repros=repros, nightly=nightly)
