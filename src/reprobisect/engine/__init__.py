"""Engines that run a matrix's cells somewhere other than this machine: ``slurm`` (one job per cell, one job array per
wave, through submitit). ``local`` is no engine at all: ``run_matrix`` with ``RunContext.executor`` None.

The engine moves work and never decides a verdict: each job calls ``run_matrix`` for its one cell on its node, on
a filesystem every node sees (cells, op cache, kept wheels, records), and a job the engine lost is ENV_ERROR with
the engine's reason.
"""

from __future__ import annotations

from reprobisect.engine.slurm import SlurmExecutor, SlurmOptions

__all__ = ["SlurmExecutor", "SlurmOptions"]
