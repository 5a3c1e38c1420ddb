"""Tries to rewrite each path given (records, its cell's site-packages), then passes if nothing could be written."""

import sys
from pathlib import Path

wrote = []
for target in sys.argv[1:]:
    path = Path(target)
    try:
        path.write_text("import sys; print('poisoned')\n" if path.suffix == ".py" else '{"outcome": "PASS"}')
        wrote.append(target)
    except OSError as exc:
        print("refused", target, type(exc).__name__, exc.errno, flush=True)
if wrote:
    raise SystemExit(f"wrote {wrote}")
