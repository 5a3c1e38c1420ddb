"""Measure a corpus entry's truth by hand, outside the harness: one plain venv per release, ``python issue.py``.

    python tools/corpus_truth.py corpus/ds-bf16-stray-grad                 # every release truth.toml lists
    python tools/corpus_truth.py corpus/ds-bf16-stray-grad --releases 0.16.4,0.16.5
    python tools/corpus_truth.py corpus/ds-bf16-stray-grad --git CLONE --commit b418cf6c1 --commit b418cf6c1~1
    python tools/corpus_truth.py corpus/NAME --partner-releases 0.14.0,0.14.1   # an interaction entry's cells

Why a separate tool, and why it imports nothing of ``reprobisect``: the corpus measures the harness, so its truth
must not come from the harness. Each release gets a venv of its own made with ``uv venv --system-site-packages``
from the interpreter that runs this tool (its torch is the pinned one, or the pin is installed into the venv), the
package installed with ``uv pip`` from whatever index uv is configured with, and ``issue.py`` run in a scratch copy
of the entry folder with a plain environment (``DS_ACCELERATOR=cpu`` on the cpu backend). What is kept: the exit
status, the last traceback's exception line (or the last line printed), the seconds. ``--commit REV`` builds the
package from a commit of a clone (``git archive``, ``DS_BUILD_OPS=0``, ``--no-build-isolation``) instead: the check
of an introducing or fixing pull request at its commit and at its parent.

A performance entry (``[slowdown]`` in truth.toml) is run ``repeats`` times a release or commit, with the
harness's ``repros/instruments.py`` beside the script (a helper that prints one ``@@repro`` line a step, nothing
more); each run's median step (its first tenth, at least one step, left out as warm-up) goes to ``step_ms``.

An interaction entry (kind ``interaction``: ``package`` × ``partner``) is measured on every cell of its grid, each
a venv of its own with the package's release, the partner's release and the other pins (a torch axis is the
venv's torch, installed as a torch pin is); each cell's row goes to ``[cells]`` as ``"ROW|COLUMN"``. A python axis
is not measured here (each cell would need its own interpreter): measure such a grid by hand.

It rewrites only the part of truth.toml below the marker line (``[runs]``, ``[commits]`` and ``[cells]``, merged with
what is there), and packs every log into ``truth-logs.tar.xz`` beside it (members replaced by name, fixed mtimes).
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import hashlib
import io
import json
import os
import re
import shutil
import site
import subprocess
import sys
import tarfile
import tempfile
import time
import tomllib
from collections.abc import Iterator
from pathlib import Path

MARKER = "# --- measured by tools/corpus_truth.py: everything below is rewritten; do not edit by hand ---"
LOGS = "truth-logs.tar.xz"
_PASSED_ENV = ("PATH", "HOME", "LANG", "TMPDIR", "USER", "LD_LIBRARY_PATH")  # a plain shell's, nothing of ours
# and a GPU node's own settings (its CUDA, the NCCL and NVSHMEM switches its image sets, the arch to compile ops for)
_PASSED_PREFIXES = ("CUDA_", "NCCL_", "NVSHMEM_", "TORCH_CUDA_ARCH_LIST", "TORCH_SYMM_MEM_")
_NOT_BUILT = {"blogs", "docs", "examples", "tests", "benchmarks", "docker", "azure", ".github", "images"}
_LAYOUT = "tx"  # venvs made with torch excluded from uv's resolution (older ones hold uv's own torch: not reused)
_EXCEPTION_LINE = re.compile(r"^[A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt|Warning|Failure)\b.*$")


def _sh(cmd: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, text=True, capture_output=True, check=False, **kwargs)  # type: ignore[call-overload,no-any-return]


def last_line(log: str, status: int) -> str:
    """The exception line of the last traceback (``Type: message``), else the last non-empty line; "" on exit 0."""
    if status == 0:
        return ""
    lines = log.splitlines()
    starts = [i for i, line in enumerate(lines) if "Traceback (most recent call last):" in line]
    if starts:
        for line in lines[starts[-1] + 1 :]:
            text = re.sub(r"^\[?rank\d+\]?:\s?", "", line)
            if text and not text.startswith(" ") and _EXCEPTION_LINE.match(text):
                return text.strip()[:300]
    if status < 0:
        return f"signal {-status}"
    tail = next((line for line in reversed(lines) if line.strip()), "")
    return f"exit {status}: {tail.strip()[:280]}"


def _venv(work: Path, key: str, pins: dict[str, str]) -> Path:
    """A venv over this interpreter (its torch) named by what goes in it; made once."""
    folder = work / "venvs" / f"{key}-{_LAYOUT}"
    python = folder / "bin" / "python"
    if python.exists():
        return python
    if _use_uv():
        made = _sh(["uv", "venv", "-q", "--system-site-packages", "--python", sys.executable, str(folder)])
    else:  # a machine without uv (an offline GPU node): the standard library's venv, pip from this interpreter
        made = _sh([sys.executable, "-m", "venv", "--without-pip", "--system-site-packages", str(folder)])
    if made.returncode:
        raise SystemExit(f"making the venv failed for {key}: {made.stderr[-2000:]}")
    _see_this_interpreters_packages(python)
    torch_pin = pins.get("torch", "system")
    if torch_pin != "system":
        # pip, not uv: pip sees the local CPU build of torch (notes/cpu-deepspeed.md)
        done = _sh([*_pip(python), "install", "-q", f"torch=={torch_pin}"])
        if done.returncode:
            shutil.rmtree(folder)
            raise SystemExit(f"torch=={torch_pin} did not install: {done.stderr[-2000:]}")
    return python


def _use_uv() -> bool:
    """uv where it is installed, unless ``CORPUS_TRUTH_INSTALLER=pip`` says otherwise: an offline node whose pip is
    pointed at a folder of wheels (``PIP_NO_INDEX``, ``PIP_FIND_LINKS``) while uv would still ask an index."""
    return os.environ.get("CORPUS_TRUTH_INSTALLER", "uv" if shutil.which("uv") else "pip") == "uv"


def _pip(python: Path) -> list[str]:
    """This interpreter's pip acting on the venv of ``python`` (a venv made without pip of its own)."""
    return [sys.executable, "-m", "pip", "--python", str(python)]


