"""Just-in-time ops (DeepSpeed's CPU comm op, FusedAdam, ...) from one content-addressed cache shared by every
cell, overlay and bisection probe: an op whose binary would be the same is compiled once, not once per cell.

Installed by the bootstrap when ``REPROBISECT_OP_CACHE`` names the cache's folder. It wraps
``torch.utils.cpp_extension.load`` (what DeepSpeed's ``jit_load`` calls) the moment that module is imported.
Each call is keyed on what determines the binary, never on where the sources lie (so two cells, or a cell
and a patch's private copy, with the same op sources share one build):

- the op's name, the content of its sources, of the files beside them and under its include folders;
- its compiler and linker flags (paths inside the cell replaced by a placeholder), CUDA or not; an option given its
  default value counts as not given;
- torch (version with its local build tag, git revision, CUDA version, C++ ABI), the Python version;
- the compiler (``$CXX`` or ``c++``, its ``--version``), ``TORCH_CUDA_ARCH_LIST``, ``CUDA_HOME``, and the GPU's
  compute capability when CUDA is in the build and no arch list is given; the CPU's flags when a flag says
  ``native``.

A build runs under an exclusive ``flock`` on ``<key>.flock`` (released by the kernel when a process dies: a
killed build never blocks the next one); whoever gets the lock and finds no ``<name>.so`` clears the folder
(a killed build's torch ``lock`` and half-written objects) and builds; the others wait, then load what was
built. A hit loads the ``.so`` directly, without ninja. Each call prints one ``@@repro`` event line (``op``)
saying whether it was built or taken from the cache, so the record keeps where its op came from.

This file runs inside the cell's interpreter: standard library only (torch is imported by the repro).
"""

import contextlib
import fcntl
import functools
import hashlib
import importlib.util
import inspect
import json
import os
import runpy
import shutil
import subprocess
import sys
import time

MARK = "@@repro "
_TARGET = "torch.utils.cpp_extension"
_INSTALLED = "_reprobisect_op_cache"
_SKIPPED_ARGS = ("verbose", "keep_intermediates", "build_directory", "name", "sources", "extra_include_paths")


