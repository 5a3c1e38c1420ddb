"""One uv venv per cell: created once, reused while its pins are unchanged.

torch is never resolved by uv: with ``system`` torch the venv sees the base interpreter's torch
(``--system-site-packages``, or a ``.pth`` file when the base is itself a venv) and uv is told to
exclude torch, so it can neither replace it nor download a multi-GB CUDA build. A pinned torch is
installed with the venv's own pip, which honours the user's pip configuration (local wheels, index).
DeepSpeed is an sdist whose build imports torch; uv builds it in isolation without ops (they are
compiled just in time, into the cell's own TORCH_EXTENSIONS_DIR).
"""

from __future__ import annotations

import dataclasses
import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version

from reprobisect.cells.index import list_versions
from reprobisect.errors import ConfigError, EnvBuildError, ToolError
from reprobisect.model.cell import SYSTEM, Cell
from reprobisect.util.cmd import run_logged, run_tool
from reprobisect.util.files import write_atomic

__all__ = [
    "BaseInterpreter",
    "CellEnv",
    "base_interpreter",
    "ensure_env",
    "find_python",
    "install_requirement",
    "installer",
    "resolve_cell",
    "uv_compile",
]

MARKER = "reprobisect-cell.json"
_PROBE = r"""
import json, sys, sysconfig, importlib.metadata as m
try:
    torch = m.version("torch")
except m.PackageNotFoundError:
    torch = None
print(json.dumps({
    "executable": sys.executable,
    "version": "%d.%d.%d" % sys.version_info[:3],
    "is_venv": sys.prefix != sys.base_prefix,
    "site_packages": list(dict.fromkeys([sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"],
                                         *(p for p in sys.path if p.endswith(("site-packages", "dist-packages")))])),
    "torch": torch,
}))
"""


@dataclasses.dataclass(frozen=True, kw_only=True)
class BaseInterpreter:
    """The interpreter cells are made from, and the torch it holds (if any)."""

    executable: str
    version: str
    is_venv: bool
    site_packages: tuple[str, ...]
    torch: str | None


@dataclasses.dataclass(frozen=True, kw_only=True)
class CellEnv:
    """A built cell environment."""

    cell: Cell
    path: Path
    reused: bool
    build_seconds: float

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


def base_interpreter(executable: str) -> BaseInterpreter:
    """Ask ``executable`` what it is (one short subprocess, torch is not imported)."""
    what = f"--base-python {executable!r}: cannot run it (pass a Python 3 interpreter)"
    out = run_tool([executable, "-c", _PROBE], what=what, timeout=60, error=ConfigError)
    try:
        data = json.loads(out.stdout.strip().splitlines()[-1])
        return BaseInterpreter(
            executable=str(data["executable"]),
            version=str(data["version"]),
            is_venv=bool(data["is_venv"]),
            site_packages=tuple(str(p) for p in data["site_packages"]),
            torch=None if data["torch"] is None else str(data["torch"]),
        )
    except (IndexError, ValueError, KeyError, TypeError) as exc:
        msg = f"--base-python {executable!r}: it ran but did not answer as a Python 3 interpreter does ({exc!r:.100})"
        raise ConfigError(msg) from exc


def _requirement(name: str, spec: str) -> str:
    if spec == "latest":
        return name
    if spec[0].isdigit():
        return f"{name}=={spec}"
    return f"{name}{spec}"


def resolve_cell(base: BaseInterpreter, pins: Mapping[str, str], *, uv: str = "uv") -> Cell:
    """Turn pins (exact versions, specifiers, ``latest``) into a concrete cell.

    Non-exact pins are resolved together by ``uv pip compile`` against the index the user's uv
    configuration points at, so ``latest`` means the newest releases that install together.
    """
    torch_pin = pins.get("torch", SYSTEM)
    if torch_pin == SYSTEM:
        if base.torch is None:
            msg = (
                f"torch: 'system' but the base interpreter {base.executable} has no torch; "
                "install torch into it (pip install torch) or pin one with --torch VERSION"
            )
            raise ConfigError(msg)
        torch_version, torch_source = base.torch, SYSTEM
    else:
        torch_version, torch_source = torch_pin, "pinned"
    others = {name: spec for name, spec in pins.items() if name != "torch"}
    empty = sorted(name for name, spec in pins.items() if not spec.strip())
    if empty:
        msg = f"pin {empty[0]}: empty; give a version, a specifier, 'latest' or 'system'"
        raise ConfigError(msg)
    exact = {name: spec for name, spec in others.items() if spec == SYSTEM or (spec != "latest" and spec[0].isdigit())}
    loose = {name: spec for name, spec in others.items() if name not in exact}
    if loose:
        if installer() == "uv":
            exact.update(_compile(base, [_requirement(n, s) for n, s in loose.items()], exact, uv=uv))
        else:  # no uv to resolve together: the newest release of each that the index lists
            exact.update(_newest(base, loose))
    return Cell(python=base.version, torch=torch_version, torch_source=torch_source, packages=exact)