def _see_this_interpreters_packages(python: Path) -> None:
    """Where this interpreter is itself a venv (a GPU image's Python, whose torch lives in its venv), a venv made
    "with system site packages" sees only the base installation's; a .pth file adds this one's site folders, as
    the packages a plain ``pip install`` on that machine would build on."""
    if sys.prefix == sys.base_prefix:
        return
    version = f"python{sys.version_info[0]}.{sys.version_info[1]}"
    site_packages = python.parent.parent / "lib" / version / "site-packages"
    site_packages.mkdir(parents=True, exist_ok=True)
    (site_packages / "_truth_base_site.pth").write_text("\n".join(site.getsitepackages()) + "\n")


def _install(python: Path, requirements: list[str], pins: dict[str, str], env: dict[str, str] | None = None) -> str:
    """uv pip install into the venv; torch excluded from the resolution, so the one the venv already sees (this
    interpreter's, or the pinned one pip put there) is the one that runs: uv ignores the base's packages of a
    --system-site-packages venv and would otherwise put the newest torch from the index beside them."""
    if _use_uv():
        excludes = python.parent.parent / "uv-excludes.txt"
        excludes.write_text("torch\n")
        cmd = ["uv", "pip", "install", "--python", str(python), "--excludes", str(excludes), *requirements]
    else:  # pip keeps what the venv already sees (torch too); PIP_NO_INDEX/PIP_FIND_LINKS make it offline
        cmd = [*_pip(python), "install", "-q", *requirements]
    done = _sh(cmd, env=env)
    if done.returncode:
        shutil.rmtree(python.parent.parent)
        raise SystemExit(f"{' '.join(cmd)} failed:\n{done.stderr[-3000:]}")
    return f"$ {' '.join(cmd)}\n{done.stdout}{done.stderr}{_torch_check(python, pins)}"


