"""Every fatal error the harness raises, each with its own exit code.

Defining them in one module keeps the exit codes unique and lets the CLI catch them once.
"""

from __future__ import annotations

__all__ = [
    "AMBIGUOUS_EXIT",
    "FAIL_EXIT",
    "INTERRUPTED_EXIT",
    "BisectInconclusiveError",
    "ConfigError",
    "EngineError",
    "EnvBuildError",
    "HarnessError",
    "NotInterestingError",
    "NothingToDoError",
    "RecordError",
    "SandboxError",
    "StorageError",
    "ToolError",
]

FAIL_EXIT = 1  # a --fail-on condition was met (report, nightly); harness errors keep their own codes (2 and up)
# a timing search (--slower-than) wrote its result and report section, but versions stayed ambiguous at
# --max-repeats: neither slower nor not slower, so what it names may move with more runs; no harness error
AMBIGUOUS_EXIT = 12
INTERRUPTED_EXIT = 130  # Ctrl-C or SIGTERM: the shell's 128 + SIGINT


class HarnessError(Exception):
    """Base of the harness's own errors; the CLI prints the message without a traceback."""

    return_code = 1


class ConfigError(HarnessError):
    """matrix.yaml or the command line asks for something that cannot be right."""

    return_code = 2


class NothingToDoError(HarnessError):
    """The selection left no run to do."""

    return_code = 3


class EnvBuildError(HarnessError):
    """A cell's environment could not be built (uv, pip or a build failed)."""

    return_code = 4


class BisectInconclusiveError(HarnessError):
    """Too many probes were skipped to name a transition."""

    return_code = 5


class StorageError(HarnessError):
    """The output folder cannot be written (disk full, permissions); what was written before is intact."""

    return_code = 7


class RecordError(HarnessError):
    """A record file is malformed, truncated or of an unknown schema version."""

    return_code = 6


class SandboxError(HarnessError):
    """No sandbox can start here (no bubblewrap, user namespaces disabled); ``--no-sandbox`` is the opt-out."""

    return_code = 8


class ToolError(HarnessError):
    """A tool the harness runs (git, uv, pip, a probe) failed where the caller has no error kind of its own."""

    return_code = 9


class NotInterestingError(HarnessError):
    """A script to minimize does not tell the bad cell from the good one to begin with: nothing to keep."""

    return_code = 10


class EngineError(HarnessError):
    """The engine that runs cells elsewhere (Slurm) refused the work (``sbatch`` said no), or a job's harness died
    of something that is no harness error. A job the engine lost is no error: its runs are ENV_ERROR records."""

    return_code = 11
