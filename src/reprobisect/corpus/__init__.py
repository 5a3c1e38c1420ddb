"""Real regressions with their hand-measured truth (``corpus/``), and the scoring of the harness's answers on them."""
