"""Command line: ``reprobisect repro gan``, ``reprobisect env``. nox sessions call these."""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from reprobisect.config import load_config
from reprobisect.envs import base_interpreter, ensure_env, resolve_cell
from reprobisect.errors import HarnessError
from reprobisect.report import markdown_summary, runs_table
from reprobisect.reproduce import ReproRequest, reproduce
from reprobisect.store import Store

__all__ = ["main"]

PINNED = ("torch", "deepspeed", "lightning")


def _split(values: Sequence[str] | None) -> tuple[str, ...]:
    return tuple(item for value in values or () for item in value.split(",") if item)


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", type=Path, default=Path("matrix.yaml"), help="the matrix file")
    parser.add_argument("--out", type=Path, default=Path("reports"), help="records, logs and summaries go here")
    parser.add_argument("--envs", type=Path, default=Path(os.environ.get("REPROBISECT_ENVS", ".cells")),
                        help="one venv per cell lives here (env REPROBISECT_ENVS)")
    parser.add_argument("--base-python", default=os.environ.get("REPROBISECT_BASE_PYTHON", sys.executable),
                        help="interpreter cells are made from; 'system' torch is its torch")
    for name in PINNED:
        parser.add_argument(f"--{name}", help=f"pin {name}: a version, a specifier, 'latest'"
                            + (" or 'system'" if name == "torch" else ""))
    parser.add_argument("--debug", action="store_true", help="show tracebacks of harness errors")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="reprobisect", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    repro = sub.add_parser("repro", help="run one repro's forms × fixes in one cell and print the table")
    repro.add_argument("repro", help="repro name from matrix.yaml (gan, zero3)")
    repro.add_argument("--backend", choices=("auto", "cuda", "cpu"), default="auto",
                       help="auto: the cuda form when torch sees a GPU, else the CPU forms")
    repro.add_argument("--fix", action="append", help="fix name(s), comma-separated or repeated; default: all")
    repro.add_argument("--form", action="append", help="form(s) to run instead of the backend's")
    repro.add_argument("--repeat", type=int, default=1, help="run each form × fix N times")
    repro.add_argument("--resume", action="store_true", help="reuse stored records of identical runs")
    repro.add_argument("--timeout", type=float, help="seconds per run (default: the repro's)")
    _common(repro)
    env = sub.add_parser("env", help="build the cell and print its collect_env and ds_report")
    _common(env)
    return parser


def _pins(args: argparse.Namespace) -> dict[str, str]:
    return {name: getattr(args, name) for name in PINNED if getattr(args, name)}


def _reproduce_command(args: argparse.Namespace) -> str:
    """The nox command that re-runs exactly this selection (pins made exact from the records)."""
    extra: list[str] = []
    for name in PINNED:
        if getattr(args, name):
            extra += [f"--{name}", getattr(args, name)]
    if args.backend != "auto":
        extra += ["--backend", args.backend]
    for option in ("fix", "form"):
        if getattr(args, option):
            extra += [f"--{option}", ",".join(_split(getattr(args, option)))]
    return f"nox -s repro_{args.repro}" + (f" -- {shlex.join(extra)}" if extra else "")


def _cmd_repro(args: argparse.Namespace) -> int:
    config = load_config(args.config)
    request = ReproRequest(
        repro=args.repro, backend=args.backend, fixes=_split(args.fix), forms=_split(args.form),
        pins=_pins(args), repeat=args.repeat, resume=args.resume, timeout=args.timeout,
    )
    store = Store(args.out)
    records = reproduce(config, request, base=base_interpreter(args.base_python), store=store,
                        envs_dir=args.envs, environ=os.environ)
    print()
    print(runs_table(records))
    command = _reproduce_command(args)
    summary = args.out / f"summary-{args.repro}.md"
    summary.parent.mkdir(parents=True, exist_ok=True)
    title = f"{config.repro(args.repro).title}"
    summary.write_text(markdown_summary(records, title=title, command=command), encoding="utf-8")
    print(f"\nRecords: {args.out / 'records' / args.repro}  Summary: {summary}")
    return 0


def _cmd_env(args: argparse.Namespace) -> int:
    base = base_interpreter(args.base_python)
    config = load_config(args.config)
    cell = resolve_cell(base, {**config.default_cell, **_pins(args)})
    env = ensure_env(cell, base, args.envs)
    print(f"Cell {cell.id}: {env.path} ({'reused' if env.reused else 'built'}; torch from {cell.torch_source})\n")
    subprocess.run([str(env.python), "-m", "torch.utils.collect_env"], check=False)
    ds_report = env.path / "bin" / "ds_report"
    if ds_report.exists():
        path = f"{env.path / 'bin'}{os.pathsep}{os.environ.get('PATH', os.defpath)}"
        subprocess.run([str(ds_report)], check=False, env={**os.environ, "PATH": path})
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; harness errors print one message and exit with their own code."""
    args = _parser().parse_args(argv)
    handlers = {"repro": _cmd_repro, "env": _cmd_env}
    try:
        return handlers[args.command](args)
    except HarnessError as exc:
        if args.debug:
            raise
        print(f"reprobisect: error: {exc}", file=sys.stderr)
        return exc.return_code


if __name__ == "__main__":
    sys.exit(main())
