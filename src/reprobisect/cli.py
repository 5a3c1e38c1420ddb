"""Command line: ``reprobisect repro gan``, ``reprobisect env``. nox sessions call these."""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import shlex
import signal
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from reprobisect.cells.envs import base_interpreter, ensure_env, resolve_cell
from reprobisect.config.load import check_pin, load_config
from reprobisect.console import WIDTH, cut, next_step, runs_table, signature_legend
from reprobisect.errors import ConfigError, HarnessError
from reprobisect.model.record import Record
from reprobisect.report.load import flaky_runs, markdown_summary
from reprobisect.run.matrix import MatrixRequest, listed_cells, run_matrix
from reprobisect.run.reproduce import ReproRequest, reproduce
from reprobisect.run.sandbox import Confinement
from reprobisect.run.store import Store
from reprobisect.util.files import write_atomic

__all__ = ["main"]

PINNED = ("torch", "deepspeed", "lightning")


def _split(values: Sequence[str] | None) -> tuple[str, ...]:
    return tuple(item for value in values or () for item in value.split(",") if item)


def _default_base() -> str:
    """This interpreter when it has torch (a GPU image's python3), else the one the harness's venv was made from."""
    if importlib.util.find_spec("torch") is not None:
        return sys.executable
    return str(getattr(sys, "_base_executable", sys.executable))


def _confinement(args: argparse.Namespace) -> Confinement:
    return Confinement(sandbox=args.sandbox, network=args.network)


def _non_negative(text: str) -> int:
    """An argparse type: a whole number >= 0 (argparse turns the ValueError into a one-line usage error)."""
    value = int(text)
    if value < 0:
        msg = f"{text!r} is negative"
        raise ValueError(msg)
    return value


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", type=Path, default=Path("matrix.yaml"), help="the matrix file")
    parser.add_argument("--out", type=Path, default=Path("reports"), help="records, logs and summaries go here")
    parser.add_argument(
        "--envs",
        type=Path,
        default=Path(os.environ.get("REPROBISECT_ENVS", ".cells")),
        help="one venv per cell lives here (env REPROBISECT_ENVS)",
    )
    parser.add_argument(
        "--base-python",
        default=os.environ.get("REPROBISECT_BASE_PYTHON", _default_base()),
        help="interpreter cells are made from; 'system' torch is its torch",
    )
    for name in PINNED:
        parser.add_argument(
            f"--{name}",
            help=f"pin {name}: a version, a specifier, 'latest'" + (" or 'system'" if name == "torch" else ""),
        )
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
    parser.add_argument("--debug", action="store_true", help="show tracebacks of harness errors")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="reprobisect", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    repro = sub.add_parser("repro", help="run one repro's forms × fixes in one cell and print the table")
    repro.add_argument("repro", help="repro name from matrix.yaml (gan, zero3)")
    repro.add_argument(
        "--backend",
        choices=("auto", "cuda", "cpu"),
        default="auto",
        help="auto: the cuda form when torch sees a GPU, else the CPU forms",
    )
    repro.add_argument("--fix", action="append", help="fix name(s), comma-separated or repeated; default: all")
    repro.add_argument("--form", action="append", help="form(s) to run instead of the backend's")
    repro.add_argument("--repeat", type=int, default=1, help="run each form × fix N times")
    repro.add_argument("--resume", action="store_true", help="reuse stored records of identical runs")
    repro.add_argument("--timeout", type=float, help="seconds per run (default: the repro's)")
    _common(repro)
    env = sub.add_parser("env", help="build the cell and print its collect_env and ds_report")
    _common(env)
    _matrix_parser(sub)
    _nightly_parser(sub)
    bisect = sub.add_parser(
        "bisect", help="which release (or commit) changed the outcome; every change with --all-transitions"
    )
    bisect.add_argument("--repro", help="repro name from matrix.yaml")
    bisect.add_argument("--script", type=Path, help="bisect any script instead of a canonical repro")
    bisect.add_argument("--expect-signature", help="with --script: what counts as REPRODUCED")
    bisect.add_argument("--shim", action="store_true", help="with --script: through the Lightning CPU shim")
    bisect.add_argument("--axis", default="deepspeed", help="the package whose releases are searched")
    bisect.add_argument("--good", required=True, help="a release (or git revision) without the target")
    bisect.add_argument("--bad", required=True, help="a release (or git revision) with the target")
    bisect.add_argument("--backend", choices=("auto", "cuda", "cpu"), default="auto")
    bisect.add_argument("--form", help="the form to probe (default: cpu-deepspeed on the CPU, cuda on a GPU)")
    bisect.add_argument("--fix", default="none", help="the fix to probe (default: none)")
    bisect.add_argument("--signature", help="bad = this signature id (default: the repro's expected signature)")
    bisect.add_argument("--any-failure", action="store_true", help="bad = any failure")
    bisect.add_argument("--all-transitions", action="store_true", help="map every change of outcome in the range")
    bisect.add_argument("--repeat", type=int, default=1, help="runs per probe; disagreeing repeats mark it flaky")
    bisect.add_argument("--pre", action="store_true", help="include pre-releases")
    bisect.add_argument("--git", type=Path, help="bisect the commits of a local clone of the --axis package")
    bisect.add_argument("--fresh", action="store_true", help="re-run probes that already have a record")
    bisect.add_argument("--timeout", type=float, help="seconds per run")
    _common(bisect)
    sub.add_parser("report", add_help=False, help="records -> runs.parquet/csv, report.md/html, plots; --baseline DIR")
    wheels = sub.add_parser("wheelhouse", help="build a wheelhouse for offline cells (GPU nodes without network)")
    wheels.add_argument("--dest", type=Path, default=Path(".whl"), help="folder to fill")
    wheels.add_argument("--target-python", default="3.12", help="Python version of the offline machine")
    wheels.add_argument("--system", action="append", default=[], help="package the target interpreter already has")
    wheels.add_argument("--with", dest="extra", action="append", default=[], help="another requirement to include")
    _common(wheels)
    bench = sub.add_parser("bench", help="cell build and run overhead figures, side by side")
    bench.add_argument("--runs", type=int, default=5, help="runs of the repro for the overhead ratio")
    bench.add_argument("--no-pip", action="store_true", help="skip the virtualenv+pip comparison")
    _common(bench)
    return parser


