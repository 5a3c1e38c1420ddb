"""One venv per cell: its pins made concrete (pinning.py), building and reusing it (envs.py), the package index
(index.py), patch overlays, the offline wheelhouse and the shared cache of just-in-time ops (op_builds.py). Knows
nothing of outcomes."""
