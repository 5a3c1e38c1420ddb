"""Every build of a release or a commit confined as a run is: a probed commit's ``setup.py`` is untrusted code.

A build (DeepSpeed's ``setup.py`` through its backend's hook or ``pip wheel``) runs in the same bubblewrap
sandbox as a repro (util/bwrap.py), with what a build needs and nothing else:

- readable: the whole file system read-only, but HOME is an empty tmpfs (``~/.netrc``, ``~/.ssh``,
  ``~/.config/gh``, ``~/.aws`` are not there) and so is ``/tmp``; shown again read-only: the interpreter that
  builds (and every venv its python links through), the commit's objects in the user's clone (a ``--shared``
  clone reads them there) and, for a build that needs the index, the user's pip and uv configuration files;
- writable: only the build's own folder (the source's private checkout and the wheel's folder) and, for a build
  that needs the index, pip's and uv's caches;
- the environment cleared to what a build needs (PATH, locale, compilers and their flags, CUDA, ``DS_*`` but for
  secret-looking names, ``DS_BUILD_OPS=0``), plus, for a build that needs the index, the index configuration
  (``PIP_*``, ``UV_*``, certificates, proxies) as the user set it: an index URL's credentials reach the build that
  needs them, and the harness writes the build's output only redacted;
- the network only for a build that needs the index (an isolated build's backend, a release's sdist): bwrap can
  give all of it or none, not one host; every other build (``--no-build-isolation``, the backend's hook in the
  base interpreter) gets a loopback of its own.

With ``--no-sandbox`` a build runs unconfined, its environment still cleared. Where bwrap cannot start, the
harness stops (exit 8) before it builds anything, as it does before a run.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from reprobisect.util.bwrap import PRIVATE_HOME, PRIVATE_TMP, Sandbox, link_hops, open_sandbox, tmp_limit
from reprobisect.util.redact import secret_name

__all__ = ["BuildJail", "build_environ", "install_environ"]

_NAMES = frozenset(
    {
        "PATH",
        "LANG",
        "LANGUAGE",
        "TZ",
        "TERM",
        "CC",
        "CXX",
        "CFLAGS",
        "CXXFLAGS",
        "CPPFLAGS",
        "LDFLAGS",
        "LD_LIBRARY_PATH",
        "MAX_JOBS",
        "TORCH_CUDA_ARCH_LIST",
        "SOURCE_DATE_EPOCH",
        "PYTHONDONTWRITEBYTECODE",
        "XDG_CACHE_HOME",
        "XDG_CONFIG_HOME",
    }
)
_PREFIXES = ("LC_", "CUDA_", "DS_", "NVCC_")
# what pip and uv read to find the index the user configured, and to reach it
_INDEX_PREFIXES = ("PIP_", "UV_")
_INDEX_NAMES = frozenset(
    {"SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE"}
    | {name for proxy in ("HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "ALL_PROXY") for name in (proxy, proxy.lower())}
)


def build_environ(environ: Mapping[str, str], *, index: bool) -> dict[str, str]:
    """What a build sees of ``environ``: what compiles and locates things, never a secret-looking name; with
    ``index`` also the index configuration, credentials and all (the build cannot fetch its backend without)."""
    kept = {name: value for name, value in environ.items() if _passes(name, index=index)}
    kept.setdefault("PATH", os.defpath)
    return kept | {"DS_BUILD_OPS": "0"}  # ops are compiled just in time, never into a kept wheel


def _passes(name: str, *, index: bool) -> bool:
    if index and (name.startswith(_INDEX_PREFIXES) or name in _INDEX_NAMES):
        return True
    return (name in _NAMES or name.startswith(_PREFIXES)) and not secret_name(name)  # the one rule (util.redact)


def install_environ(environ: Mapping[str, str]) -> dict[str, str]:
    """What a cell's own install (``uv pip install``, pip for a pinned torch) sees of ``environ``: a build's
    variables with the index configuration, and HOME, where uv and pip keep their cache and configuration. Such an
    install runs outside the sandbox (it writes the cell) and may build a package's sdist itself; cleared, that
    build cannot read a token the user exported for something else."""
    return _with_home(build_environ(environ, index=True), environ)


def _with_home(env: dict[str, str], environ: Mapping[str, str]) -> dict[str, str]:
    """``env`` with the user's HOME, for what runs unconfined: uv's and pip's caches and configuration live there."""
    return env | ({"HOME": environ["HOME"]} if "HOME" in environ else {})