def _newest(base: BaseInterpreter, loose: Mapping[str, str]) -> dict[str, str]:
    chosen = {}
    for name, spec in loose.items():
        releases = [v for v in list_versions(base.executable, name) if not Version(v).is_prerelease]
        if spec != "latest":
            releases = [v for v in releases if Version(v) in SpecifierSet(spec)]
        if not releases:
            msg = f"{name}{'' if spec == 'latest' else spec}: no release on the configured index"
            raise ConfigError(msg)
        chosen[name] = releases[-1]
    return chosen


def uv_compile(
    requirements: Sequence[str],
    *,
    python_version: str,
    excluded: Sequence[str],
    platform: str | None = None,
    uv: str = "uv",
) -> subprocess.CompletedProcess[str]:
    """``uv pip compile`` of ``requirements`` for a Python (and platform), torch and ``excluded`` left out."""
    with tempfile.TemporaryDirectory() as tmp:
        excludes = Path(tmp) / "excludes.txt"
        excludes.write_text("\n".join(["torch", *excluded]) + "\n")
        cmd = [
            uv,
            "pip",
            "compile",
            "-",
            "--quiet",
            "--no-header",
            "--no-annotate",
            "--python-version",
            python_version,
            "--excludes",
            str(excludes),
        ]
        if platform:
            cmd += ["--python-platform", platform]
        return run_tool(
            cmd, what="uv pip compile", timeout=600, error=EnvBuildError, check=False, stdin="\n".join(requirements)
        )


def _compile(base: BaseInterpreter, requirements: list[str], fixed: Mapping[str, str], *, uv: str) -> dict[str, str]:
    lines = [*requirements, *(f"{n}=={v}" for n, v in fixed.items() if v != SYSTEM)]
    out = uv_compile(
        lines,
        python_version=".".join(base.version.split(".")[:2]),
        excluded=[n for n, v in fixed.items() if v == SYSTEM],
        uv=uv,
    )
    if out.returncode != 0:
        msg = f"cannot resolve {', '.join(requirements)} together: {out.stderr.strip()[-800:]}"
        raise ConfigError(msg)
    wanted = {canonicalize_name(name): name for name in (re.split(r"[<>=!~ ]", r, maxsplit=1)[0] for r in requirements)}
    resolved = {}
    for line in out.stdout.splitlines():
        name, sep, version = line.strip().partition("==")
        if sep and canonicalize_name(name.strip()) in wanted:
            resolved[wanted[canonicalize_name(name.strip())]] = version.split(";")[0].strip()
    missing = sorted(set(wanted.values()) - set(resolved))
    if missing:
        msg = f"cannot resolve {missing[0]!r}: uv pip compile named no version of it; check the package's name"
        raise ConfigError(msg)
    return resolved


def install_requirement(name: str, spec: str) -> str:
    """What uv is asked to install for one pin: ``name==1.2``, ``name @ git+...@ref`` or a path."""
    if "://" in spec or spec.startswith("git+"):
        return f"{name} @ {spec}"
    if spec.startswith(("/", "./", "../")) or spec.endswith((".whl", ".tar.gz")):
        return str(Path(spec).resolve())
    return f"{name}=={spec}"


def _local_stamp(cell: Cell) -> dict[str, float]:
    """Modification times of local paths, so a rebuilt wheel or edited checkout rebuilds the cell."""
    stamps = {}
    for spec in cell.packages.values():
        path = Path(spec)
        if spec.startswith(("/", "./", "../")) and path.exists():
            stamps[spec] = path.stat().st_mtime
    return stamps


