"""A git history built from two releases' sdists, for bisecting between releases where CI has no GitHub.

`build_history` downloads the sdists of `package==old` and `package==new` (from whatever index pip's configuration
names), commits the old release's tree as one commit tagged `v{old}`, then the new release's changes as one commit
per added, changed or removed file, the last one tagged `v{new}`. Names, e-mails and dates are fixed, so the
same two sdists give the same shas on every machine.

Commit order, so that every intermediate commit still builds and imports: added files first (nothing imports
them yet), then changed files, then removed files (nothing imports them any more), then the release's metadata
(`version.txt`, `PKG-INFO`, `*.egg-info/*`, `setup.py`) last, `version.txt` the very last, so that only the
release's own last commit carries the new version number. Alphabetical within each group, except that an added or
changed .py file comes after the added or changed files it imports from (read with ast): DeepSpeed 0.17.1's
checkpoint engines import a function that its runtime/utils.py adds, and in alphabetical order ten commits did not
import. `broken_imports` checks every commit that way (no import, seconds). What the order cannot keep whole is a
change spread over several files at run time (a constructor's new argument and its caller): such commits import
but may fail differently from both releases (see the bisect's output).

`python tests/integration/release_history.py --old 0.16.4 --new 0.16.5 --script S --root R` also bisects: it
builds a wheel of a commit (`git archive` + `pip wheel --no-build-isolation`, DS_BUILD_OPS=0), installs it into one
venv that sees the base interpreter's torch and runs the script there, halving the commits until one file's commit
flips the script's exit status.
"""

from __future__ import annotations

import argparse
import ast
import filecmp
import itertools
import os
import shutil
import subprocess
import sys
import tarfile
import time
from dataclasses import dataclass, field
from pathlib import Path

AUTHOR = ("release-history", "release-history@invalid")
# 2026-01-01 00:00:00 UTC; each commit one minute after the one before it
EPOCH = 1767225600
PR_BASE = 9000  # commit i of the new release says (#9000 + i): plausible for DeepSpeed, never a real PR of its own
METADATA_NAMES = ("PKG-INFO", "setup.py", "setup.cfg", "pyproject.toml")


@dataclass(frozen=True)
class History:
    repo: Path
    package: str
    old: str
    new: str
    old_tag: str
    new_tag: str
    # one (sha, path, action) per file commit of the new release, in order; action is add, update or remove
    commits: list[tuple[str, str, str]] = field(default_factory=list)

    @property
    def shas(self) -> list[str]:
        return [sha for sha, _, _ in self.commits]

    def sha_of(self, path: str) -> str:
        return next(sha for sha, p, _ in self.commits if p == path)

    def path_of(self, sha: str) -> str:
        return next(p for s, p, _ in self.commits if s == sha)


def _git(repo: Path, *args: str, env: dict[str, str] | None = None) -> str:
    cmd = [
        "git",
        "-C",
        str(repo),
        "-c",
        f"user.name={AUTHOR[0]}",
        "-c",
        f"user.email={AUTHOR[1]}",
        "-c",
        "commit.gpgsign=false",
        "-c",
        "tag.gpgsign=false",
        "-c",
        "core.autocrlf=false",
        "-c",
        "core.excludesFile=/dev/null",
        "-c",
        "core.hooksPath=/dev/null",
        *args,
    ]
    return subprocess.run(cmd, check=True, capture_output=True, text=True, env=env).stdout.strip()


def download_sdist(python: str, package: str, version: str, dest: Path) -> Path:
    """The sdist of package==version in dest, downloaded with pip (its configured index) unless already there."""
    dest.mkdir(parents=True, exist_ok=True)
    found = _find_sdist(dest, package, version)
    if found is None:
        pip = [python, "-m", "pip", "download", "-q", "--no-deps", "--no-binary", ":all:"]
        subprocess.run(
            [*pip, f"{package}=={version}", "-d", str(dest)],
            check=True,
            capture_output=True,
            text=True,
        )
        found = _find_sdist(dest, package, version)
    if found is None:
        raise FileNotFoundError(f"pip downloaded no sdist of {package}=={version} into {dest}")
    return found


def _find_sdist(folder: Path, package: str, version: str) -> Path | None:
    stems = {f"{package}-{version}", f"{package.replace('-', '_')}-{version}"}
    for path in sorted(folder.iterdir()):
        for suffix in (".tar.gz", ".zip"):
            if path.name.endswith(suffix) and path.name[: -len(suffix)] in stems:
                return path
    return None


def unpack(sdist: Path, dest: Path) -> Path:
    """The sdist's top folder, unpacked under dest (emptied first)."""
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    with tarfile.open(sdist) as tar:
        extract_data(tar, dest)
    (top,) = list(dest.iterdir())
    return top


