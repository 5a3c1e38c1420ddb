"""One uv venv per cell: created once, reused while its pins are unchanged.

torch is never resolved by uv: with ``system`` torch the venv sees the base interpreter's torch
(``--system-site-packages``, or a ``.pth`` file when the base is itself a venv) and uv is told to
exclude torch, so it can neither replace it nor download a multi-GB CUDA build. A pinned torch is
installed with the venv's own pip, which honours the user's pip configuration (local wheels, index).
DeepSpeed is an sdist whose build imports torch; it is built in isolation without ops (they are
compiled just in time, into the op cache), once: the wheel is kept (``cells/built_wheels.py``) and every
later cell of that release installs it by path.

A cell whose pins are exact is installed offline first (``uv pip install --offline``: uv's cache alone, no
index asked), which takes about half a second when uv's cache holds every package; only when it lacks one is
the index asked. The packages the pins do not name (DeepSpeed's and Lightning's dependencies) then come from
what uv's cache last heard from the index, as they would had the cell been built then; a cell's records name
every version the run imported.
"""

from __future__ import annotations

import dataclasses
import fcntl
import hashlib
import json
import os
import re
import shutil
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from packaging.utils import canonicalize_name

from reprobisect.cells import built_wheels
from reprobisect.cells.base import BaseInterpreter
from reprobisect.cells.build_jail import BuildJail, install_environ
from reprobisect.cells.companion_match import matching_torchvision, unusable_torchvision
from reprobisect.cells.pinning import install_requirement
from reprobisect.cells.resolver import installer
from reprobisect.cells.shared_files import share_identical_files, shared_store
from reprobisect.errors import EnvBuildError
from reprobisect.model.cell import MATCH, SYSTEM, Cell
from reprobisect.util import tally
from reprobisect.util.cmd import run_logged, run_tool
from reprobisect.util.files import write_atomic

__all__ = ["BYTECODE_MARKER", "CellEnv", "ensure_env", "installer"]

MARKER = "reprobisect-cell.json"
BYTECODE_MARKER = "reprobisect-bytecode.json"  # what run/bytecode.py checked for the cell's runs, written later


@dataclasses.dataclass(frozen=True, kw_only=True)
class CellEnv:
    """A built cell environment."""

    cell: Cell
    path: Path
    reused: bool
    build_seconds: float
    steps: Mapping[str, float] = dataclasses.field(default_factory=dict)  # where a build's seconds went

    @property
    def python(self) -> Path:
        """The cell's interpreter."""
        return self.path / "bin" / "python"

    def base_site_dirs(self) -> list[Path]:
        """The base interpreter's site folders the cell sees (its ``_reprobisect_base.pth``): a sandbox shows them."""
        found = []
        for pth in self.path.glob("lib/python*/site-packages/_reprobisect_base.pth"):
            try:
                text = pth.read_text(encoding="utf-8")
            except OSError:
                continue
            found += [Path(match) for match in re.findall(r"addsitedir\('([^']+)'\)", text)]
        return found

    @property
    def torch_extensions(self) -> Path:
        """JIT-compiled ops of this cell live here, so each DeepSpeed version builds them once."""
        return self.path / "torch_extensions"


def _local_stamp(cell: Cell) -> dict[str, float]:
    """Modification times of local paths, so a rebuilt wheel or edited checkout rebuilds the cell."""
    stamps = {}
    for spec in cell.packages.values():
        path = Path(spec)
        if spec.startswith(("/", "./", "../")) and path.exists():
            stamps[spec] = path.stat().st_mtime
    return stamps


