"""Looks everywhere a pasted script could for its runner's secrets, and prints what it finds."""

import os
import sys
from pathlib import Path

print("ENV", dict(os.environ))
for pid in [os.getppid(), *(p.name for p in Path("/proc").iterdir() if p.name.isdigit())]:
    try:
        print("PROC", pid, Path(f"/proc/{pid}/environ").read_bytes().replace(b"\0", b" ").decode(errors="replace"))
    except OSError as exc:
        print("PROC", pid, "unreadable:", type(exc).__name__)
home = Path(os.environ.get("HOME", "/"))
for rel in (".netrc", ".ssh/id_ed25519", ".config/gh/hosts.yml", ".cache/huggingface/token"):
    try:
        print("FILE", rel, (home / rel).read_text())
    except OSError as exc:
        print("FILE", rel, "unreadable:", type(exc).__name__)
for extra in sys.argv[1:]:
    try:
        print("FILE", extra, Path(extra).read_text())
    except OSError as exc:
        print("FILE", extra, "unreadable:", type(exc).__name__)
