"""Small tools every package uses: one way to run a tool (cmd.py), to write a file (files.py), to redact credentials
(redact.py), to print a line (echo.py)."""