def _fingerprint(cell: Cell, base: BaseInterpreter) -> str:
    made = {"cell": cell.to_dict(), "base": base.executable, "local": _local_stamp(cell), "format": 1}
    if cell.torch_source != SYSTEM:  # seeded by the interpreter's ensurepip since 2026-12-07: remake older cells
        made["seed"] = "ensurepip"
    blob = json.dumps(made, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def ensure_env(
    cell: Cell,
    base: BaseInterpreter,
    envs_dir: Path,
    *,
    uv: str = "uv",
    on_build: Callable[[], None] | None = None,
    jail: BuildJail | None = None,
) -> CellEnv:
    """Create the cell's venv, or reuse it when its fingerprint (pins + base interpreter) matches.

    A lock file per cell makes two harness processes that want the same cell build it once. ``on_build``
    is called when a build really starts (so a session can say so before a minute of installing). The wheels
    the harness builds (a release's sdist, a commit) are built in ``jail`` (cells/build_jail.py: the default
    sandbox when None; ``BuildJail.unconfined()`` for ``--no-sandbox``).
    """
    envs_dir = envs_dir.resolve()
    envs_dir.mkdir(parents=True, exist_ok=True)
    with (envs_dir / f"{cell.id}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return _ensure_env_locked(cell, base, envs_dir, uv=uv, on_build=on_build, jail=jail or BuildJail())


def _ensure_env_locked(
    cell: Cell, base: BaseInterpreter, envs_dir: Path, *, uv: str, on_build: Callable[[], None] | None, jail: BuildJail
) -> CellEnv:
    path = envs_dir / cell.id
    fingerprint = _fingerprint(cell, base)
    marker = path / MARKER
    start = time.perf_counter()
    if marker.is_file() and (path / "bin" / "python").exists():
        try:
            built = json.loads(marker.read_text())
            if built["fingerprint"] == fingerprint and built.get("tree") == tree_digest(path):
                return CellEnv(cell=cell, path=path, reused=True, build_seconds=time.perf_counter() - start)
        except (ValueError, KeyError, TypeError, AttributeError):
            pass  # a changed cell (a run or a hand wrote into it), or an unreadable marker: built again
    if path.exists():
        shutil.rmtree(path)
    if on_build is not None:
        on_build()
    log = envs_dir / f"{cell.id}.build.log"
    log.write_text("")
    try:
        steps = dict(
            _build(cell, base, path, log, uv=uv, jail=jail) or {}
        )  # a stand-in build (tests) may return nothing
    except EnvBuildError:
        marker.unlink(missing_ok=True)
        raise
    shared_from, store = time.perf_counter(), shared_store(envs_dir)
    if store is not None:  # one copy of a pinned torch on disk, not one a cell
        _note(log, f"shared files: {share_identical_files(path, store).words()}")
        steps["shared files"] = time.perf_counter() - shared_from
    sealed = time.perf_counter()
    marker_data = {"fingerprint": fingerprint, "tree": tree_digest(path), "cell": cell.to_dict()}
    write_atomic(marker, json.dumps(marker_data, indent=2), what="the cell's marker")
    steps["marker"] = time.perf_counter() - sealed
    tally.add(tally.CELLS, time.perf_counter() - start)
    return CellEnv(cell=cell, path=path, reused=False, build_seconds=time.perf_counter() - start, steps=steps)


# what the harness writes later
_UNHASHED = frozenset({"__pycache__", "torch_extensions", "overlays", MARKER, BYTECODE_MARKER})


def tree_digest(path: Path) -> str:
    """A digest of every file of a cell (name, size, modification time), byte caches and op builds aside.

    Taken when the cell is built and again before it is reused (patch overlays and op builds aside, which the
    harness writes later): a cell something wrote into since (a
    ``sitecustomize.py`` planted by an unconfined run, say) no longer matches and is built again, so no run
    can change the verdict of the runs after it.
    """
    digest = hashlib.sha256()
    _digest_folder(digest.update, str(path), "")
    return digest.hexdigest()[:20]


def _digest_folder(update: Callable[[bytes], None], folder: str, relative: str) -> None:
    """One folder's files (sorted), then its folders, depth first: what ``os.walk`` visits, in its order, with
    one ``lstat`` per file and no Path objects (a cell holds ~3,700 files: 0.03 s instead of 0.1 s)."""
    try:
        with os.scandir(folder) as listing:
            found = list(listing)
    except OSError:
        return
    files: list[os.DirEntry[str]] = []
    folders: list[os.DirEntry[str]] = []
    for entry in found:
        try:
            is_folder = entry.is_dir()  # a link to a folder counts as one and is not entered, as in os.walk
        except OSError:
            is_folder = False
        (folders if is_folder else files).append(entry)
    for entry in sorted(files, key=lambda e: e.name):
        if entry.name in _UNHASHED:  # byte caches live in __pycache__ (in _UNHASHED); a bare .pyc is imported: hashed
            continue
        try:
            info = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        update(os.fsencode(relative + entry.name))  # names need not be UTF-8
        update(f"\0{info.st_size}\0{info.st_mtime_ns}\n".encode())
    for entry in sorted(folders, key=lambda e: e.name):
        if entry.name not in _UNHASHED and not entry.is_symlink():
            _digest_folder(update, entry.path, f"{relative}{entry.name}/")


def _logged(cmd: list[str], log: Path, what: str) -> None:
    """A cell's install step, its environment cleared (``build_jail.install_environ``): an install may build an
    sdist, whose ``setup.py`` must not read a token exported for something else."""
    run_logged(cmd, log=log, what=what, timeout=3600, error=EnvBuildError, env=install_environ(os.environ))


SDIST_ONLY = frozenset({"deepspeed"})  # publishes no wheels: the harness builds them once and keeps them


def _build(cell: Cell, base: BaseInterpreter, path: Path, log: Path, *, uv: str, jail: BuildJail) -> dict[str, float]:
    """Make the venv, install the cell into it and check its torchvision; returns the seconds each step took."""
    vision = cell.packages.get("torchvision")
    packages = dict(cell.packages)
    if vision == MATCH:  # the release made for this torch, known only now (not part of the cell's id)
        found = matching_torchvision(base, cell.torch, cell.torch_source)
        _note(log, f"torchvision: match -> {found or f'none (no release of it is made for torch {cell.torch} here)'}")
        del packages["torchvision"]
        if found is not None and found != SYSTEM:
            packages["torchvision"] = found
    steps = _install(cell, packages, base, path, log, uv=uv, jail=jail)
    if vision is not None and vision != SYSTEM:
        clock = time.perf_counter()
        _check_torchvision(cell, path, base, log, explicit=vision != MATCH, uv=uv)
        steps["torchvision check"] = time.perf_counter() - clock
    return steps


def _note(log: Path, text: str) -> None:
    with log.open("a") as handle:
        handle.write(f"# {text}\n")


def _check_torchvision(cell: Cell, path: Path, base: BaseInterpreter, log: Path, *, explicit: bool, uv: str) -> None:
    """A torchvision built for another build of the cell's torch: an error when pinned, removed when ``match``."""
    python = str(path / "bin" / "python")
    own = Path(_site_packages(python))
    why = unusable_torchvision([own, *(Path(p) for p in base.site_packages)], cell.torch)
    if why is None:
        return
    if explicit:
        raise EnvBuildError(f"cell {cell.id}: {why}")
    if not (own / "torchvision").is_dir():  # the base interpreter's, seen through its site folders: not ours
        _note(log, f"the base interpreter's torchvision is unusable in this cell: {why}")
        return
    _note(log, f"torchvision removed again: {why}")
    remove = (
        [uv, "pip", "uninstall", "--python", python]
        if installer() == "uv"
        else [python, "-m", "pip", "uninstall", "-y"]
    )
    _logged([*remove, "torchvision"], log, f"removing the unusable torchvision from cell {cell.id}")


class _CellInstall:
    """One cell's install as its steps share it: the cell, the interpreter it is made from, its folder and build
    log, the installer (uv, or the base's pip without it), and the seconds each step took."""

    def __init__(self, cell: Cell, base: BaseInterpreter, path: Path, log: Path, *, uv: str) -> None:
        self.steps: dict[str, float] = {}
        self.clock = time.perf_counter()
        self.cell, self.base, self.path, self.log, self.uv = cell, base, path, log, uv
        self.python = str(path / "bin" / "python")
        self.use_uv = installer() == "uv"
        # without uv the cell has no pip of its own (_make_venv): the base's installs into it
        self.pip = (
            [self.python, "-m", "pip"] if self.use_uv else [base.executable, "-m", "pip", "--python", self.python]
        )

    def step(self, name: str) -> None:
        """The seconds since the last step ended go to ``name`` (a step named twice adds up)."""
        now = time.perf_counter()
        self.steps[name] = self.steps.get(name, 0.0) + now - self.clock
        self.clock = now


def _install(
    cell: Cell, packages: Mapping[str, str], base: BaseInterpreter, path: Path, log: Path, *, uv: str, jail: BuildJail
) -> dict[str, float]:
    """Make the venv and install ``packages`` (the cell's, companions made concrete) into it; returns the seconds
    each step took. A pinned torch comes first, with pip; then the pins, each kept wheel by its path."""
    job = _CellInstall(cell, base, path, log, uv=uv)
    _make_venv(job)
    job.step("venv")
    if cell.torch_source != SYSTEM:
        _logged(
            [*job.pip, "install", "--quiet", f"torch=={cell.torch}"],
            log,
            f"installing torch {cell.torch} into cell {cell.id}",
        )
        job.step("torch")
    pins = {name: spec for name, spec in sorted(packages.items()) if spec != SYSTEM}
    if not pins:
        return job.steps
    wheels = _WheelCache(path.parent, base, log, jail, pins)
    kept = {name: wheel for name, spec in pins.items() if (wheel := wheels.kept(name, spec)) is not None}
    reqs = [str(kept[name]) if name in kept else install_requirement(name, spec) for name, spec in pins.items()]
    job.step("kept wheels")
    if not job.use_uv:  # pip sees the base interpreter's packages as installed and keeps them
        _logged([*job.pip, "install", "--quiet", *reqs], log, f"installing {' '.join(reqs)} (pip)")
        job.step("install")
        return job.steps
    _uv_install(job, _uv_command(job, packages), pins, kept, reqs, wheels)
    return job.steps


def _make_venv(job: _CellInstall) -> None:
    """Create the cell's venv from the base interpreter. With ``system`` torch it sees the base's packages: through
    ``--system-site-packages``, or, when the base is itself a venv, a ``.pth`` file adding the base's site folders."""
    system = job.cell.torch_source == SYSTEM
    if job.use_uv and not system and _seeded_by_ensurepip(job):
        return
    if job.use_uv:
        venv_cmd = [job.uv, "venv", "--quiet", "--python", job.base.executable]
        if not system:
            venv_cmd.append("--seed")  # pip, to install torch the way the user's pip config says
    else:  # no pip inside: the base interpreter's pip installs into the cell (pip --python), no ensurepip needed
        venv_cmd = [job.base.executable, "-m", "venv", "--without-pip"]
    if system and not job.base.is_venv:
        venv_cmd.append("--system-site-packages")
    _logged([*venv_cmd, str(job.path)], job.log, f"creating the venv of cell {job.cell.id}")
    if system and job.base.is_venv:
        site = Path(_site_packages(job.python))
        # addsitedir, not a bare path: the base's own .pth files (setuptools' distutils shim, editable
        # installs) must be processed too, as they are for the base interpreter itself.
        lines = [f"import site; site.addsitedir({folder!r})" for folder in job.base.site_packages]
        (site / "_reprobisect_base.pth").write_text("\n".join(lines) + "\n")


def _seeded_by_ensurepip(job: _CellInstall) -> bool:
    """Make a pinned-torch cell's venv as ``python -m venv`` does, with the pip and setuptools the interpreter
    bundles (setuptools 65.5 on CPython 3.11, 66.1 on Debian's; none from 3.12 on): the venv a user who reports a
    bug has. ``uv venv --seed`` gives the newest setuptools instead, and setuptools 81 removed ``pkg_resources``,
    which Lightning before 2.4.0 imports: such a cell failed where the reporter's venv ran (a torch that itself
    requires a newer setuptools, as 2.13.0 does, still brings one). False, with the half-made folder removed,
    where the interpreter has no ensurepip (Debian without python3-venv): then uv seeds it."""
    try:
        _logged(
            [job.base.executable, "-m", "venv", str(job.path)],
            job.log,
            f"creating the venv of cell {job.cell.id} (python -m venv, the interpreter's own pip and setuptools)",
        )
    except EnvBuildError:
        shutil.rmtree(job.path, ignore_errors=True)
        _note(job.log, "python -m venv failed (no ensurepip?): seeding the venv with uv instead")
        return False
    return True


def _uv_command(job: _CellInstall, packages: Mapping[str, str]) -> list[str]:
    """uv's install into the cell, told to exclude torch and every package the base interpreter provides (uv can
    then neither replace them nor download a multi-GB CUDA build)."""
    excludes = job.path / "uv-excludes.txt"
    system_packages = sorted(name for name, spec in packages.items() if spec == SYSTEM)
    excludes.write_text("\n".join(["torch", *system_packages]) + "\n")
    # --compile-bytecode: a sandboxed run sees the cell read-only and cannot write the byte caches, so without
    # them every run compiles deepspeed and lightning again (imports 6.2-12 s against 4.8-5.8 s, CPU, 0.19.8)
    return [job.uv, "pip", "install", "--compile-bytecode", "--python", job.python, "--excludes", str(excludes)]


def _uv_install(
    job: _CellInstall,
    install: list[str],
    pins: Mapping[str, str],
    kept: Mapping[str, Path],
    reqs: list[str],
    wheels: _WheelCache,
) -> None:
    """Install the pins with uv, its fallbacks in order: offline, from uv's cache alone, when nothing is left for
    the index to decide but the dependencies; else the index, the wheels of sdist-only releases built and kept
    first."""
    what = f"installing {' '.join(reqs)} into cell {job.cell.id}"
    if all(_exact(spec) or name in kept for name, spec in pins.items()) and _offline(install, reqs, job.log, what):
        job.step("install (offline)")
        return
    job.step("install (offline, not enough in uv's cache)")
    reqs = _with_built_wheels(pins, kept, reqs, wheels)
    job.step("building kept wheels")
    _logged([*install, *reqs], job.log, what)
    job.step("install (index)")


def _with_built_wheels(
    pins: Mapping[str, str], kept: Mapping[str, Path], reqs: list[str], wheels: _WheelCache
) -> list[str]:
    """``reqs`` with a wheel for each exact release of a package that publishes only sdists and has none kept:
    uv would build it in this cell only, so it is built once here and kept (where it cannot be, uv builds it)."""
    for name, spec in pins.items():
        if name not in kept and canonicalize_name(name) in SDIST_ONLY and _exact(spec) and spec[0].isdigit():
            wheel = wheels.build(name, spec)
            reqs = [str(wheel) if r == install_requirement(name, spec) and wheel else r for r in reqs]
    return reqs


def _exact(spec: str) -> bool:
    """An exact version or a local path: nothing left for the index to decide but the dependencies."""
    return spec[0].isdigit() or spec.startswith(("/", "./", "../")) or spec.endswith((".whl", ".tar.gz"))


def _offline(install: list[str], reqs: list[str], log: Path, what: str) -> bool:
    """Install from uv's cache alone; False (said in the log) when it lacks something, so the index is asked."""
    try:
        _logged([*install, "--offline", *reqs], log, f"{what} (offline)")
    except EnvBuildError:
        _note(log, "uv's cache lacks something the cell needs (above): asking the index")
        return False
    return True


class _WheelCache:
    """The kept wheels of the cells under ``envs_dir`` as one cell build uses them (none when turned off)."""

    def __init__(
        self, envs_dir: Path, base: BaseInterpreter, log: Path, jail: BuildJail, pins: Mapping[str, str]
    ) -> None:
        self.root = built_wheels.WHEELS.root(envs_dir)
        self.base = base
        self.log = log
        self.jail = jail
        self.pins = pins  # the cell's: a commit's build tools are held to them (built_wheels.BuildWith)

    def _say(self, text: str) -> None:
        with self.log.open("a") as handle:
            handle.write(f"# wheel cache: {text}\n")

    def kept(self, name: str, spec: str) -> Path | None:
        """The kept wheel for an exact pin of a package that publishes only sdists, or for a commit of a local
        clone (built now when it is not kept yet; a commit that does not build raises EnvBuildError), else None."""
        commit = built_wheels.git_commit(spec)
        if self.root is not None and commit is not None:
            return self._commit(self.root, name, *commit)
        if self.root is None or canonicalize_name(name) not in SDIST_ONLY or not spec[0].isdigit():
            return None
        wheel = built_wheels.lookup(self.root, name, spec, self.base.version, say=self._say)
        if wheel is not None:
            self._say(f"{name} {spec}: {wheel} (built before, not built again)")
        return wheel

    def _commit(self, root: Path, name: str, repo: Path, sha: str) -> Path:
        wheel, why = built_wheels.build_commit(root, name, repo, sha, self._how())
        if wheel is None:
            raise EnvBuildError(why)
        return wheel

    def build(self, name: str, spec: str) -> Path | None:
        """Build and keep the wheel of ``name==spec``; None when it cannot (uv then builds it in the cell)."""
        if self.root is None:
            return None
        built_wheels.WHEELS.prune(self.root)
        return built_wheels.build(self.root, name, spec, self._how())

    def _how(self) -> built_wheels.BuildWith:
        """How this cell's kept wheels are built: the base's pip, the cell's build log, its jail, its pins."""
        return built_wheels.BuildWith(
            python=self.base.executable,
            python_version=self.base.version,
            log=self.log,
            jail=self.jail,
            constraints=self.pins,
        )


def _site_packages(python: str) -> str:
    code = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    return run_tool([python, "-c", code], what="finding site-packages", timeout=60, error=EnvBuildError).stdout.strip()