def extract_data(archive: tarfile.TarFile, dest: Path) -> None:
    """Unpack ``archive`` into ``dest`` as ``filter="data"`` does; ValueError naming a member it refuses.

    ``filter`` came in Python 3.11.4; Debian 12's 3.11.2, the oldest Python this package supports, has no such
    argument. Where the filter exists it is used; where it does not, the same refusals are made here first."""
    if hasattr(tarfile, "data_filter"):
        archive.extractall(dest, filter="data")
        return
    root = dest.resolve()
    members = archive.getmembers()
    for member in members:
        target = (root / member.name).resolve()
        if member.name.startswith("/") or ".." in Path(member.name).parts or not target.is_relative_to(root):
            raise ValueError(f"{archive.name}: member {member.name!r} would be written outside {dest}")
        if not (member.isfile() or member.isdir()):
            raise ValueError(f"{archive.name}: member {member.name!r} is not a plain file or folder")
        # as the filter does: the files are ours, not the archive's user's (as root, tarfile would chown them to
        # the packer's uid, and git then refuses the clone made of them: "detected dubious ownership")
        member.uid, member.gid, member.uname, member.gname = os.getuid(), os.getgid(), "", ""
        member.mode &= 0o755
    archive.extractall(dest, members=members)  # every member checked above


def _files(tree: Path) -> set[str]:
    return {p.relative_to(tree).as_posix() for p in tree.rglob("*") if p.is_file() or p.is_symlink()}


def _same(a: Path, b: Path) -> bool:
    if a.is_symlink() or b.is_symlink():
        return a.is_symlink() and b.is_symlink() and os.readlink(a) == os.readlink(b)
    return filecmp.cmp(a, b, shallow=False) and (a.stat().st_mode & 0o111 != 0) == (b.stat().st_mode & 0o111 != 0)


def _is_metadata(path: str) -> bool:
    parts = path.split("/")
    return path == "version.txt" or (len(parts) == 1 and path in METADATA_NAMES) or parts[0].endswith(".egg-info")


def change_order(old_tree: Path, new_tree: Path) -> list[tuple[str, str]]:
    """(path, action) for every file that differs, in commit order (see the module's docstring)."""
    old, new = _files(old_tree), _files(new_tree)
    added = sorted(p for p in new - old if not _is_metadata(p))
    changed = sorted(p for p in old & new if not _is_metadata(p) and not _same(old_tree / p, new_tree / p))
    removed = sorted(p for p in old - new if not _is_metadata(p))
    metadata = [p for p in sorted(old | new) if _is_metadata(p)]
    metadata = [p for p in metadata if p not in old or p not in new or not _same(old_tree / p, new_tree / p)]
    metadata.sort(key=lambda p: p == "version.txt")  # stable: version.txt last, the rest alphabetical
    actions = {p: "add" for p in added} | {p: "update" for p in changed} | {p: "remove" for p in removed}
    for p in metadata:
        actions[p] = "add" if p not in old else "remove" if p not in new else "update"
    return [(p, actions[p]) for p in _imported_first(added + changed, new_tree, new) + removed + metadata]


# ---- imports between the files of a tree (ast, no import) ----------------------------------------------------


@dataclass(frozen=True)
class _Module:
    defined: frozenset[str] | None  # top-level names; None: unknown (a star import or a module __getattr__)
    imports: tuple[tuple[str, tuple[str, ...]], ...]  # (absolute module, names imported from it; () for `import m`)


def _module_name(path: str) -> tuple[str, str]:
    """(module, package) of a .py path: a/b/c.py -> (a.b.c, a.b); a/b/__init__.py -> (a.b, a.b)."""
    parts = path[: -len(".py")].split("/")
    if parts[-1] == "__init__":
        parts = parts[:-1]
        return ".".join(parts), ".".join(parts)
    return ".".join(parts), ".".join(parts[:-1])