@dataclasses.dataclass(frozen=True, kw_only=True)
class BuildJail:
    """How builds are confined: in ``sandbox``, or unconfined (None: ``--no-sandbox``). ``opened`` False: the
    default sandbox, opened (proven to start) at the first build."""

    sandbox: Sandbox | None = None
    opened: bool = False

    @classmethod
    def unconfined(cls) -> BuildJail:
        """``--no-sandbox``: builds run as the harness's children, their environment still cleared."""
        return cls(sandbox=None, opened=True)

    @classmethod
    def within(cls, sandbox: Sandbox | None) -> BuildJail:
        """Builds confined as the runs are: in ``sandbox``, or unconfined where runs are (None)."""
        return cls(sandbox=sandbox, opened=True)

    @property
    def description(self) -> str:
        """What a build log says about it."""
        sandbox = self._sandbox()
        return sandbox.description if sandbox is not None else "unconfined (--no-sandbox)"

    def _sandbox(self) -> Sandbox | None:
        return self.sandbox if self.opened else open_sandbox("on", tmp_limit(os.environ))

    def command(
        self,
        argv: Sequence[str],
        *,
        python: str,
        folder: Path,
        environ: Mapping[str, str],
        index: bool,
        readable: Iterable[Path] = (),
        hidden: Iterable[Path] = (),
    ) -> tuple[list[str], dict[str, str]]:
        """``argv`` (a build by ``python`` in ``folder``, its only writable folder) and its environment, confined;
        ``index``: it needs the index (the network, the user's index configuration and the installers' caches)."""
        env = build_environ(environ, index=index)
        sandbox = self._sandbox()
        if sandbox is None:
            return list(argv), _with_home(env, environ)
        home = environ.get("HOME", "/")
        env |= {"HOME": home if home not in ("", "/") else PRIVATE_HOME, "TMPDIR": PRIVATE_TMP}
        shown = [*_interpreter(python), *readable, *(_index_files(environ) if index else ())]
        jail = dataclasses.replace(sandbox, network="on" if index else "off")
        wrapped = jail.wrap(
            argv,
            env=env,
            workdir=folder,
            readable=shown,
            writable=_caches(environ) if index else (),
            hidden=hidden,
        )
        return wrapped, env


def _interpreter(python: str) -> list[Path]:
    """What running ``python`` reads: each venv its path links through and the installation it ends in (under
    HOME or /tmp these are hidden unless shown again)."""
    hops = link_hops(Path(python))
    return [hop.parents[1] for hop in hops if len(hop.parents) > 1]


def _home(environ: Mapping[str, str]) -> Path | None:
    home = environ.get("HOME", "")
    return Path(home) if home not in ("", "/") else None


def _index_files(environ: Mapping[str, str]) -> list[Path]:
    """The user's pip and uv configuration files, where pip and uv look for them, and the certificates named."""
    home, config = _home(environ), environ.get("XDG_CONFIG_HOME", "")
    configs = Path(config) if config else (home / ".config" if home else None)
    found = [
        Path(environ[name]) for name in ("PIP_CONFIG_FILE", "UV_CONFIG_FILE", "SSL_CERT_FILE") if environ.get(name)
    ]
    found += [configs / "pip" / "pip.conf", configs / "uv" / "uv.toml"] if configs else []
    found += [home / ".pip" / "pip.conf"] if home else []
    return found


def _caches(environ: Mapping[str, str]) -> list[Path]:
    """pip's and uv's caches, where they put them: an isolated build fetches its backend through them."""
    home, cache = _home(environ), environ.get("XDG_CACHE_HOME", "")
    caches = Path(cache) if cache else (home / ".cache" if home else None)
    found = [Path(environ[name]) for name in ("PIP_CACHE_DIR", "UV_CACHE_DIR") if environ.get(name)]
    found += [caches / "pip", caches / "uv"] if caches else []
    return found
