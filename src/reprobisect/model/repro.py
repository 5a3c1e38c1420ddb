"""What a repro is: a canonical bug, the forms it runs in and its candidate fixes (read from matrix.yaml by
``config.load``, the only module that knows the YAML)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import Literal

from reprobisect.util.invocation import rerun_head
from reprobisect.util.redact import register_secret_env

__all__ = ["FORMS", "SHIMS", "Backend", "Fix", "Form", "FormName", "Repro", "repro_head", "script_forms"]

# Repros with a nox session of their own (noxfile.py); any other is re-run through ``nox -s repro -- NAME``.
SESSIONS = ("gan", "zero3")

Backend = Literal["cuda", "cpu"]
FormName = Literal["cuda", "cuda-bf16", "cpu-shim", "cpu-deepspeed"]
# cuda: the report's code as filed (its precision); cuda-bf16: the same on the GPU in the other half precision
FORMS: tuple[FormName, ...] = ("cuda", "cuda-bf16", "cpu-shim", "cpu-deepspeed")
SHIMS = ("lightning-cpu",)


@dataclasses.dataclass(frozen=True, kw_only=True)
class Fix:
    """A named candidate fix.

    One of: extra arguments the repro understands (a user-side workaround); environment variables set for
    the run; a patch applied to an installed package, in a private copy used by this fix's runs only; or
    package overrides (another version, a VCS ref, a local path) that make the fix run in a cell of its own.
    ``cli`` holds the command-line options that defined it (``--fix-env NAME=...``), empty for matrix.yaml's.
    """

    name: str
    description: str
    args: tuple[str, ...] = ()
    form_args: Mapping[str, tuple[str, ...]] = dataclasses.field(default_factory=dict)
    patch: Path | None = None
    patch_strip: int = 1
    override: Mapping[str, str] = dataclasses.field(default_factory=dict)
    env: Mapping[str, str] = dataclasses.field(default_factory=dict)
    cli: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        register_secret_env(self.env)  # a secret's value (--fix-env, matrix.yaml) is hidden once a fix holds it

    @property
    def kind(self) -> str:
        """``patch``, ``override``, ``args``, ``env`` or ``none`` (the unmodified repro)."""
        if self.patch is not None:
            return "patch"
        if self.override:
            return "override"
        if self.args or self.form_args:
            return "args"
        return "env" if self.env else "none"

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
    # Files the run reads besides its script (a package's test files: ``--pytest``): readable in the sandbox, and
    # their content is part of what decides the outcome. ``pytest``: the run needs pytest in its cell.
    inputs: tuple[Path, ...] = ()
    pytest: bool = False
    # The file a fix with arguments runs (the report's code with the fixes' flags: ``gan_fabric_zero1_fixes.py``), so
    # that ``script`` holds the report's code and nothing else; None: every fix runs ``script``.
    fix_script: Path | None = None

    def __post_init__(self) -> None:
        register_secret_env(self.env)  # a secret's value (--env, matrix.yaml) is hidden once a form holds it

    def script_for(self, fix: Fix) -> Path:
        """The file a run of ``fix`` starts: ``fix_script`` for a fix with arguments where the form has one, else the
        form's script (``none``, a patch, an override: the report's code as it is)."""
        if self.fix_script is not None and fix.args_for(self.name):
            return self.fix_script
        return self.script

    @property
    def backend(self) -> Backend:
        """Which kind of machine this form needs."""
        return "cuda" if self.name.startswith("cuda") else "cpu"


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
    # The command that re-runs it, up to the cell's pins: ``nox -s repro_gan --`` for a canonical repro (the
    # default), ``nox -s triage -- issue.py`` for a script; the script's own arguments follow a last ``--``.
    rerun: tuple[str, ...] = ()
    script_args: tuple[str, ...] = ()  # a script's own arguments, given after the command's ``--``
    # Whether it prints a step event per step: then a failure before the first one died at "setup"; a pasted
    # script's failure without steps died somewhere unknown ("-"), not in a setup it never announced
    reports_steps: bool = True
    # What ``repro NAME`` runs when no --fix is given (``none`` first): the report's code and the fixes that answer
    # the report; empty: every fix. ``--fix all`` runs every fix.
    default_fixes: tuple[str, ...] = ()

    def rerun_command(self, cell_options: list[str], form: str, fix: Fix) -> list[str]:
        """The words of a command that re-runs one form and fix of this repro in a cell given by its options."""
        head = list(self.rerun) or repro_head(self.name)
        tail = ["--", *self.script_args] if self.script_args else []
        return [*head, *cell_options, "--form", form, "--fix", fix.name, *fix.cli, *tail]


def repro_head(name: str) -> list[str]:
    """The words that run a repro of matrix.yaml by name, its options to follow, where the harness runs: its own
    nox session (``nox -s repro_gan --``) or ``nox -s repro -- NAME`` in a checkout, ``reprobisect repro NAME``
    installed (``util.invocation``)."""
    if name in SESSIONS:
        return rerun_head(f"repro_{name}", ["repro", name])
    return [*rerun_head("repro", ["repro"]), name]


def script_forms(
    script: Path, *, args: tuple[str, ...] = (), shim: bool = False, inputs: tuple[Path, ...] = (), pytest: bool = False
) -> dict[FormName, Form]:
    """The forms of a repro made from any script: as written on CUDA, and one CPU form.

    The cuda form gets a one-process distributed environment (torchrun's variables), as the canonical cuda
    forms have: without it Lightning probes MPI, and on a GPU image with MPI installed a pasted script dies
    "before MPI_INIT". On the CPU the script runs with DeepSpeed's CPU accelerator (``cpu-deepspeed``) or, with
    ``shim``, through the Lightning CPU shim (``cpu-shim``). ``args`` go to the script in both. A package's own tests
    (``pytest``) get no distributed environment: they run as their project's CI runs them, plain ``python -m pytest``
    (Lightning's ``test_deepspeed_strategy_env_variables[Windows]`` asserts that no ``RANK`` or ``MASTER_PORT`` is set).
    """
    cpu_name: FormName = "cpu-shim" if shim else "cpu-deepspeed"
    cpu = Form(
        name=cpu_name,
        script=script,
        precision="as written",
        args=args,
        env={"DS_ACCELERATOR": "cpu"},
        shim="lightning-cpu" if shim else None,
        distributed_env=not shim and not pytest,
        inputs=inputs,
        pytest=pytest,
    )
    cuda = Form(
        name="cuda",
        script=script,
        precision="as written",
        args=args,
        distributed_env=not pytest,
        inputs=inputs,
        pytest=pytest,
    )
    return {"cuda": cuda, cpu_name: cpu}
