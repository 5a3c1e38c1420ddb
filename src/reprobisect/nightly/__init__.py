"""What changed since last night: the run (run.py), what it runs (targets.py), how its runs meet the baseline's
(regressions.py), the state carried between nights (state.py) and the issue body (issue_text.py)."""
