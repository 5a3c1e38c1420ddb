"""Read matrix.yaml once into frozen dataclasses; the only module that knows the YAML's shape.

Every error names the file, the key path, the bad value and what would be right.
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import yaml

from reprobisect.errors import ConfigError

__all__ = ["FORMS", "Config", "Fix", "Form", "Repro", "load_config"]

FormName = Literal["cuda", "cpu-shim", "cpu-deepspeed"]
FORMS: tuple[FormName, ...] = ("cuda", "cpu-shim", "cpu-deepspeed")
SHIMS = ("lightning-cpu",)


@dataclasses.dataclass(frozen=True, kw_only=True)
class Fix:
    """A named candidate fix: extra arguments the repro understands (a user-side workaround)."""

    name: str
    description: str
    args: tuple[str, ...] = ()
    form_args: Mapping[str, tuple[str, ...]] = dataclasses.field(default_factory=dict)

    def args_for(self, form: str) -> tuple[str, ...]:
        """The arguments for one form (forms whose scripts spell the workaround differently)."""
        return self.form_args.get(form, self.args)


@dataclasses.dataclass(frozen=True, kw_only=True)
class Form:
    """One way to run a repro: on CUDA as reported, through the CPU shim, or as a pure-DeepSpeed analogue."""

    name: FormName
    script: Path
    precision: str
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = dataclasses.field(default_factory=dict)
    shim: str | None = None
    distributed_env: bool = False

    @property
    def backend(self) -> Literal["cuda", "cpu"]:
        """Which kind of machine this form needs."""
        return "cuda" if self.name == "cuda" else "cpu"


@dataclasses.dataclass(frozen=True, kw_only=True)
class Repro:
    """A canonical bug with its forms and candidate fixes."""

    name: str
    title: str
    report: str
    expected_signature: str | None
    timeout: float
    forms: Mapping[FormName, Form]
    fixes: Mapping[str, Fix]


@dataclasses.dataclass(frozen=True, kw_only=True)
class Config:
    """The whole of matrix.yaml, parsed."""

    path: Path
    default_cell: Mapping[str, str]
    repros: Mapping[str, Repro]

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


def _read_form(reader: _Reader, name: str, raw: Any, where: str, root: Path) -> Form:
    if name not in FORMS:
        raise ConfigError(_unknown(f"{reader.path.name}: {where}", name, FORMS))
    data = reader.mapping(
        raw, f"{where}.{name}",
        allowed={"script", "precision", "args", "env", "shim", "distributed_env"},
        required={"script", "precision"},
    )
    script = root / reader.string(data["script"], f"{where}.{name}.script")
    if not script.is_file():
        raise reader.fail(f"{where}.{name}.script", f"{script} does not exist")
    shim = data.get("shim")
    if shim is not None and shim not in SHIMS:
        raise ConfigError(_unknown(f"{reader.path.name}: {where}.{name}.shim", str(shim), SHIMS))
    env = reader.mapping(data.get("env", {}), f"{where}.{name}.env", allowed=set(data.get("env", {}) or {}))
    return Form(
        name=name,
        script=script,
        precision=reader.string(data["precision"], f"{where}.{name}.precision"),
        args=reader.strings(data.get("args", []), f"{where}.{name}.args"),
        env={str(k): reader.string(v, f"{where}.{name}.env.{k}") for k, v in env.items()},
        shim=shim,
        distributed_env=bool(data.get("distributed_env", False)),
    )


def _read_repro(reader: _Reader, name: str, raw: Any, root: Path) -> Repro:
    where = f"repros.{name}"
    data = reader.mapping(
        raw, where,
        allowed={"title", "report", "expected_signature", "timeout", "forms", "fixes"},
        required={"title", "forms", "fixes"},
    )
    forms_raw = reader.mapping(data["forms"], f"{where}.forms", allowed=set(FORMS))
    forms: dict[FormName, Form] = {}
    for form_name, value in forms_raw.items():
        form = _read_form(reader, form_name, value, f"{where}.forms", root)
        forms[form.name] = form
    fixes_raw = reader.mapping(data["fixes"], f"{where}.fixes", allowed=set(data["fixes"] or {}))
    if "none" not in fixes_raw:
        raise reader.fail(f"{where}.fixes", "must define 'none' (the unmodified repro)")
    fixes = {}
    for fix_name, fix_raw in fixes_raw.items():
        fwhere = f"{where}.fixes.{fix_name}"
        fix = reader.mapping(fix_raw or {}, fwhere, allowed={"args", "description", "form_args"})
        per_form = reader.mapping(fix.get("form_args", {}), f"{fwhere}.form_args", allowed=set(forms))
        fixes[fix_name] = Fix(
            name=fix_name,
            description=reader.string(fix.get("description", ""), f"{fwhere}.description"),
            args=reader.strings(fix.get("args", []), f"{fwhere}.args"),
            form_args={f: reader.strings(v, f"{fwhere}.form_args.{f}") for f, v in per_form.items()},
        )
    timeout = data.get("timeout", 900)
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0:
        raise reader.fail(f"{where}.timeout", f"expected a positive number of seconds, got {timeout!r}")
    expected = data.get("expected_signature")
    return Repro(
        name=name,
        title=reader.string(data["title"], f"{where}.title"),
        report=reader.string(data.get("report", ""), f"{where}.report"),
        expected_signature=None if expected is None else reader.string(expected, f"{where}.expected_signature"),
        timeout=float(timeout),
        forms=forms,
        fixes=fixes,
    )


def load_config(path: Path) -> Config:
    """Parse matrix.yaml; paths inside it are relative to its folder."""
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        msg = f"{path}: not found; run from the project root or pass --config PATH"
        raise ConfigError(msg) from exc
    except yaml.YAMLError as exc:
        msg = f"{path.name}: not valid YAML: {exc}"
        raise ConfigError(msg) from exc
    reader = _Reader(path)
    top = reader.mapping(raw, "top level", allowed={"version", "default_cell", "repros"}, required={"repros"})
    if top.get("version", 1) != 1:
        raise reader.fail("version", f"{top['version']!r} is not supported; this harness reads version 1")
    cell = reader.mapping(
        top.get("default_cell", {}), "default_cell", allowed={"torch", "deepspeed", "lightning"}
    )
    default_cell = {"torch": "system", "deepspeed": "latest", "lightning": "latest"}
    default_cell.update({k: reader.string(v, f"default_cell.{k}") for k, v in cell.items()})
    repros_raw = reader.mapping(top["repros"], "repros", allowed=set(top["repros"] or {}))
    repros = {name: _read_repro(reader, name, value, path.resolve().parent) for name, value in repros_raw.items()}
    return Config(path=path, default_cell=default_cell, repros=repros)
