"""Small tools every package uses: one way to run a tool (cmd.py), to write a file (files.py), to redact credentials
(redact.py), to neutralise what a run printed for the people who read it (neutral.py), to print a line (echo.py), and
what every terminal line shares: its width, the cut, the heartbeat (console.py)."""