def _matrix_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    matrix = sub.add_parser("matrix", help="run repros across the matrix's cells (one venv per cell)")
    matrix.add_argument("--repro", action="append", help="repro name(s) from matrix.yaml; default: all")
    matrix.add_argument("--script", type=Path, help="run any script (e.g. pasted from an issue) instead of a repro")
    matrix.add_argument("--expect-signature", help="with --script: the known name or id that counts as REPRODUCED")
    matrix.add_argument("--shim", action="store_true", help="with --script: run it through the Lightning CPU shim")
    matrix.add_argument("--backend", choices=("auto", "cuda", "cpu"), default="auto")
    matrix.add_argument(
        "--select", action="append", default=[], help="keep cells where AXIS=PATTERN, e.g. 'deepspeed=0.18.*'"
    )
    matrix.add_argument("--cell", action="append", default=[], help="run only the cell(s) with this id")
    matrix.add_argument("--python", help="replace the python axis (comma-separated values)")
    matrix.add_argument("--fix", action="append", help="fix name(s); default: all")
    matrix.add_argument("--form", action="append", help="form(s) instead of the backend's")
    matrix.add_argument("--jobs", type=int, default=1, help="runs at a time (each gets its GPU or share of cores)")
    matrix.add_argument("--repeat", type=int, default=1, help="run each unit N times")
    matrix.add_argument("--fresh", action="store_true", help="re-run units that already have a record")
    matrix.add_argument("--refresh-index", action="store_true", help="ask the index again for ranges and latest")
    matrix.add_argument("--timeout", type=float, help="seconds per run (default: the repro's)")
    matrix.add_argument("--list", action="store_true", help="list the cells with their ids and stop")
    matrix.add_argument("--list-json", action="store_true", help="print the cells as a GitHub Actions matrix and stop")
    _common(matrix)


