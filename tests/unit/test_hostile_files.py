"""Output files and record folders someone else prepared (issue #16, #15): links are never written through,
a failed write leaves the old file whole, newer records are not overwritten, logs outside the root are not read."""

from __future__ import annotations

import dataclasses
import errno
import json
import os
import shutil
import stat
from pathlib import Path

import pytest

from reprobisect.errors import StorageError
from reprobisect.model.record import Record
from reprobisect.model.store import Store
from reprobisect.report.frame import SkippedFileWarning, load_records
from reprobisect.util.files import atomic_path, inside, write_atomic

BASELINE = Path(__file__).parents[1] / "resources" / "records" / "baseline"


def test_a_link_in_the_output_folder_is_replaced_not_written_through(tmp_path: Path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    link = tmp_path / "out" / "summary-gan.md"
    link.parent.mkdir()
    link.symlink_to(victim)
    write_atomic(link, "the summary")
    assert victim.read_text() == "precious"
    assert not link.is_symlink() and link.read_text() == "the summary"


def test_a_failed_write_keeps_the_old_file_and_leaves_no_temporary(tmp_path: Path) -> None:
    target = tmp_path / "runs.parquet"
    target.write_text("old")
    with (
        pytest.raises(StorageError, match=r"runs\.parquet: cannot write the runs table"),
        atomic_path(target, what="the runs table") as tmp,
    ):
        tmp.write_text("half")
        raise OSError(errno.ENOSPC, "No space left on device")
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["runs.parquet"]


def _record() -> Record:
    return Record.load(next((BASELINE / "records").rglob("*__r0.json")))


def test_a_newer_records_file_is_not_overwritten_by_this_harness(tmp_path: Path) -> None:
    store = Store(tmp_path)
    record = _record()
    path = store.write(record)
    data = json.loads(path.read_text())
    data["schema_version"] = 99
    path.write_text(json.dumps(data))
    with pytest.raises(StorageError, match="schema 99, newer than this harness"):
        store.write(record)
    assert json.loads(path.read_text())["schema_version"] == 99


def test_a_record_whose_log_is_outside_its_root_is_left_out_with_a_warning(tmp_path: Path) -> None:
    root = tmp_path / "sent"
    shutil.copytree(BASELINE, root)
    secret = tmp_path / "id_ed25519"
    secret.write_text("PRIVATE KEY")
    victim = next((root / "records").rglob("*none__r0.json"))
    data = json.loads(victim.read_text())
    data["log_path"] = "../id_ed25519"
    victim.write_text(json.dumps(data))
    with pytest.warns(SkippedFileWarning, match="log_path '../id_ed25519' is outside"):
        loaded = load_records([root])
    assert data["run_id"] not in {item.record.run_id for item in loaded}
    assert len(loaded) == 17


@pytest.mark.parametrize("rel", ["../x", "/etc/passwd", "logs/../../x", "logs/link/x"])
def test_inside(tmp_path: Path, rel: str) -> None:
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "link").symlink_to("/tmp")
    assert not inside(tmp_path, rel)
    assert inside(tmp_path, "logs/gan/a.log")


def test_the_cells_digest_sees_a_planted_file_but_not_what_the_harness_writes(tmp_path: Path) -> None:
    from reprobisect.cells.envs import tree_digest

    site = tmp_path / "lib" / "python3.11" / "site-packages"
    (site / "deepspeed").mkdir(parents=True)
    (site / "deepspeed" / "__init__.py").write_text("x = 1\n")
    before = tree_digest(tmp_path)
    for harness_owned in (
        "torch_extensions/op/op.so",
        "overlays/fix-1/a.py",
        "lib/python3.11/site-packages/deepspeed/__pycache__/x.pyc",
    ):
        (tmp_path / harness_owned).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / harness_owned).write_text("built")
    assert tree_digest(tmp_path) == before
    (site / "sitecustomize.py").write_text("import os; os._exit(0)\n")
    assert tree_digest(tmp_path) != before


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("git+https://me:ghp_TOKEN123@github.com/o/DeepSpeed@main", "git+https://***@github.com/o/DeepSpeed@main"),
        ("https://ghp_TOKEN123@github.com/o/r.git", "https://***@github.com/o/r.git"),
        ("git+ssh://git@github.com/o/r.git@v1", "git+ssh://git@github.com/o/r.git@v1"),
        ("deepspeed 0.16.4 (no URL) user@example.org", "deepspeed 0.16.4 (no URL) user@example.org"),
    ],
)
def test_credentials_in_urls_are_redacted(raw: str, shown: str) -> None:
    from reprobisect.util.redact import redact

    assert redact(raw) == shown


def test_a_pin_with_a_token_is_stored_redacted_everywhere(tmp_path: Path) -> None:
    record = _record()
    pin = "git+https://me:ghp_FAKETOKEN9@github.com/o/DeepSpeed@main"
    cell = {**record.cell, "packages": {**record.cell["packages"], "deepspeed": pin}}
    path = Store(tmp_path).write(dataclasses.replace(record, cell=cell))
    text = path.read_text()
    assert "ghp_FAKETOKEN9" not in text and "git+https://***@github.com/o/DeepSpeed@main" in text
    summary = write_atomic(tmp_path / "summary.md", f"Reproduce: `nox -s repro_gan -- --deepspeed {pin}`")
    assert "ghp_FAKETOKEN9" not in summary.read_text()


@pytest.mark.parametrize(("umask", "mode"), [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_a_written_file_has_the_mode_the_users_umask_gives(tmp_path: Path, umask: int, mode: int) -> None:
    """Not mkstemp's 0600: a report folder shared with a team or served over HTTP must be readable as the user's
    umask says; a user who wants the records private sets a umask of 077."""
    old = os.umask(umask)
    try:
        written = write_atomic(tmp_path / "report.md", "# report\n")
        with atomic_path(tmp_path / "runs.parquet") as tmp:
            tmp.write_bytes(b"PAR1")
    finally:
        os.umask(old)
    assert stat.S_IMODE(written.stat().st_mode) == mode
    assert stat.S_IMODE((tmp_path / "runs.parquet").stat().st_mode) == mode
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.md", "runs.parquet"]  # no temporary left
