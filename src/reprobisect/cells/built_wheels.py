"""Wheels the harness built from sdists, kept for every later cell: DeepSpeed publishes only sdists.

Why the harness keeps them and not only uv: uv keys the wheel it builds on the index's response for the sdist,
and where that response is not reused (a proxy that drops caching headers, an expired cache) every new cell
built DeepSpeed again — 2.5 s of a 3.8 s cell build, and 34 copies of the 0.19.8 build in uv's cache. A wheel
kept here is installed by path, with no build and, when uv's cache holds the rest, no network either.

What determines a kept wheel: the package's name and version and the Python minor version that built it. Not
torch: the build runs isolated (the installer's default), where DeepSpeed's ``setup.py`` finds no torch, records
torch ``0.0`` and compiles no op (``DS_BUILD_OPS=0`` besides); its ops compile just in time in the run, into the
op cache. Only pure-Python wheels (``…-none-any``) are kept: one with compiled code would also depend on the
compiler and the libraries it linked, which this key does not see.

The folder is untrusted input like any other: a wheel is installed only after its file name, its archive (every
member's CRC, no member leaving the archive) and its METADATA's name and version agree with the pin it is to
stand for. One that does not is removed, said in the cell's build log, and the pin is installed as it would be
without this cache (built again, and kept again). A self-consistent wheel someone forged and put here is
installed like any wheel they could put on the index: the folder is only as trusted as who can write to it.

A commit of a local clone (a ``git+file://CLONE@SHA`` pin: commit bisection) is kept the same way, under its
full hash: it is built from a throwaway ``git clone --shared`` of the clone (the user's clone is never checked
out or written), with ``--no-build-isolation`` first — the base interpreter's setuptools and torch, so a GPU node
without network builds it too — and isolated only when that fails. A commit that builds nowhere is the probe's
ENV_ERROR, skipped like ``git bisect``'s 125.

Layout (beside the cells, ``<envs>/wheels``, unless ``REPROBISECT_WHEEL_CACHE`` names another folder or is
``off``): ``<name>-<version>-py<X.Y>/`` (``<name>-git-<sha>-py<X.Y>/`` for a commit) holds one wheel;
``<name>-<version>-py<X.Y>.flock`` is the lock its builder takes and, by its modification time, when it was last
used (the size bound drops the oldest first).
"""

from __future__ import annotations

import contextlib
import dataclasses
import email.parser
import os
import re
import shutil
import subprocess
import tempfile
import time
import zipfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path, PurePosixPath

from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from reprobisect.cells.backend_build import BuildPlace, backend_wheel
from reprobisect.cells.build_jail import BuildJail
from reprobisect.cells.shared_cache import SharedCache
from reprobisect.errors import ToolError
from reprobisect.util import tally
from reprobisect.util.cmd import output_tail, run_tool
from reprobisect.util.redact import redact

__all__ = [
    "DEFAULT_MAX_BYTES",
    "WHEELS",
    "BuildWith",
    "build",
    "build_commit",
    "check_wheel",
    "entry_name",
    "git_commit",
    "lookup",
]

DEFAULT_MAX_BYTES = 1 << 30  # a DeepSpeed wheel is about 2 MB: every release several times over
_SAFE = re.compile(r"[a-z0-9][a-z0-9.+!_-]{0,150}")  # what a folder name of ours can hold
_MAX_MEMBERS = 20_000  # DeepSpeed's wheel has about 1,000 files; a zip bomb of names is refused


# A kept wheel is pruned under its lock: a builder may be replacing it (built again after a failed check).
WHEELS = SharedCache(
    env_var="REPROBISECT_WHEEL_CACHE", folder="wheels", default_max_bytes=DEFAULT_MAX_BYTES, remove_under_lock=True
)


def entry_name(name: str, version: str, python_version: str) -> str | None:
    """The folder of ``name==version`` built by Python ``python_version`` (``3.11.7`` or ``3.11``); None when the
    pin cannot name a folder (not a version, odd characters): such a pin is never kept."""
    try:
        normal = str(Version(version))
    except InvalidVersion:
        return None
    minor = ".".join(python_version.split(".")[:2])
    folder = f"{canonicalize_name(name)}-{normal}-py{minor}"
    return folder if _SAFE.fullmatch(folder) and ".." not in folder else None