def _nightly_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    nightly = sub.add_parser(
        "nightly", help="run DeepSpeed releases newer than the baseline, compare, bisect; exit 1 on a regression"
    )
    nightly.add_argument(
        "--state",
        type=Path,
        default=Path("reports/nightly/state"),
        help="the baseline and history, carried from night to night (a CI artifact)",
    )
    nightly.add_argument("--backend", choices=("auto", "cuda", "cpu"), default="auto")
    nightly.add_argument("--up-to", help="consider releases up to this one only (what was out on a past night)")
    nightly.add_argument("--baseline-release", help="(re)seed: run the slice on this release and make it the baseline")
    nightly.add_argument("--repro", action="append", help="repro name(s); default: matrix.yaml's nightly.repros")
    nightly.add_argument("--form", action="append", help="form(s) instead of the backend's")
    nightly.add_argument("--fix", action="append", help="fix name(s); default: all")
    nightly.add_argument("--jobs", type=int, default=1, help="runs at a time")
    nightly.add_argument("--timeout", type=float, help="seconds per run (default: the repro's)")
    nightly.add_argument("--max-releases", type=int, default=3, help="run at most the N newest new releases")
    nightly.add_argument("--max-bisects", type=int, default=3, help="bisect at most N changed runs")
    nightly.add_argument("--fail-on-change", action="store_true", help="exit 1 on any change, not only regressions")
    nightly.add_argument("--keep-baseline", action="store_true", help="do not advance the baseline")
    nightly.add_argument("--repo", default=None, help="DeepSpeed's git repository, for --deepspeed REF")
    _common(nightly)
    nightly.set_defaults(out=Path("reports/nightly/latest"))
    for action in nightly._actions:
        if action.dest == "deepspeed":
            action.help = "a release (instead of the new ones) or a git ref of DeepSpeed such as main (a VCS cell)"


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


def _print_runs(records: Sequence[Record]) -> None:
    """The end of a session on the terminal: the table, the signatures in full, the runs not to trust."""
    print()
    print(runs_table(records))
    legend = signature_legend(records)
    if legend:
        print()
        print("\n".join(legend))
    for line in flaky_runs(records):
        print(cut(line, WIDTH))


def _cmd_repro(args: argparse.Namespace) -> int:
    config = load_config(args.config)
    request = ReproRequest(
        repro=args.repro,
        backend=args.backend,
        fixes=_split(args.fix),
        forms=_split(args.form),
        pins=_pins(args),
        repeat=args.repeat,
        resume=args.resume,
        timeout=args.timeout,
        cpus_per_run=args.cpus_per_run,
        confinement=_confinement(args),
    )
    store = Store(args.out)
    records = reproduce(
        config, request, base=base_interpreter(args.base_python), store=store, envs_dir=args.envs, environ=os.environ
    )
    _print_runs(records)
    hint = next_step(
        records,
        repro=args.repro,
        expected=config.repro(args.repro).expected_signature,
        stored=store.iter_records(args.repro),
        command=f"nox -s repro_{args.repro}",
        pins=_pins(args),
    )
    if hint is not None:
        print()
        print("\n".join(hint.lines()))
    command = _reproduce_command(args)
    summary = args.out / f"summary-{args.repro}.md"
    summary.parent.mkdir(parents=True, exist_ok=True)
    title = f"{config.repro(args.repro).title}"
    write_atomic(summary, markdown_summary(records, title=title, command=command), what="the session summary")
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


def _check_script(script: Path | None) -> None:
    """A --script that does not exist is bad input: say so before anything is planned or written."""
    if script is not None and not script.is_file():
        msg = f"--script {script}: no such file"
        raise ConfigError(msg)


def _axis_values(value: str) -> tuple[str, ...]:
    """``0.16.4,0.19.8`` is two values; a specifier such as ``>=0.16,<0.20`` is one."""
    if value.startswith(("<", ">", "=", "!", "~")):
        return (value,)
    return tuple(v.strip() for v in value.split(",") if v.strip())


def _matrix_request(args: argparse.Namespace) -> MatrixRequest:
    axes = {name: _axis_values(getattr(args, name)) for name in (*PINNED, "python") if getattr(args, name)}
    _check_script(args.script)
    if args.expect_signature and not args.script:
        msg = "--expect-signature goes with --script (a canonical repro's expectation lives in matrix.yaml)"
        raise ConfigError(msg)
    if args.script and args.repro:
        msg = "--script and --repro contradict each other: run a canonical repro or a script, not both"
        raise ConfigError(msg)
    if args.jobs < 1 or args.repeat < 1:
        msg = f"--jobs {args.jobs} / --repeat {args.repeat}: both must be at least 1"
        raise ConfigError(msg)
    return MatrixRequest(
        repros=_split(args.repro),
        script=args.script,
        expect_signature=args.expect_signature,
        shim=args.shim,
        backend=args.backend,
        axes=axes,
        select=tuple(args.select),
        fixes=_split(args.fix),
        forms=_split(args.form),
        jobs=args.jobs,
        repeat=args.repeat,
        fresh=args.fresh,
        refresh_index=args.refresh_index,
        timeout=args.timeout,
        cpus_per_run=args.cpus_per_run,
        confinement=_confinement(args),
    )


