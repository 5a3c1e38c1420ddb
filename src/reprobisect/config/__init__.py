"""matrix.yaml read once into frozen dataclasses (load.py, the only module that knows the YAML) and the matrix
expanded into cells (matrix.py, pure)."""