def _file_digest(path, digest):
    try:
        with open(path, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    except OSError:
        digest.update(b"<unreadable>")


def _tree_digest(folder, digest, *, recursive):
    """Names (relative) and contents of the files of a folder, sorted: where the folder lies does not count."""
    entries = []
    if recursive:
        for root, dirs, files in os.walk(folder):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__")
            entries += [os.path.join(root, name) for name in files]
    else:
        try:
            entries = [os.path.join(folder, n) for n in os.listdir(folder) if os.path.isfile(os.path.join(folder, n))]
        except OSError:
            entries = []
    for path in sorted(entries):
        digest.update(os.fsencode(os.path.relpath(path, folder)) + b"\0")
        _file_digest(path, digest)


def _placeholders():
    """Folders whose paths may appear in flags and differ from cell to cell: replaced before hashing."""
    roots = {sys.prefix}
    for name in ("deepspeed", "torch"):
        module = sys.modules.get(name)
        if module is not None and getattr(module, "__file__", None):
            roots.add(os.path.dirname(os.path.abspath(module.__file__)))
    return sorted((r for r in roots if r and r != os.sep), key=len, reverse=True)


def _normalized(values):
    text = json.dumps(values, sort_keys=True, default=str)
    for root in _placeholders():
        text = text.replace(root, "<cell>")
    return text


@functools.lru_cache(maxsize=None)  # one probe per compiler per run (functools.cache is 3.9+: cells run 3.8)
def _compiler_of(cxx):
    try:
        out = subprocess.run([cxx, "--version"], capture_output=True, text=True, timeout=30, check=False).stdout
    except (OSError, subprocess.SubprocessError):
        out = ""
    return f"{cxx}: {out.strip().splitlines()[0] if out.strip() else '?'}"


def _compiler():
    return _compiler_of(os.environ.get("CXX", "c++"))


def _cpu_flags():
    try:
        with open("/proc/cpuinfo") as handle:
            return next((line for line in handle if line.startswith("flags")), "")
    except OSError:
        return ""


def _torch_identity(with_cuda):
    import torch

    parts = [
        str(torch.__version__),
        str(getattr(torch.version, "git_version", "")),
        str(getattr(torch.version, "cuda", "")),
        str(getattr(torch._C, "_GLIBCXX_USE_CXX11_ABI", "")),
    ]
    if with_cuda is not False and not os.environ.get("TORCH_CUDA_ARCH_LIST"):
        try:
            if torch.cuda.is_available():
                major, minor = torch.cuda.get_device_capability()
                parts.append(f"sm_{major}{minor}")
        except Exception:
            parts.append("no-device")
    return parts


def op_key(name, sources, options):
    """The content key of one ``load`` call (see the module's docstring for what it covers)."""
    digest = hashlib.sha256()
    digest.update(name.encode() + b"\0")
    for source in sources:
        _file_digest(source, digest)
    for folder in sorted({os.path.dirname(os.path.abspath(s)) for s in sources}):
        _tree_digest(folder, digest, recursive=False)
    for folder in options.get("extra_include_paths") or ():
        _tree_digest(folder, digest, recursive=True)
    flags = {k: v for k, v in options.items() if k not in _SKIPPED_ARGS}
    digest.update(_normalized(flags).encode())
    with_cuda = options.get("with_cuda")
    if with_cuda is None:
        with_cuda = any(str(s).endswith((".cu", ".cuh")) for s in sources)
    environment = [os.environ.get(v, "") for v in ("TORCH_CUDA_ARCH_LIST", "CUDA_HOME", "CXX", "CC")]
    identity = [*_torch_identity(with_cuda), sys.version, _compiler(), *environment]
    if "native" in json.dumps(flags):
        identity.append(_cpu_flags())
    digest.update(json.dumps(identity).encode())
    return digest.hexdigest()[:24]


def _event(**fields):
    sys.stdout.flush()
    print("\n" + MARK + json.dumps({"event": "op", **fields}), flush=True)


def _import_built(name, folder):
    path = os.path.join(folder, f"{name}.so")
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _given(signature, options):
    """The options a call set to something other than ``load``'s own default: a caller that spells out a default
    (DeepSpeed from 0.16.7 passes ``with_cuda=None``) asks for the same binary as one that leaves it out."""
    parameters = signature.parameters
    return {
        k: v
        for k, v in options.items()
        if k not in parameters or parameters[k].default is inspect.Parameter.empty or v != parameters[k].default
    }


def cached_load(original, root):
    """``original`` (torch's ``load``) behind the cache in ``root``."""
    signature = inspect.signature(original)

    def load(*args, **kwargs):
        try:
            bound = signature.bind(*args, **kwargs)
        except TypeError:
            return original(*args, **kwargs)
        options = dict(bound.arguments)
        name, sources = options.get("name"), options.get("sources")
        if (
            not isinstance(name, str)
            or options.get("build_directory")
            or options.get("is_standalone")
            or options.get("is_python_module") is False
        ):
            return original(*args, **kwargs)  # the caller chose where and what: not ours to cache
        sources = [sources] if isinstance(sources, str) else list(sources or ())
        key = op_key(name, sources, _given(signature, options))
        folder = os.path.join(root, f"{name}-{key}")
        built = os.path.join(folder, f"{name}.so")
        start = time.monotonic()
        if not os.path.isfile(built):
            os.makedirs(root, exist_ok=True)
            with open(os.path.join(root, f"{name}-{key}.flock"), "a") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX)  # others building this op wait; freed if the builder dies
                if not os.path.isfile(built):
                    shutil.rmtree(folder, ignore_errors=True)  # a killed build's torch lock and partial objects
                    os.makedirs(folder)
                    options["build_directory"] = folder
                    module = original(**options)
                    _event(name=name, key=key, built=True, seconds=round(time.monotonic() - start, 3))
                    return module
        with contextlib.suppress(OSError):
            os.utime(os.path.join(root, f"{name}-{key}.flock"))  # last use, for the cache's size bound
        module = _import_built(name, folder)
        _event(name=name, key=key, built=False, seconds=round(time.monotonic() - start, 3))
        return module

    load.__wrapped__ = original
    return load


def _wrap(module, root):
    if getattr(module, _INSTALLED, False) or not hasattr(module, "load"):
        return
    module.load = cached_load(module.load, root)
    setattr(module, _INSTALLED, True)


def install(root):
    """Serve ``torch.utils.cpp_extension.load`` from the cache in ``root`` (idempotent)."""
    hook = runpy.run_path(os.path.join(os.path.dirname(os.path.abspath(__file__)), "import_hook.py"))
    hook["after_import"]("op-cache", (_TARGET,), lambda module: _wrap(module, root))