def _cmd_matrix(args: argparse.Namespace) -> int:
    config = load_config(args.config)
    request = _matrix_request(args)
    base = base_interpreter(args.base_python)
    if args.list or args.list_json:
        cells = listed_cells(config, request, base, args.envs)
        print(
            json.dumps({"include": cells})
            if args.list_json
            else "\n".join(f"{c['cell']}  {c['status']}" for c in cells)
        )
        return 0
    records = run_matrix(
        config,
        request,
        base=base,
        store=Store(args.out),
        envs_dir=args.envs,
        environ=os.environ,
        cells=tuple(args.cell),
    )
    _print_runs(records)
    summary = args.out / "summary-matrix.md"
    summary.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(
        summary,
        markdown_summary(records, title="Matrix", command="nox -s matrix -- " + shlex.join(sys.argv[2:])),
        what="the matrix summary",
    )
    print(f"\nRecords: {args.out / 'records'}  Summary: {summary}")
    return 0


def _cmd_nightly(args: argparse.Namespace) -> int:
    from reprobisect.nightly.run import DEEPSPEED_REPO, NightlyRequest, run_nightly

    if min(args.jobs, args.max_releases) < 1 or args.max_bisects < 0:
        msg = f"--jobs {args.jobs} / --max-releases {args.max_releases} must be >= 1, --max-bisects >= 0"
        raise ConfigError(msg)
    if args.baseline_release and (args.deepspeed or args.up_to):
        msg = "--baseline-release seeds the baseline: it goes without --deepspeed and --up-to"
        raise ConfigError(msg)
    request = NightlyRequest(
        state=args.state,
        out=args.out,
        backend=args.backend,
        deepspeed=args.deepspeed,
        up_to=args.up_to,
        baseline_release=args.baseline_release,
        pins={k: v for k, v in _pins(args).items() if k != "deepspeed"},
        repros=_split(args.repro),
        forms=_split(args.form),
        fixes=_split(args.fix),
        jobs=args.jobs,
        timeout=args.timeout,
        max_releases=args.max_releases,
        max_bisects=args.max_bisects,
        fail_on_change=args.fail_on_change,
        keep_baseline=args.keep_baseline,
        repo=args.repo or DEEPSPEED_REPO,
        confinement=_confinement(args),
    )
    result = run_nightly(
        load_config(args.config),
        request,
        base=base_interpreter(args.base_python),
        envs_dir=args.envs,
        environ=os.environ,
    )
    return result.exit_code


def _cmd_bisect(args: argparse.Namespace) -> int:
    from reprobisect.bisect.probes import BisectRequest, run_bisect

    if bool(args.script) == bool(args.repro):
        msg = "bisect needs exactly one of --repro NAME or --script PATH"
        raise ConfigError(msg)
    _check_script(args.script)
    if args.signature and args.any_failure:
        msg = "--signature and --any-failure contradict each other: choose one target"
        raise ConfigError(msg)
    pins = _pins(args)
    pins.pop(args.axis, None)
    request = BisectRequest(
        repro=args.repro,
        axis=args.axis,
        good=args.good,
        bad=args.bad,
        script=args.script,
        expect_signature=args.expect_signature,
        shim=args.shim,
        backend=args.backend,
        form=args.form,
        fix=args.fix,
        target=args.signature,
        any_failure=args.any_failure,
        all_transitions=args.all_transitions,
        repeat=args.repeat,
        prereleases=args.pre,
        pins=pins,
        git=args.git,
        fresh=args.fresh,
        timeout=args.timeout,
        confinement=_confinement(args),
    )
    _, report, path = run_bisect(
        load_config(args.config),
        request,
        base=base_interpreter(args.base_python),
        store=Store(args.out),
        envs_dir=args.envs,
        environ=os.environ,
    )
    print()
    for t in report["transitions"]:
        between = f" (skipped between: {', '.join(t['skipped_between'])})" if t["skipped_between"] else ""
        print(
            f"{t['last']} {t['from']['outcome']} {t['from']['signature_id'] or ''} -> "
            f"{t['first']} {t['to']['outcome']} {t['to']['signature_id'] or ''}{between}"
        )
        for side in ("from", "to"):
            if t[side]["signature"]:
                print(f"    {t[side]['signature_id']}: {t[side]['signature']}")
    if not report["transitions"]:
        print(
            "No transition: the outcome is the same at both ends"
            + (" and every probe between." if args.all_transitions else ".")
        )
    for skip in report["skipped"]:
        print(f"skipped {skip['version']}: {skip['why']}")
    print(
        f"\n{report['probes_made']} probes over {report['releases_in_range']} versions; "
        f"{report['runs']} runs executed, {report['reused']} reused from records. Report: {path}"
    )
    return 0