def _fingerprint(cell: Cell, base: BaseInterpreter) -> str:
    blob = json.dumps(
        {"cell": cell.to_dict(), "base": base.executable, "local": _local_stamp(cell), "format": 1}, sort_keys=True
    )
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def ensure_env(
    cell: Cell, base: BaseInterpreter, envs_dir: Path, *, uv: str = "uv", on_build: Callable[[], None] | None = None
) -> CellEnv:
    """Create the cell's venv, or reuse it when its fingerprint (pins + base interpreter) matches.

    A lock file per cell makes two harness processes that want the same cell build it once. ``on_build``
    is called when a build really starts (so a session can say so before a minute of installing).
    """
    envs_dir = envs_dir.resolve()
    envs_dir.mkdir(parents=True, exist_ok=True)
    with (envs_dir / f"{cell.id}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return _ensure_env_locked(cell, base, envs_dir, uv=uv, on_build=on_build)


def _ensure_env_locked(
    cell: Cell, base: BaseInterpreter, envs_dir: Path, *, uv: str, on_build: Callable[[], None] | None
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
        _build(cell, base, path, log, uv=uv)
    except EnvBuildError:
        marker.unlink(missing_ok=True)
        raise
    marker_data = {"fingerprint": fingerprint, "tree": tree_digest(path), "cell": cell.to_dict()}
    write_atomic(marker, json.dumps(marker_data, indent=2), what="the cell's marker")
    return CellEnv(cell=cell, path=path, reused=False, build_seconds=time.perf_counter() - start)


_UNHASHED = frozenset({"__pycache__", "torch_extensions", "overlays", MARKER})  # what the harness writes later


def tree_digest(path: Path) -> str:
    """A digest of every file of a cell (name, size, modification time), byte caches and op builds aside.

    Taken when the cell is built and again before it is reused (patch overlays and op builds aside, which the
    harness writes later): a cell something wrote into since (a
    ``sitecustomize.py`` planted by an unconfined run, say) no longer matches and is built again, so no run
    can change the verdict of the runs after it.
    """
    digest = hashlib.sha256()
    for root, dirs, files in os.walk(path):
        dirs[:] = sorted(d for d in dirs if d not in _UNHASHED)
        for name in sorted(files):
            if name in _UNHASHED:  # byte caches live in __pycache__ (in _UNHASHED); a bare .pyc is imported: hashed
                continue
            file = Path(root) / name
            try:
                info = file.lstat()
            except OSError:
                continue
            digest.update(os.fsencode(file.relative_to(path)))  # names need not be UTF-8
            digest.update(f"\0{info.st_size}\0{info.st_mtime_ns}\n".encode())
    return digest.hexdigest()[:20]


def _logged(cmd: list[str], log: Path, what: str) -> None:
    run_logged(cmd, log=log, what=what, timeout=3600, error=EnvBuildError)


def installer() -> str:
    """``uv`` when it is on PATH (fast), else ``pip`` (a GPU image or cluster node may have no uv).

    REPROBISECT_INSTALLER=uv|pip forces one.
    """
    forced = os.environ.get("REPROBISECT_INSTALLER")
    if forced in ("uv", "pip"):
        return forced
    return "uv" if shutil.which("uv") else "pip"


def _build(cell: Cell, base: BaseInterpreter, path: Path, log: Path, *, uv: str) -> None:
    python = str(path / "bin" / "python")
    system = cell.torch_source == SYSTEM
    use_uv = installer() == "uv"
    if use_uv:
        venv_cmd = [uv, "venv", "--quiet", "--python", base.executable]
        if not system:
            venv_cmd.append("--seed")  # pip, to install torch the way the user's pip config says
    else:  # no pip inside: the base interpreter's pip installs into the cell (pip --python), no ensurepip needed
        venv_cmd = [base.executable, "-m", "venv", "--without-pip"]
    if system and not base.is_venv:
        venv_cmd.append("--system-site-packages")
    _logged([*venv_cmd, str(path)], log, f"creating the venv of cell {cell.id}")
    if system and base.is_venv:
        site = Path(_site_packages(python))
        # addsitedir, not a bare path: the base's own .pth files (setuptools' distutils shim, editable
        # installs) must be processed too, as they are for the base interpreter itself.
        lines = [f"import site; site.addsitedir({path!r})" for path in base.site_packages]
        (site / "_reprobisect_base.pth").write_text("\n".join(lines) + "\n")
    pip = [python, "-m", "pip"] if use_uv else [base.executable, "-m", "pip", "--python", python]
    if not system:
        _logged(
            [*pip, "install", "--quiet", f"torch=={cell.torch}"],
            log,
            f"installing torch {cell.torch} into cell {cell.id}",
        )
    reqs = [install_requirement(name, spec) for name, spec in sorted(cell.packages.items()) if spec != SYSTEM]
    if not reqs:
        return
    if not use_uv:  # pip sees the base interpreter's packages as installed and keeps them
        _logged([*pip, "install", "--quiet", *reqs], log, f"installing {' '.join(reqs)} (pip)")
        return
    excludes = path / "uv-excludes.txt"
    system_packages = sorted(name for name, spec in cell.packages.items() if spec == SYSTEM)
    excludes.write_text("\n".join(["torch", *system_packages]) + "\n")
    _logged(
        [uv, "pip", "install", "--python", python, "--excludes", str(excludes), *reqs],
        log,
        f"installing {' '.join(reqs)} into cell {cell.id}",
    )


def _site_packages(python: str) -> str:
    code = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    return run_tool([python, "-c", code], what="finding site-packages", timeout=60, error=EnvBuildError).stdout.strip()


def _runs(python: str) -> bool:
    try:
        run_tool([python, "-c", "pass"], what="trying an interpreter", timeout=60)
    except ToolError:
        return False
    return True


def find_python(version: str) -> str | None:
    """An interpreter of this Python version on this machine, or None (nothing is downloaded)."""
    if "/" in version:
        return version if Path(version).exists() else None
    try:
        done = run_tool(["uv", "python", "find", "--no-python-downloads", version], what="uv python find", timeout=60)
        if done.stdout.strip():
            return done.stdout.strip()
    except ToolError:
        pass
    found = shutil.which(f"python{version}")
    if found and _runs(found):
        return found
    pyenv = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
    for candidate in sorted(pyenv.glob(f"{version}*/bin/python{version}"), reverse=True):
        return str(candidate)
    return None