def check_wheel(path: Path, name: str, version: str | None) -> str | None:
    """Why the file at ``path`` must not be installed as ``name==version``, or None when it may (``version``
    None: a commit's build, whose version is whatever its tree says)."""
    try:
        wheel_name, wheel_version, _, tags = parse_wheel_filename(path.name)
    except InvalidWheelFilename as exc:
        return f"not a wheel's file name ({exc})"
    same_version = version is None or wheel_version == Version(version)
    if canonicalize_name(wheel_name) != canonicalize_name(name) or not same_version:
        return f"its file name says {wheel_name} {wheel_version}, not {name} {version or ''}".rstrip()
    if not all(tag.abi == "none" and tag.platform == "any" for tag in tags):
        return "not a pure-Python wheel (only those are kept)"
    try:
        with zipfile.ZipFile(path) as archive:
            return _check_archive(archive, name, version)
    except (OSError, zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, ValueError, NotImplementedError) as exc:
        return f"not a readable wheel ({type(exc).__name__}: {str(exc)[:120]})"


def _check_archive(archive: zipfile.ZipFile, name: str, version: str | None) -> str | None:
    members = archive.namelist()
    if len(members) > _MAX_MEMBERS:
        return f"{len(members)} members (more than {_MAX_MEMBERS})"
    for member in members:
        parts = PurePosixPath(member).parts
        if member.startswith(("/", "\\")) or ".." in parts or "\\" in member or "\0" in member:
            return f"member {member[:80]!r} would leave the install folder"
    metadata = [m for m in members if len(PurePosixPath(m).parts) == 2 and m.endswith(".dist-info/METADATA")]
    if len(metadata) != 1:
        return f"{len(metadata)} METADATA files at its top (a wheel has one)"
    headers = email.parser.BytesHeaderParser().parsebytes(archive.read(metadata[0]))
    meta_name, meta_version = headers.get("Name", ""), headers.get("Version", "")
    try:
        same_version = version is None or Version(meta_version) == Version(version)
    except InvalidVersion:
        same_version = False
    if canonicalize_name(meta_name) != canonicalize_name(name) or not same_version:
        return f"its METADATA names {meta_name[:60]!r} {meta_version[:40]!r}, not {name} {version or ''}".rstrip()
    broken = archive.testzip()  # every member read and its CRC compared: a cut or altered file shows here
    return None if broken is None else f"member {broken[:80]!r} is damaged (CRC)"


def _the_wheel(folder: Path) -> Path | None:
    """The one ``.whl`` file in ``folder``, or None (missing, several, a link, not a file)."""
    try:
        found = [p for p in folder.iterdir() if p.name.endswith(".whl")]
    except OSError:
        return None
    if len(found) != 1 or found[0].is_symlink() or not found[0].is_file():
        return None
    return found[0]


def lookup(root: Path, name: str, version: str, python_version: str, *, say: Callable[[str], None]) -> Path | None:
    """The kept wheel of ``name==version``, checked; a wheel that fails the check is removed and ``say``-d."""
    folder_name = entry_name(name, version, python_version)
    if folder_name is None:
        return None
    wheel, why = _inspect(root / folder_name, name, version)
    if why is not None:
        say(f"kept wheel {wheel or root / folder_name}: {why}; removed, {name} {version} is installed from the index")
        with WHEELS.locked(root, folder_name):
            _remove(root / folder_name)
        return None
    if wheel is not None:
        WHEELS.touch(root, folder_name)  # its last use, for the size bound
    return wheel


def _inspect(folder: Path, name: str, version: str | None) -> tuple[Path | None, str | None]:
    """The entry's wheel and why it must not be used: (None, None) when there is no entry."""
    if folder.is_symlink():
        return None, "a link, not a folder"
    if not folder.is_dir():
        return None, ("not a folder" if folder.exists() else None)
    wheel = _the_wheel(folder)
    if wheel is None:
        return None, "not exactly one wheel file in it"
    return wheel, check_wheel(wheel, name, version)


def _remove(folder: Path) -> None:
    if folder.is_symlink() or folder.is_file():
        folder.unlink(missing_ok=True)
    else:
        shutil.rmtree(folder, ignore_errors=True)