def _cmd_wheelhouse(args: argparse.Namespace) -> int:
    from reprobisect.cells.index import IndexCache
    from reprobisect.cells.wheelhouse import build_wheelhouse
    from reprobisect.config.matrix import resolve_value

    base = base_interpreter(args.base_python)
    index = IndexCache(args.envs.resolve() / "index-cache.json", base.executable)
    versions = resolve_value("deepspeed", args.deepspeed or "latest", index.versions, prereleases=False)
    files = build_wheelhouse(
        base.executable,
        versions,
        args.dest,
        python_version=args.target_python,
        excluded=_split(args.system),
        extra=args.extra,
    )
    total = sum(f.stat().st_size for f in files) / 2**20
    print(f"{len(files)} files, {total:.1f} MiB in {args.dest}")
    return 0


def _cmd_bench(args: argparse.Namespace) -> int:
    from reprobisect.run.bench import format_bench, run_bench

    result = run_bench(
        load_config(args.config),
        base_interpreter(args.base_python),
        _pins(args),
        runs=args.runs,
        with_pip=not args.no_pip,
        environ=os.environ,
    )
    print()
    print(format_bench(result))
    return 0


def _terminate(signum: int, frame: object) -> None:
    """SIGTERM takes the path of Ctrl-C: the running child's process group is stopped, no record is half-written."""
    raise KeyboardInterrupt


EXIT_STATUS_FILE = "exit-status"
_VALUE_OPTIONS = (*PINNED, "python", "good", "bad", "repo", "baseline_release", "up_to", "signature")


def _check_values(args: argparse.Namespace) -> None:
    """Every option that becomes a version, a ref or a URL for pip, uv or git: never an option in disguise."""
    for name in _VALUE_OPTIONS:
        value = getattr(args, name, None)
        if isinstance(value, str):
            check_pin(value, f"--{name.replace('_', '-')}")


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; harness errors print one message and exit with their own code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    signal.signal(signal.SIGTERM, _terminate)
    # Started in the background by a non-interactive shell, SIGINT arrives ignored: Ctrl-C must still stop a run.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    if argv[:1] == ["report"]:  # its own parser: records -> runs.parquet/csv, report.md/html, plots, baseline diff
        from reprobisect.commands.report import main as report_main

        return report_main(argv[1:])
    args = _parser().parse_args(argv)
    handlers = {
        "repro": _cmd_repro,
        "env": _cmd_env,
        "matrix": _cmd_matrix,
        "bench": _cmd_bench,
        "bisect": _cmd_bisect,
        "nightly": _cmd_nightly,
        "wheelhouse": _cmd_wheelhouse,
    }
    # nox turns every failing exit into 1: the nightly leaves its verdict (0 or 1) in --out, so a workflow can
    # tell a regression (a file that says 1) from a harness error (no file).
    status_file = args.out / EXIT_STATUS_FILE if args.command == "nightly" else None
    if status_file is not None:
        status_file.unlink(missing_ok=True)  # last night's must not speak for tonight
    code: int | str = "running"
    try:
        _check_values(args)
        if args.wheelhouse and args.command != "wheelhouse":
            from reprobisect.cells.wheelhouse import use_wheelhouse

            use_wheelhouse(args.wheelhouse)
        code = handlers[args.command](args)
        return code
    except HarnessError as exc:
        code = exc.return_code
        if args.debug:
            raise
        print(f"reprobisect: error: {exc}", file=sys.stderr)
        return exc.return_code
    finally:
        _write_status(status_file, code)


def _write_status(path: Path | None, code: int | str) -> None:
    """The nightly's verdict (0 or 1) beside its outputs; an error writes none (bad input writes nothing)."""
    if path is not None and code in (0, 1):
        with contextlib.suppress(HarnessError):
            write_atomic(path, f"{code}\n", what="the exit status")


if __name__ == "__main__":
    sys.exit(main())