def _parse(source: bytes, path: str) -> _Module:
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return _Module(None, ())
    package = _module_name(path)[1]
    defined: set[str] | None = set()
    imports = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imports += [(alias.name, ()) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".") if package else []
            if node.level:
                base = base[: len(base) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            imports.append((module, tuple(alias.name for alias in node.names)))
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            defined.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            defined |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names = [alias.asname or alias.name.split(".")[0] for alias in node.names]
            if "*" in names:
                return _Module(None, tuple(imports))
            defined |= set(names)
        else:  # names bound under if/try/with at the top level
            defined |= {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
            defined |= {n.name for n in ast.walk(node) if isinstance(n, ast.FunctionDef | ast.ClassDef)}
            defined |= {
                a.asname or a.name.split(".")[0]
                for n in ast.walk(node)
                if isinstance(n, ast.Import | ast.ImportFrom)
                for a in n.names
            }
    if "__getattr__" in defined:
        defined = None
    return _Module(None if defined is None else frozenset(defined), tuple(imports))


def _module_path(module: str, files: set[str] | dict[str, object]) -> str | None:
    base = module.replace(".", "/")
    for candidate in (f"{base}.py", f"{base}/__init__.py"):
        if candidate in files:
            return candidate
    return None


def _imported_first(paths: list[str], tree: Path, files: set[str]) -> list[str]:
    """paths reordered so that a .py file comes after the files of `paths` it imports from (their new versions
    define what it imports), otherwise in the given order; an import cycle is broken at its earliest file."""
    pending = set(paths)
    deps: dict[str, set[str]] = {p: set() for p in paths}
    for path in paths:
        if not path.endswith(".py"):
            continue
        for module, names in _parse((tree / path).read_bytes(), path).imports:
            for target in [module, *(f"{module}.{n}" for n in names)]:
                found = _module_path(target, files)
                if found in pending and found != path:
                    deps[path].add(found)
    order: list[str] = []
    done: set[str] = set()
    rank = {p: i for i, p in enumerate(paths)}
    while len(order) < len(paths):
        ready = [p for p in paths if p not in done and deps[p] <= done]
        if ready:
            pick = min(ready, key=rank.__getitem__)
        else:  # every file left waits on a cycle: walk unmet imports from the earliest file until one repeats
            walk = [min(set(paths) - done, key=rank.__getitem__)]
            while (step := min(deps[walk[-1]] - done, key=rank.__getitem__)) not in walk:
                walk.append(step)
            pick = min(walk[walk.index(step) :], key=rank.__getitem__)
        order.append(pick)
        done.add(pick)
    return order


def broken_imports(repo: Path, shas: list[str]) -> dict[str, list[str]]:
    """For each commit, the `from X import name` of the package's .py files that do not resolve (X is a file of
    the tree that does not define name, or no file of the tree while its top package is one), leaving out those
    that do not resolve at the first commit or at the last either. Read from the trees with ast: no import."""

    def state(sha: str) -> dict[str, _Module]:
        listing = _git(repo, "ls-tree", "-r", "--name-only", sha).splitlines()
        modules = {}
        for path in listing:
            if path.endswith(".py"):
                source = subprocess.run(
                    ["git", "-C", str(repo), "show", f"{sha}:{path}"], check=True, capture_output=True
                ).stdout
                modules[path] = _parse(source, path)
        return modules

    def problems(modules: dict[str, _Module]) -> set[str]:
        tops = {p.split("/")[0] for p in modules if "/" in p}
        found = set()
        for path, info in modules.items():
            for module, names in info.imports:
                target = _module_path(module, modules)
                if target is None:
                    if module.split(".")[0] in tops and not any(
                        p.startswith(module.replace(".", "/") + "/") for p in modules
                    ):
                        found.add(f"{path}: no module {module}")
                    continue
                defined = modules[target].defined
                for name in names:
                    if name == "*" or defined is None or name in defined:
                        continue
                    if _module_path(f"{module}.{name}", modules) is None:
                        found.add(f"{path}: from {module} import {name}")
        return found

    first, last = state(shas[0]), state(shas[-1])
    baseline = problems(first) | problems(last)
    result: dict[str, list[str]] = {shas[0]: []}
    current = dict(first)
    for parent, sha in itertools.pairwise(shas):
        for line in _git(repo, "diff", "--name-status", parent, sha).splitlines():
            status, path = line.split("\t", 1)
            if not path.endswith(".py"):
                continue
            if status == "D":
                current.pop(path, None)
            else:
                source = subprocess.run(
                    ["git", "-C", str(repo), "show", f"{sha}:{path}"], check=True, capture_output=True
                ).stdout
                current[path] = _parse(source, path)
        result[sha] = sorted(problems(current) - baseline)
    return result


def build_history(
    root: Path, package: str, old: str, new: str, python: str = sys.executable, sdists: Path | None = None
) -> History:
    """The repository root/repo (made afresh): v{old}'s tree, then one commit per file that v{new} changed.

    The sdists are downloaded into `sdists` (default root/sdists) unless they are there already."""
    sdists = sdists or root / "sdists"
    old_tree = unpack(download_sdist(python, package, old, sdists), root / "unpacked" / old)
    new_tree = unpack(download_sdist(python, package, new, sdists), root / "unpacked" / new)
    repo = root / "repo"
    if repo.exists():
        shutil.rmtree(repo)
    shutil.copytree(old_tree, repo, symlinks=True)
    _git(repo, "init", "-q", "-b", "main")
    clock = [EPOCH]

    def commit(message: str) -> str:
        stamp = f"@{clock[0]} +0000"
        clock[0] += 60
        env = os.environ | {"GIT_AUTHOR_DATE": stamp, "GIT_COMMITTER_DATE": stamp}
        _git(repo, "commit", "-q", "--no-verify", "-m", message, env=env)
        return _git(repo, "rev-parse", "HEAD")

    _git(repo, "add", "-A", "-f", ".")
    commit(f"{package} {old} (the release's sdist)")
    _git(repo, "tag", f"v{old}")
    commits = []
    for i, (path, action) in enumerate(change_order(old_tree, new_tree), start=1):
        target = repo / path
        if action == "remove":
            target.unlink()
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            if target.exists() or target.is_symlink():
                target.unlink()
            shutil.copy2(new_tree / path, target, follow_symlinks=False)
        _git(repo, "add", "-A", "-f", "--", path)
        verb = {"add": "Add", "update": "Update", "remove": "Remove"}[action]
        commits.append((commit(f"{verb} {path} from {new} (#{PR_BASE + i})"), path, action))
    _git(repo, "tag", f"v{new}")
    return History(repo, package, old, new, f"v{old}", f"v{new}", commits)


# ---- building and trying a commit ----------------------------------------------------------------------------


def build_wheel(repo: Path, sha: str, work: Path, python: str) -> Path:
    """A wheel of the commit sha (DeepSpeed: DS_BUILD_OPS=0, no ops pre-built; they are compiled when used)."""
    src, wheels = work / f"src-{sha[:12]}", work / f"wheels-{sha[:12]}"
    for folder in (src, wheels):
        if folder.exists():
            shutil.rmtree(folder)
        folder.mkdir(parents=True)
    archive = subprocess.run(["git", "-C", str(repo), "archive", sha], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(src)], input=archive, check=True)
    subprocess.run(
        [python, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", str(src), "-w", str(wheels)],
        check=True,
        capture_output=True,
        env=os.environ | {"DS_BUILD_OPS": "0"},
    )
    shutil.rmtree(src)
    (wheel,) = wheels.glob("*.whl")
    return wheel


def make_venv(venv: Path, python: str) -> Path:
    """A venv that sees the base interpreter's packages (its torch): the wheels go in with --no-deps."""
    if not (venv / "bin" / "python").exists():
        subprocess.run(["uv", "venv", "-q", "--system-site-packages", "--python", python, str(venv)], check=True)
    return venv / "bin" / "python"


def install_wheel(venv_python: Path, wheel: Path, extra: list[str]) -> None:
    """Replace the package in the venv by this wheel; `extra` are its dependencies the base interpreter lacks.

    The installed files get one fixed mtime: ninja, which torch's JIT ops build with, rebuilds an op whose sources
    are newer than its objects, and every reinstall would make them so. Give each distinct op source tree its own
    TORCH_EXTENSIONS_DIR (`ops_key`), or a changed op would not be rebuilt."""
    package = wheel.name.split("-")[0]
    cmd = ["uv", "pip", "install", "-q", "--python", str(venv_python), "--no-deps", "--reinstall-package"]
    subprocess.run([*cmd, package, str(wheel), *extra], check=True, capture_output=True)
    for installed in (venv_python.parent.parent / "lib").glob(f"python*/site-packages/{package}"):
        for path in installed.rglob("*"):
            if path.is_file() and not path.is_symlink():
                os.utime(path, (EPOCH, EPOCH))


def ops_key(repo: Path, sha: str, folder: str = "deepspeed/ops/csrc") -> str:
    """The git tree id of the commit's op sources: equal keys, equal sources. (A changed compiler command, from a
    changed op builder, ninja notices by itself.)"""
    return _git(repo, "rev-parse", f"{sha}:{folder}")[:12]


def run_script(venv_python: Path, script: Path, env: dict[str, str], timeout: float = 600) -> tuple[int, str]:
    done = subprocess.run(
        [str(venv_python), str(script)],
        env=os.environ | env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    return done.returncode, (done.stdout + done.stderr)


def imports_at(repo: Path, sha: str, work: Path, python: str, modules: list[str]) -> tuple[bool, str]:
    """Whether the commit's source tree imports these modules as it is (no build: the sdist holds every file)."""
    src = work / "import-check"
    if src.exists():
        shutil.rmtree(src)
    src.mkdir(parents=True)
    archive = subprocess.run(["git", "-C", str(repo), "archive", sha], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(src)], input=archive, check=True)
    code = "import importlib, sys\nfor m in sys.argv[1:]:\n    importlib.import_module(m)\n"
    done = subprocess.run(
        [python, "-c", code, *modules],
        cwd=src,
        env=os.environ | {"PYTHONPATH": str(src), "DS_ACCELERATOR": "cpu"},
        capture_output=True,
        text=True,
        check=False,
    )
    return done.returncode == 0, done.stderr[-2000:]


def _main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--package", default="deepspeed")
    parser.add_argument("--old", required=True)
    parser.add_argument("--new", required=True)
    parser.add_argument("--root", type=Path, required=True)
    parser.add_argument("--python", default=sys.executable, help="the base interpreter (it has torch and setuptools)")
    parser.add_argument("--script", type=Path, help="bisect the history with this script (exit 0: good)")
    parser.add_argument("--extra", default="einops,hjson,msgpack,ninja,psutil,tqdm,nvidia-ml-py")
    parser.add_argument("--check-imports", default="", help="comma-separated modules to import at every commit")
    args = parser.parse_args()
    started = time.monotonic()
    history = build_history(args.root, args.package, args.old, args.new, args.python)
    print(f"history: {len(history.commits)} file commits in {time.monotonic() - started:.1f} s at {history.repo}")
    for i, (sha, path, action) in enumerate(history.commits, start=1):
        print(f"  {i:3d} {sha[:10]} {action:6s} {path}")
    work = args.root / "work"
    t = time.monotonic()
    base_sha = _git(history.repo, "rev-parse", history.old_tag)
    broken = broken_imports(history.repo, [base_sha, *history.shas])
    print(f"static import check of {len(broken)} commits in {time.monotonic() - t:.1f} s:")
    for i, sha in enumerate([base_sha, *history.shas]):
        for problem in broken[sha]:
            print(f"  {i:3d} {sha[:10]} does not resolve: {problem}")
    venv_python = make_venv(args.root / "venv", args.python)
    extra = [e for e in args.extra.split(",") if e]
    if args.check_imports:
        # the venv: the base interpreter plus the dependencies it lacks (the source tree comes first on sys.path)
        subprocess.run(["uv", "pip", "install", "-q", "--python", str(venv_python), *extra], check=True)
        modules = args.check_imports.split(",")
        for i, sha in enumerate([_git(history.repo, "rev-parse", history.old_tag), *history.shas]):
            t = time.monotonic()
            ok, err = imports_at(history.repo, sha, work, str(venv_python), modules)
            print(f"  import at {i:3d} {sha[:10]}: {'ok' if ok else 'FAILS'} ({time.monotonic() - t:.1f} s)")
            if not ok:
                print(err)
    if args.script is None:
        return 0
    env = {"DS_ACCELERATOR": "cpu", "OMP_NUM_THREADS": "1"}
    seen: dict[int, bool] = {}

    def good(index: int) -> bool:
        if index not in seen:
            sha = _git(history.repo, "rev-parse", history.old_tag) if index == 0 else history.shas[index - 1]
            t0 = time.monotonic()
            wheel = build_wheel(history.repo, sha, work, args.python)
            t1 = time.monotonic()
            install_wheel(venv_python, wheel, extra)
            t2 = time.monotonic()
            ext = args.root / "torch-ext" / ops_key(history.repo, sha)
            rc, out = run_script(venv_python, args.script.resolve(), env | {"TORCH_EXTENSIONS_DIR": str(ext)})
            t3 = time.monotonic()
            seen[index] = rc == 0
            label = "base" if index == 0 else history.path_of(sha)
            print(
                f"commit {index:3d} {sha[:10]} ({label}): {'PASS' if rc == 0 else f'FAIL rc={rc}'}; "
                f"wheel {t1 - t0:.1f} s, install {t2 - t1:.1f} s, run {t3 - t2:.1f} s",
                flush=True,
            )
            if rc != 0:
                print("    " + (out.strip().splitlines() or [""])[-1][:300], flush=True)
        return seen[index]

    lo, hi = 0, len(history.commits)
    if good(lo) == good(hi):
        print(f"{history.old_tag} and {history.new_tag} give the same outcome: nothing to bisect")
        return 1
    want = good(lo)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if good(mid) == want:
            lo = mid
        else:
            hi = mid
    sha, path, action = history.commits[hi - 1]
    flip = "PASS -> FAIL" if want else "FAIL -> PASS"
    print(f"first commit that flips the script ({flip}): {hi} {sha[:10]} {action} {path}")
    print(f"total {time.monotonic() - started:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(_main())