@dataclasses.dataclass(frozen=True, kw_only=True)
class BuildWith:
    """How a kept wheel is built: the interpreter whose pip builds it (its version is part of the entry's name),
    the log its output is appended to, the jail it runs in (the default sandbox when None), the environment its
    variables come from (this process's when None), how long it may take, and the cell's exact pins: where the base's
    tools cannot build a commit, its isolated build's tools are held to them."""

    python: str
    python_version: str
    log: Path
    jail: BuildJail | None = None
    environ: Mapping[str, str] | None = None
    timeout: float = 1800
    constraints: Mapping[str, str] = dataclasses.field(default_factory=dict)  # the cell's exact pins, by name

    def place(self, folder: Path, readable: Sequence[Path] = (), hidden: Sequence[Path] = ()) -> BuildPlace:
        """Where one build of these settings runs: ``folder`` and what it reads or must not besides."""
        environ = os.environ if self.environ is None else self.environ
        return BuildPlace(self.jail or BuildJail(), folder, environ, self.timeout, readable, hidden)


def build(root: Path, name: str, version: str, how: BuildWith) -> Path | None:
    """Build ``name==version``'s wheel with ``how.python``'s pip (the index its configuration names, isolated, no
    ops) and keep it; the kept wheel, or None when it cannot be built or kept (the reason goes to ``how.log``: the
    cell is then installed as without this cache). The build runs in ``how.jail`` (cells/build_jail.py; the default
    sandbox when None) with its environment cleared to what it needs."""
    python, python_version, log = how.python, how.python_version, how.log
    folder_name = entry_name(name, version, python_version)
    if folder_name is None:
        return None
    with WHEELS.locked(root, folder_name):
        kept, why = _inspect(root / folder_name, name, version)
        if why is None and kept is not None:
            return kept  # another harness built it while this one waited
        if why is not None:
            _note(log, f"kept wheel {kept or root / folder_name}: {why}; removed, built again")
        with tempfile.TemporaryDirectory(dir=root, prefix=f".build-{folder_name}-") as tmp:
            dest = Path(tmp) / "dist"
            built = _pip_wheel(python, name, version, dest, log, how.place(Path(tmp)))
            if built is None:
                return None
            why = check_wheel(built, name, version)
            if why is not None:
                _note(log, f"not kept: the wheel pip built for {name} {version} is {why}")
                return None
            staging = Path(tmp) / "entry"
            staging.mkdir()
            os.replace(built, staging / built.name)
            _remove(root / folder_name)
            os.replace(staging, root / folder_name)  # whole or not at all: a reader never sees half a wheel
        return _the_wheel(root / folder_name)


# what pip says when the base interpreter lacks the build backend itself (then, and only then, build isolated)
_NO_BACKEND = re.compile(r"No module named '?(setuptools|wheel)|Cannot import 'setuptools|BackendUnavailable")
_NO_PIP = re.compile(r"No module named '?pip\b")
_EXACT = re.compile(r"[0-9][0-9A-Za-z.+!_-]{0,60}")  # a version pin a constraints line can hold as it is
_COMMIT_PIN = re.compile(r"git\+file://(?P<repo>/[^@\s]*)@(?P<sha>[0-9a-f]{40})")


def git_commit(spec: str) -> tuple[Path, str] | None:
    """``(clone, sha)`` of a pin naming one commit of a local clone by its full hash, else None."""
    found = _COMMIT_PIN.fullmatch(spec)
    return (Path(found["repo"]), found["sha"]) if found else None