def _torch_check(python: Path, pins: dict[str, str]) -> str:
    """The torch the venv imports, which must be the pinned one (this interpreter's for ``system``)."""
    wanted = pins.get("torch", "system")
    if wanted == "system":
        import torch  # only here: the tool itself needs no torch

        wanted = str(torch.__version__)
    code = "import torch; print(torch.__version__, torch.__file__)"
    got = _sh([str(python), "-c", code]).stdout.strip()
    version = got.split(" ")[0]
    if wanted not in (version, version.split("+")[0]):
        shutil.rmtree(python.parent.parent)
        raise SystemExit(f"{python}: imports torch {got or '(none)'}, not the pinned {wanted}")
    return f"$ python -c {code!r}\n{got}\n"


def _others(pins: dict[str, str], *varied: str) -> list[str]:
    return [f"{name}=={value}" for name, value in sorted(pins.items()) if name not in ("torch", "python", *varied)]


def release_venv(work: Path, truth: dict, release: str, partner_release: str | None = None) -> tuple[Path, str]:  # type: ignore[type-arg]
    """The venv of one release (an interaction entry: one cell, the partner at ``partner_release``) with the entry's
    other pins, and the install's own log."""
    pins = dict(truth.get("pins", {}))
    versions = {truth["package"]: release}
    if partner_release is not None:
        versions[truth["partner"]] = partner_release
    if "python" in versions:
        raise SystemExit("a python axis is not measured by this tool (each cell needs its own interpreter)")
    if "torch" in versions:  # a torch axis: the cell's torch is the venv's, installed as a torch pin is
        pins["torch"] = versions.pop("torch")
    wanted = [f"{name}=={version}" for name, version in versions.items()] + _others(pins, *versions)
    key = hashlib.sha1(json.dumps([wanted, pins.get("torch")]).encode()).hexdigest()[:10]  # noqa: S324 - a name
    python = _venv(work, f"{'-'.join(f'{n}-{v}' for n, v in versions.items()) or 'torch'}-{key}", pins)
    marker = python.parent.parent / "installed.txt"
    if marker.exists():
        return python, marker.read_text()
    log = _install(python, wanted, pins)
    marker.write_text(log)
    return python, log


def commit_venv(work: Path, truth: dict, clone: Path, rev: str) -> tuple[Path, str, str]:  # type: ignore[type-arg]
    """A venv with the package built from one commit of ``clone`` (no ops: they are compiled just in time)."""
    sha = _sh(["git", "-C", str(clone), "rev-parse", "--verify", f"{rev}^{{commit}}"]).stdout.strip()
    if not sha:
        raise SystemExit(f"{clone} has no commit {rev!r}")
    pins, package = dict(truth.get("pins", {})), truth["package"]
    python = _venv(work, f"{package}-commit-{sha[:12]}", pins)
    marker = python.parent.parent / "installed.txt"
    if marker.exists():
        return python, sha, marker.read_text()
    source = work / "src" / sha[:12]
    if not source.exists():
        _export(clone, sha, source)
    env = {**os.environ, "DS_BUILD_OPS": "0"}
    others = _others(pins, package)
    log = _install(python, others, pins) if others else ""
    log += _install(python, ["--no-build-isolation", str(source)], pins, env=env)
    marker.write_text(log)
    return python, sha, log


def _export(clone: Path, sha: str, dest: Path) -> None:
    """The commit's tree without what a build never reads (docs, blogs, tests: a mirror may lack their large
    blobs), checked out through a private index so the clone is only read."""
    top = _sh(["git", "-C", str(clone), "ls-tree", "--name-only", sha]).stdout.split()
    paths = [p for p in top if p not in _NOT_BUILT]
    dest.mkdir(parents=True)
    env = {**os.environ, "GIT_INDEX_FILE": str(dest.parent / f"{sha}.index")}
    git_dir = clone if (clone / "HEAD").is_file() else clone / ".git"  # a bare mirror, or a clone with a work tree
    done = _sh(["git", f"--git-dir={git_dir}", f"--work-tree={dest}", "checkout", sha, "--", *paths], env=env)
    if done.returncode:
        shutil.rmtree(dest)
        raise SystemExit(f"could not check out {sha} of {clone}: {done.stderr[-1000:]}")


