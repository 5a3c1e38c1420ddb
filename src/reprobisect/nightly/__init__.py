"""What changed since last night: the run (run.py), the state carried between nights (state.py) and the issue body
(markdown.py)."""