def build_commit(root: Path, name: str, repo: Path, sha: str, how: BuildWith) -> tuple[Path | None, str]:
    """The kept wheel of commit ``sha`` of the clone ``repo``, built now if it is not kept yet; ``(None, why)``
    when the commit does not build (the probe is then skipped, not judged): its first line the build's own error,
    then the end of its output, redacted. The build runs in ``how.jail`` (the default sandbox when None)."""
    python, python_version, log = how.python, how.python_version, how.log
    minor = ".".join(python_version.split(".")[:2])
    folder_name = f"{canonicalize_name(name)}-git-{sha}-py{minor}"
    if not _SAFE.fullmatch(folder_name):
        return None, f"{name} {sha[:12]}: not a name a kept wheel can have"
    with WHEELS.locked(root, folder_name):
        kept, why = _inspect(root / folder_name, name, None)
        if why is None and kept is not None:
            _note(log, f"{name} {sha[:12]}: {kept} (built before, not built again)")
            return kept, ""
        if why is not None:
            _note(log, f"kept wheel {kept or root / folder_name}: {why}; removed, built again")
        start = time.perf_counter()
        with tempfile.TemporaryDirectory(dir=root, prefix=f".build-{folder_name}-") as tmp:
            source = Path(tmp) / "source"
            failed = _checkout(repo, sha, source, log)
            if failed:
                return None, failed
            job = how.place(Path(tmp), _commit_objects(source), _git_configs(repo))
            held = _constraints(how.constraints, but=name, folder=Path(tmp))
            built, why = _pip_wheel_from(python, source, Path(tmp) / "dist", log, job, held)
            tally.add(tally.COMMIT_WHEELS, time.perf_counter() - start)  # built or not, the time was spent
            if built is None:
                return None, redact(f"commit {sha[:12]} of {repo} does not build: {_error_line(why)}\n{why}")
            why = check_wheel(built, name, None) or ""
            if why:
                return None, f"the wheel pip built from commit {sha[:12]} is {why}"
            staging = Path(tmp) / "entry"
            staging.mkdir()
            os.replace(built, staging / built.name)
            _remove(root / folder_name)
            os.replace(staging, root / folder_name)
        return _the_wheel(root / folder_name), ""


def _checkout(repo: Path, sha: str, source: Path, log: Path) -> str:
    """A private checkout of ``sha`` at ``source`` (a ``--shared`` clone: objects read from ``repo``, nothing
    written there); why it could not be made, or ''."""
    steps = (
        ["git", "clone", "--quiet", "--shared", "--no-checkout", "--", str(repo), str(source)],
        ["git", "-C", str(source), "checkout", "--quiet", "--detach", sha],
    )
    for argv in steps:
        done = run_tool(argv, what=f"checking out {sha[:12]} of {repo}", timeout=600, check=False)
        if done.returncode != 0:
            why = f"cannot check out commit {sha[:12]} of {repo}: {output_tail(done.stderr or done.stdout)}"
            _note(log, why)
            return why
    return ""


def _commit_objects(source: Path) -> list[Path]:
    """The object folders a ``--shared`` clone at ``source`` reads from (its ``alternates``)."""
    try:
        lines = (source / ".git" / "objects" / "info" / "alternates").read_text().splitlines()
    except OSError:
        return []
    return [Path(line.strip()) for line in lines if line.strip().startswith("/")]


def _git_configs(repo: Path) -> list[Path]:
    """The clone's git configuration files (a remote's URL may hold credentials): hidden from its builds."""
    return [path for path in (repo / ".git" / "config", repo / "config") if path.is_file()]


# a Python exception's line (``RuntimeError: …``, ``pkg.SomeError``), the build's own words under pip's
_EXCEPTION_LINE = re.compile(r"^\s*(?:[A-Za-z_][\w.]*\.)?[A-Za-z_]\w*(?:Error|Exception)\b.*")


