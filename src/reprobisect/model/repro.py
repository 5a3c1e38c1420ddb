"""What a repro is: a canonical bug, the forms it runs in and its candidate fixes (read from matrix.yaml by
``config.load``, the only module that knows the YAML)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import Literal

__all__ = ["FORMS", "SHIMS", "Backend", "Fix", "Form", "FormName", "Repro"]

Backend = Literal["cuda", "cpu"]
FormName = Literal["cuda", "cpu-shim", "cpu-deepspeed"]
FORMS: tuple[FormName, ...] = ("cuda", "cpu-shim", "cpu-deepspeed")
SHIMS = ("lightning-cpu",)


@dataclasses.dataclass(frozen=True, kw_only=True)
class Fix:
    """A named candidate fix.

    One of: extra arguments the repro understands (a user-side workaround); a patch applied to an
    installed package, in a private copy used by this fix's runs only; or package overrides (another
    version, a VCS ref, a local path) that make the fix run in a cell of its own.
    """

    name: str
    description: str
    args: tuple[str, ...] = ()
    form_args: Mapping[str, tuple[str, ...]] = dataclasses.field(default_factory=dict)
    patch: Path | None = None
    patch_strip: int = 1
    override: Mapping[str, str] = dataclasses.field(default_factory=dict)

    @property
    def kind(self) -> str:
        """``patch``, ``override``, ``args`` or ``none`` (the unmodified repro)."""
        if self.patch is not None:
            return "patch"
        if self.override:
            return "override"
        return "args" if self.args or self.form_args else "none"

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
    def backend(self) -> Backend:
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
