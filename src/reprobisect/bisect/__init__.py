"""Where an outcome changes along a release axis: the pure search (search.py) and its probes, which are ordinary
matrix runs (probes.py)."""