def _error_line(output: str) -> str:
    """The line of a failed build's output that says why: its last exception's, else its last line."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    found = [line for line in lines if _EXCEPTION_LINE.match(line)]
    return (found or lines or ["no output"])[-1][:300]


def _constraints(pins: Mapping[str, str], *, but: str, folder: Path) -> Path | None:
    """A constraints file in ``folder`` holding ``pins`` (exact versions only) other than ``but``'s, the package
    being built; None when none is left."""
    lines = [
        f"{canonicalize_name(name)}=={version}"
        for name, version in sorted(pins.items())
        if canonicalize_name(name) != canonicalize_name(but) and _EXACT.fullmatch(version)
    ]
    if not lines:
        return None
    path = folder / "build-constraints.txt"
    path.write_text("\n".join(lines) + "\n")
    return path


def _pip_wheel_from(
    python: str, source: Path, dest: Path, log: Path, job: BuildPlace, constraints: Path | None = None
) -> tuple[Path | None, str]:
    """A wheel of the tree at ``source``: without build isolation (the base's setuptools and torch: offline), and
    isolated when that fails (the index the user's pip configuration names), its tools held to ``constraints`` (the
    cell's pins) when given. The tree's build backend is called once first (cells/backend_build.py: half of pip's
    time for DeepSpeed); pip builds what it could not."""
    said: list[str] = []

    def note(text: str) -> None:
        said.append(text)
        _note(log, text)

    built = backend_wheel(python, source, dest, note=note, place=job)
    if built is not None:
        return built, ""
    why = ""
    for isolation in (["--no-build-isolation"], []):
        argv = [python, "-m", "pip", "wheel", "--quiet", "--no-deps", *isolation, "--wheel-dir", str(dest)]
        argv += ["--disable-pip-version-check", str(source)]
        place = job
        if not isolation and constraints is not None:
            place = _held_to(job, constraints)
            held = constraints.read_text().replace("\n", " ")
            _note(log, f"isolated, its build tools held to the cell's pins: {held}")
        done = _run_pip(argv, f"a wheel of {source}", log, place, index=not isolation)
        if isinstance(done, str):
            return None, done
        wheels = list(dest.glob("*.whl")) if dest.is_dir() else []
        if done.returncode == 0 and len(wheels) == 1:
            return wheels[0], ""
        why = output_tail(done.stderr or done.stdout) if done.returncode else f"pip left {len(wheels)} wheels"
        _note(log, f"not built: {why}")
        if constraints is None and not _NO_BACKEND.search(done.stderr + done.stdout):
            break  # the tree itself does not build: an isolated build (network, minutes offline) would not either
    if _NO_PIP.search(why) and said:
        why = said[-1]  # no pip to ask: the backend's own failure says why the tree does not build
    return None, why


def _held_to(job: BuildPlace, constraints: Path) -> BuildPlace:
    """``job`` with pip told to hold an isolated build's own installs to ``constraints``: ``PIP_BUILD_CONSTRAINT``
    (pip 25.3 on; with it, ``PIP_CONSTRAINT`` no longer reaches the build) and ``PIP_CONSTRAINT`` (older pips)."""
    held = {"PIP_BUILD_CONSTRAINT": str(constraints), "PIP_CONSTRAINT": str(constraints)}
    return dataclasses.replace(job, environ={**job.environ, **held})


def _run_pip(
    argv: list[str], what: str, log: Path, job: BuildPlace, *, index: bool
) -> subprocess.CompletedProcess[str] | str:
    """``pip wheel`` without ops (``DS_BUILD_OPS=0``: they compile just in time) in the build's jail (``index``: with
    the network and the user's index configuration), said in ``log`` with its time and exit; why it could not run,
    when it could not."""
    start = time.perf_counter()
    confined, env = job.jail.command(
        argv,
        python=argv[0],
        folder=job.folder,
        environ=job.environ,
        index=index,
        readable=job.readable,
        hidden=job.hidden,
    )
    try:
        done = run_tool(confined, what=f"building {what}", timeout=job.timeout, env=env, check=False)
    except ToolError as exc:
        _note(log, f"not kept: {exc}")
        return str(exc)
    _note(log, f"$ {' '.join(argv)}  ({time.perf_counter() - start:.1f} s, exit {done.returncode})")
    return done


def _pip_wheel(python: str, name: str, version: str, dest: Path, log: Path, job: BuildPlace) -> Path | None:
    argv = [python, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-binary", name, f"{name}=={version}"]
    argv += ["--wheel-dir", str(dest), "--disable-pip-version-check"]
    done = _run_pip(argv, f"a wheel of {name} {version}", log, job, index=True)
    if isinstance(done, str):
        return None
    if done.returncode != 0:
        _note(log, f"not kept: pip could not build {name} {version}:\n{output_tail(done.stderr or done.stdout)}")
        return None
    wheels = list(dest.glob("*.whl")) if dest.is_dir() else []
    if len(wheels) != 1:
        _note(log, f"not kept: pip left {len(wheels)} wheels for {name} {version}")
        return None
    return wheels[0]


def _note(log: Path, text: str) -> None:
    with contextlib.suppress(OSError), log.open("a") as handle:
        handle.write(f"# wheel cache: {redact(text)}\n")
