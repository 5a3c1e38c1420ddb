"""One venv per cell: building and reusing it (envs.py), the package index (index.py), patch overlays, the offline
wheelhouse and the shared cache of just-in-time ops (ops.py). Knows nothing of outcomes."""