INSTRUMENTS = Path(__file__).resolve().parents[1] / "repros" / "instruments.py"
STEP_MARK = "@@repro "


def median_step_ms(log: str) -> float | None:
    """The median of a run's completed steps after its warm-up (the first tenth, at least one), in milliseconds."""
    steps = []
    for line in log.splitlines():
        if not line.startswith(STEP_MARK):
            continue
        with contextlib.suppress(ValueError):
            event = json.loads(line[len(STEP_MARK) :])
            if isinstance(event, dict) and event.get("event") == "step" and event.get("ok") is True:
                seconds = event.get("seconds")
                if isinstance(seconds, (int, float)) and 0 < seconds < 1e6:
                    steps.append(float(seconds))
    kept = sorted(steps[max(1, -(-len(steps) // 10)) :])
    if not kept:
        return None
    middle = len(kept) // 2
    median = kept[middle] if len(kept) % 2 else (kept[middle - 1] + kept[middle]) / 2
    return round(median * 1000, 4)


def run_issue(python: Path, entry: Path, truth: dict, ext: Path) -> tuple[int, str, float, str]:  # type: ignore[type-arg]
    """Run the entry's script as a user would; (status, last line, seconds, log)."""
    scratch = python.parent.parent / "scratch"
    shutil.rmtree(scratch, ignore_errors=True)
    shutil.copytree(entry, scratch, ignore=shutil.ignore_patterns(LOGS, "truth.toml", "__pycache__"))
    if "slowdown" in truth:  # a performance entry's steps are timed by the instruments' step events
        shutil.copy(INSTRUMENTS, scratch / "instruments.py")
    env = {k: v for k, v in os.environ.items() if k in _PASSED_ENV or k.startswith(_PASSED_PREFIXES)}
    env |= {"TORCH_EXTENSIONS_DIR": str(ext), "PYTHONUNBUFFERED": "1", "VIRTUAL_ENV": str(python.parent.parent)}
    if truth.get("backend", "cpu") == "cpu":
        env["DS_ACCELERATOR"] = "cpu"
    script = truth.get("script", "issue.py")
    start = time.monotonic()
    try:
        done = subprocess.run(
            [str(python), script], cwd=scratch, env=env, capture_output=True, text=True,
            timeout=int(truth.get("timeout", 900)), check=False,
        )  # fmt: skip
        status, log = done.returncode, done.stdout + done.stderr
    except subprocess.TimeoutExpired as exc:
        out, err = (s.decode(errors="replace") if isinstance(s, bytes) else s or "" for s in (exc.stdout, exc.stderr))
        status, log = 124, f"{out}{err}\nTIMEOUT after {exc.timeout} s"  # bytes on a timeout, even with text=True
    seconds = round(time.monotonic() - start, 1)
    return status, last_line(log, status), seconds, log


def _toml_string(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)  # a JSON string is a valid TOML basic string


def _table(name: str, rows: dict[str, dict]) -> list[str]:  # type: ignore[type-arg]
    lines = [f"[{name}]"]
    for key in rows:
        row = rows[key]
        cells = [f"exit = {int(row['exit'])}", f"last_line = {_toml_string(row['last_line'])}"]
        cells.append(f"seconds = {float(row['seconds'])}")
        if row.get("step_ms"):
            cells.append(f"step_ms = [{', '.join(str(float(v)) for v in row['step_ms'])}]")
        if row.get("version"):
            cells.insert(0, f"version = {_toml_string(row['version'])}")
        lines.append(f"{_toml_string(key)} = {{ {', '.join(cells)} }}")
    return lines


def write_measured(truth_file: Path, runs: dict, commits: dict, cells: dict | None = None) -> None:  # type: ignore[type-arg]
    """Merge these rows into the measured part of truth.toml (below MARKER), re-read under a lock so that two
    measurements of one entry at once (releases and commits) keep each other's rows; the hand-written part stays.
    An interaction entry's rows are its ``cells``, keyed ``"ROW|COLUMN"``, in the grid's order."""
    with _locked(truth_file):
        text = truth_file.read_text(encoding="utf-8")
        now = tomllib.loads(text)
        runs = _ordered({**now.get("runs", {}), **runs}, now)
        commits = {**now.get("commits", {}), **commits}
        cells = _ordered_cells({**now.get("cells", {}), **(cells or {})}, now)
        head = text.split(MARKER)[0].rstrip("\n")
        lines = [head, "", MARKER, *(_table("cells", cells) if cells else _table("runs", runs))]
        if commits:
            lines += ["", *_table("commits", commits)]
        truth_file.write_text("\n".join(lines) + "\n", encoding="utf-8")
        tomllib.loads(truth_file.read_text(encoding="utf-8"))  # what we wrote must read back


@contextlib.contextmanager
def _locked(truth_file: Path) -> Iterator[None]:
    lock = Path(tempfile.gettempdir()) / f"corpus-truth-{hashlib.sha1(str(truth_file).encode()).hexdigest()[:8]}.lock"  # noqa: S324
    with lock.open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def pack_logs(entry: Path, logs: dict[str, str]) -> None:
    """Add (or replace) logs in the entry's packed archive, members sorted, mtimes fixed."""
    archive = entry / LOGS
    members: dict[str, bytes] = {}
    if archive.exists():
        with tarfile.open(archive) as tar:
            for member in tar.getmembers():
                data = tar.extractfile(member)
                if member.isfile() and data is not None:
                    members[member.name] = data.read()
    members |= {name: text.encode() for name, text in logs.items()}
    tmp = archive.with_suffix(".tmp")
    with tarfile.open(tmp, "w:xz") as tar:
        for name in sorted(members):
            info = tarfile.TarInfo(name)
            info.size, info.mtime, info.mode = len(members[name]), 0, 0o644
            tar.addfile(info, io.BytesIO(members[name]))
    tmp.replace(archive)


def _releases(truth: dict, chosen: str | None) -> list[str]:  # type: ignore[type-arg]
    listed = [str(r) for r in truth["releases"]]
    if not chosen:
        return listed
    wanted = [r.strip() for r in chosen.split(",") if r.strip()]
    unknown = [r for r in wanted if r not in listed]
    if unknown:
        raise SystemExit(f"truth.toml's releases do not list {unknown}; add them there first")
    return wanted


def measure(args: argparse.Namespace) -> int:
    """Run every asked release (or commit) once; write the table and the logs; print one line each."""
    entry: Path = args.entry.resolve()
    truth_file = entry / "truth.toml"
    truth = tomllib.loads(truth_file.read_text(encoding="utf-8"))
    work: Path = args.work.resolve()
    runs: dict[str, dict] = {}  # type: ignore[type-arg]  # this call's rows only: merged into the file when written
    commits: dict[str, dict] = {}  # type: ignore[type-arg]
    logs: dict[str, str] = {}
    if "interaction" in truth.get("kinds", []):
        return measure_cells(args, entry, truth)
    jobs = [("release", r) for r in ([] if args.commit and not args.releases else _releases(truth, args.releases))]
    jobs += [("commit", c) for c in args.commit]
    for kind, name in jobs:
        if kind == "release":
            python, install = release_venv(work, truth, name)
            key, version = name, ""
        else:
            if args.git is None:
                raise SystemExit("--commit needs --git CLONE")
            python, sha, install = commit_venv(work, truth, args.git, name)
            key, version = sha[:12], name
        # one op folder for every release and commit: torch names each JIT build by a hash of its sources and flags,
        # so a release whose op differs builds its own and one whose op is the same reuses it (25-60 s saved a run)
        ext = work / "ext" / truth["package"]
        ext.mkdir(parents=True, exist_ok=True)
        row, log = _runs(python, entry, truth, ext)
        (runs if kind == "release" else commits)[key] = {**row, "version": version}
        logs[f"{kind}-{key}.log"] = f"{install}\n{log}"
        timed = f"  step ms {row['step_ms']}" if row.get("step_ms") else ""
        print(
            f"{kind} {key:>12}  exit {row['exit']:>3}  {row['seconds']:>7.1f} s  {row['last_line']}{timed}", flush=True
        )
        write_measured(truth_file, runs if kind == "release" else {}, commits if kind == "commit" else {})
        with _locked(truth_file):
            pack_logs(entry, logs)
    return 0


def measure_cells(args: argparse.Namespace, entry: Path, truth: dict) -> int:  # type: ignore[type-arg]
    """An interaction entry: every asked cell of its grid once (``--releases`` picks rows, ``--partner-releases``
    columns); each cell's row written and its log packed the moment it ends."""
    if args.commit:
        raise SystemExit("--commit: an interaction entry's [[change]] commits are checked by hand (its 'how')")
    truth_file, work = entry / "truth.toml", args.work.resolve()
    columns = {**truth, "releases": truth.get("partner_releases", [])}
    package, partner = truth["package"], truth["partner"]
    for row in _releases(truth, args.releases):
        for col in _releases(columns, args.partner_releases):
            python, install = release_venv(work, truth, row, col)
            ext = work / "ext" / f"{package}-{partner}"
            ext.mkdir(parents=True, exist_ok=True)
            measured, log = _runs(python, entry, truth, ext)
            key = f"{row}|{col}"
            said = f"exit {measured['exit']:>3}  {measured['seconds']:>7.1f} s  {measured['last_line']}"
            print(f"cell {key:>20}  {said}", flush=True)
            write_measured(truth_file, {}, {}, {key: measured})
            with _locked(truth_file):
                pack_logs(entry, {f"cell-{package}-{row}-{partner}-{col}.log": f"{install}\n{log}"})
    return 0


def _runs(python: Path, entry: Path, truth: dict, ext: Path) -> tuple[dict, str]:  # type: ignore[type-arg]
    """One run (a performance entry: ``repeats`` runs, each one's median step); the row and the log of every run.
    The row keeps the first failing run's exit and line, the runs' mean seconds."""
    repeats = int(truth["slowdown"].get("repeats", 3)) if "slowdown" in truth else 1
    rows, logs = [], []
    for n in range(repeats):
        status, line, seconds, log = run_issue(python, entry, truth, ext)
        rows.append((status, line, seconds, median_step_ms(log) if "slowdown" in truth else None))
        logs.append(f"$ python {truth.get('script', 'issue.py')}  # run {n + 1} of {repeats}\n{log}\nexit {status}\n")
    status, line = next(((s, t) for s, t, _, _ in rows if s != 0), (0, ""))
    row = {"exit": status, "last_line": line, "seconds": round(sum(r[2] for r in rows) / len(rows), 1)}
    if "slowdown" in truth:
        row["step_ms"] = [ms for *_, ms in rows if ms is not None]
    return row, "".join(logs)


def _grid(truth: dict) -> list[str]:  # type: ignore[type-arg]
    """An interaction entry's cells in order, ``"ROW|COLUMN"``."""
    return [f"{r}|{c}" for r in map(str, truth["releases"]) for c in map(str, truth.get("partner_releases", []))]


def _ordered_cells(cells: dict, truth: dict) -> dict:  # type: ignore[type-arg]
    order = _grid(truth)
    return {k: cells[k] for k in sorted(cells, key=lambda k: order.index(k) if k in order else len(order))}


def _ordered(runs: dict, truth: dict) -> dict:  # type: ignore[type-arg]
    order = [str(r) for r in truth["releases"]]
    return {r: runs[r] for r in sorted(runs, key=lambda r: order.index(r) if r in order else len(order))}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("entry", type=Path, help="the entry's folder (corpus/NAME)")
    parser.add_argument("--releases", help="comma-separated releases (default: every one truth.toml lists)")
    parser.add_argument("--partner-releases", help="an interaction entry: comma-separated releases of its partner")
    parser.add_argument("--commit", action="append", default=[], help="a commit of --git to build and run (repeat)")
    parser.add_argument("--git", type=Path, help="a clone of the package's repository, for --commit")
    parser.add_argument(
        "--work", type=Path, default=Path(tempfile.gettempdir()) / "corpus-truth", help="venvs, sources, op caches"
    )
    return measure(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
