"""An evidence folder's records and logs in one records.tar.xz (issue #29, item 4): the report reads them as it reads
the loose files, packing twice gives the same bytes, and a hostile archive (names leaving the root, links, devices,
a member or a whole stream too large, a cut-short stream, a newer schema, garbage) is read without crashing,
without writing anywhere, and with a warning naming what was left out."""

from __future__ import annotations

import io
import json
import lzma
import os
import shutil
import tarfile
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reprobisect.report import archive
from reprobisect.report.archive import ARCHIVE, ArchiveError, pack, safe_name
from reprobisect.report.frame import SkippedFileWarning, load_records, records_frame
from reprobisect.report.logs import log_excerpt, log_excerpts

BASELINE = Path(__file__).parents[1] / "resources" / "records" / "baseline"


@pytest.fixture(autouse=True)
def _fresh_cache() -> Iterator[None]:
    archive._cached.cache_clear()
    yield
    archive._cached.cache_clear()


def _loaded(root: Path) -> tuple[list[str], list[str]]:
    """(run ids loaded, warnings) of one root."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        loaded = load_records([root])
    assert all(issubclass(w.category, SkippedFileWarning) for w in caught), caught  # only the report's own kind
    return [item.record.run_id for item in loaded], [str(w.message) for w in caught]


def _tar_xz(entries: list[tarfile.TarInfo | tuple[str, bytes]]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for entry in entries:
            if isinstance(entry, tarfile.TarInfo):
                tar.addfile(entry)
            else:
                info = tarfile.TarInfo(entry[0])
                info.size = len(entry[1])
                tar.addfile(info, io.BytesIO(entry[1]))
    return lzma.compress(buffer.getvalue())


def _record(run_id: str = "r1", **changes: object) -> bytes:
    path = next((BASELINE / "records").rglob("*none__r0.json"))
    data = json.loads(path.read_text())
    data.update(run_id=run_id, **changes)
    return json.dumps(data).encode()


def _packed_baseline(tmp_path: Path) -> Path:
    root = tmp_path / "sent"
    shutil.copytree(BASELINE, root)
    pack(root)
    return root


def _tree(path: Path) -> set[str]:
    return {p.relative_to(path).as_posix() for p in path.rglob("*")}


def test_a_packed_folder_reports_the_same_records_and_log_tails(tmp_path: Path) -> None:
    loose = tmp_path / "loose"
    shutil.copytree(BASELINE, loose)
    (loose / "matrix.log").write_text("the matrix's own log\n")
    before = load_records([loose])
    tails_before = log_excerpts(records_frame(before))
    packed = tmp_path / "packed"
    shutil.copytree(loose, packed)
    members, size = pack(packed)
    assert members == len(list(loose.rglob("*.json"))) + len(list(loose.rglob("*.log")))
    assert size == (packed / ARCHIVE).stat().st_size
    assert sorted(p.name for p in packed.iterdir()) == [ARCHIVE]  # records/, logs/ and matrix.log moved in
    after = load_records([packed])
    assert [i.record for i in after] == [i.record for i in before]
    assert all(str(i.path).startswith(str(packed.resolve() / ARCHIVE / "records")) for i in after)
    assert log_excerpts(records_frame(after)) == tails_before
    assert archive.contents(packed.resolve()) is not None
    assert archive.contents(packed.resolve()).tails["matrix.log"][0] == b"the matrix's own log\n"  # type: ignore[union-attr]


def test_packing_again_gives_the_same_bytes_whatever_the_files_mtimes(tmp_path: Path) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    shutil.copytree(BASELINE, first)
    shutil.copytree(BASELINE, second)
    for path in second.rglob("*"):
        os.utime(path, (1, 1))
    pack(first)
    pack(second)
    data = (first / ARCHIVE).read_bytes()
    assert (second / ARCHIVE).read_bytes() == data
    pack(first)  # nothing loose: the archive's members packed again
    assert (first / ARCHIVE).read_bytes() == data


def test_a_record_written_after_packing_joins_the_archive_and_replaces_its_member(tmp_path: Path) -> None:
    root = _packed_baseline(tmp_path)
    count = len(_loaded(root)[0])
    newer = root / "records" / "gan" / "cell" / "cpu__none__r0.json"
    newer.parent.mkdir(parents=True)
    newer.write_bytes(_record("fresh"))
    assert len(_loaded(root)[0]) == count + 1  # loose and archived records are read together
    pack(root)
    assert not (root / "records").exists()
    assert "fresh" in _loaded(root)[0]


def test_pack_refuses_a_link_and_leaves_the_folder_as_it_was(tmp_path: Path) -> None:
    root = tmp_path / "sent"
    shutil.copytree(BASELINE, root)
    (root / "logs" / "secret.log").symlink_to(tmp_path / "elsewhere")
    before = _tree(root)
    with pytest.raises(ArchiveError, match="a link or special file"):
        pack(root)
    assert _tree(root) == before


def test_pack_refuses_a_linked_records_folder(tmp_path: Path) -> None:
    shutil.copytree(BASELINE / "records", tmp_path / "elsewhere")
    root = tmp_path / "sent"
    root.mkdir()
    (root / "records").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(ArchiveError, match="a link; pack only"):
        pack(root)
    assert not (root / ARCHIVE).exists()


def test_pack_refuses_to_repack_an_archive_it_cannot_read_whole(tmp_path: Path) -> None:
    root = tmp_path / "sent"
    root.mkdir()
    (root / ARCHIVE).write_bytes(_tar_xz([("../escape.log", b"x")]))
    (root / "run.log").write_text("new")
    with pytest.raises(ArchiveError, match="leaves the archive's root"):
        pack(root)
    assert (root / "run.log").exists()


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("records/a.json", "records/a.json"),
        ("./logs//x.log", "logs/x.log"),
        ("/etc/passwd", None),
        ("../x", None),
        ("logs/../../x", None),
        ("logs/../records/x.json", None),
        ("logs\\..\\x", None),
        ("a\0b", None),
        ("logs/new\nline.log", None),
        ("logs/\x1b[2Jclear.log", None),
        ("logs/\udcff.log", None),
        ("", None),
        (".", None),
    ],
)
def test_safe_name(name: str, expected: str | None) -> None:
    assert safe_name(name) == expected


def _hostile_member(kind: str) -> tarfile.TarInfo | tuple[str, bytes]:
    if kind in ("symlink", "hardlink"):
        info = tarfile.TarInfo("records/gan/c/link__x__r0.json")
        info.type = tarfile.SYMTYPE if kind == "symlink" else tarfile.LNKTYPE
        info.linkname = "/etc/passwd"
        return info
    if kind == "device":
        info = tarfile.TarInfo("logs/gan/c/dev.log")
        info.type, info.devmajor, info.devminor = tarfile.CHRTYPE, 1, 3
        return info
    return {
        "absolute": ("/tmp/records/evil.json", _record("evil")),
        "dotdot": ("records/../../evil.json", _record("evil")),
        "newer-schema": ("records/gan/c/newer__x__r0.json", _record("evil", schema_version=99)),
        "cut-short": ("records/gan/c/cut__x__r0.json", _record("evil")[:40]),
        "not-an-object": ("records/gan/c/list__x__r0.json", b"[1, 2]"),
        "log-outside": ("records/gan/c/out__x__r0.json", _record("evil", log_path="../../id_ed25519")),
    }[kind]


@pytest.mark.parametrize(
    ("kind", "named"),
    [
        ("absolute", "'/tmp/records/evil.json' leaves the archive's root"),
        ("dotdot", "'records/../../evil.json' leaves the archive's root"),
        ("symlink", "link__x__r0.json' is a link or device"),
        ("hardlink", "link__x__r0.json' is a link or device"),
        ("device", "dev.log' is a link or device"),
        ("newer-schema", "newer__x__r0.json: schema_version 99, this harness reads 1; update the harness"),
        ("cut-short", "cut__x__r0.json: not a readable JSON record"),
        ("not-an-object", "list__x__r0.json: expected a JSON object"),
        ("log-outside", "out__x__r0.json: its log_path '../../id_ed25519' is outside"),
    ],
)
def test_a_hostile_member_is_left_out_with_a_warning_naming_it(tmp_path: Path, kind: str, named: str) -> None:
    root = tmp_path / "sent"
    root.mkdir()
    (root / ARCHIVE).write_bytes(_tar_xz([("records/gan/c/good__x__r0.json", _record("good")), _hostile_member(kind)]))
    before = _tree(tmp_path)
    run_ids, caught = _loaded(root)
    assert run_ids == ["good"]
    assert any(named in message for message in caught), caught
    assert _tree(tmp_path) == before  # nothing extracted, nothing written


def test_a_member_larger_than_a_record_is_not_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cap = len(_record("good")) + 100
    monkeypatch.setattr(archive, "MAX_RECORD_BYTES", cap)
    root = tmp_path / "sent"
    root.mkdir()
    huge = ("records/gan/c/huge__x__r0.json", _record("huge", padding="x" * 5000))
    (root / ARCHIVE).write_bytes(_tar_xz([("records/gan/c/good__x__r0.json", _record("good")), huge]))
    run_ids, caught = _loaded(root)
    assert run_ids == ["good"]
    assert any("huge__x__r0.json" in m and f"more than a record's {cap}" in m for m in caught)


def test_a_tar_bomb_stops_at_the_cap_and_keeps_what_came_before(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(archive, "MAX_UNPACKED_BYTES", 1024 * 1024)
    root = tmp_path / "sent"
    root.mkdir()
    bomb = ("logs/zeros.log", bytes(64 * 1024 * 1024))  # 64 MiB of zeros: about 10 KiB of xz
    (root / ARCHIVE).write_bytes(_tar_xz([("records/a/c/good__x__r0.json", _record("good")), bomb]))
    assert (root / ARCHIVE).stat().st_size < 100_000
    run_ids, caught = _loaded(root)
    assert run_ids == ["good"]
    assert any(f"unpacks to more than {1024 * 1024} bytes" in m for m in caught)


def test_a_pax_header_claiming_gigabytes_costs_at_most_the_cap(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(archive, "MAX_UNPACKED_BYTES", 1024 * 1024)
    header = tarfile.TarInfo("././@PaxHeader")
    header.type, header.size = tarfile.XHDTYPE, 8**11 - 1  # 8 GiB
    raw = header.tobuf(format=tarfile.USTAR_FORMAT) + bytes(4 * 1024 * 1024)
    root = tmp_path / "sent"
    root.mkdir()
    (root / ARCHIVE).write_bytes(lzma.compress(raw))
    run_ids, caught = _loaded(root)
    assert run_ids == []
    assert any(ARCHIVE in m for m in caught)


@pytest.mark.parametrize(
    "damage",
    [
        lambda data: data[: len(data) // 2],
        lambda data: b"not an xz file",
        lambda data: lzma.compress(b"not a tar" * 100),
    ],
    ids=["cut-short", "not-xz", "not-tar"],
)
def test_a_damaged_archive_warns_and_the_loose_records_still_load(tmp_path: Path, damage: object) -> None:
    root = tmp_path / "sent"
    shutil.copytree(BASELINE, root)
    count = len(_loaded(root)[0])
    data = _tar_xz([(f"records/gan/c/r{i}__x__r0.json", _record(f"packed{i}", padding="x" * 20000)) for i in range(40)])
    (root / ARCHIVE).write_bytes(damage(data))  # type: ignore[operator]
    run_ids, caught = _loaded(root)
    assert len(run_ids) >= count
    assert any("not a readable archive" in m for m in caught), caught


def test_a_link_named_like_the_archive_is_not_followed(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere.tar.xz"
    elsewhere.write_bytes(_tar_xz([("records/gan/c/good__x__r0.json", _record("planted"))]))
    root = tmp_path / "sent"
    root.mkdir()
    (root / ARCHIVE).symlink_to(elsewhere)
    assert _loaded(root) == ([], [f"skipping {root / ARCHIVE}: a link, not followed; left out"])  # said, since #50


def test_a_log_excerpt_never_comes_from_a_member_outside_the_root(tmp_path: Path) -> None:
    root = tmp_path / "sent"
    root.mkdir()
    (root / ARCHIVE).write_bytes(_tar_xz([("../secret.log", b"PRIVATE KEY"), ("logs/run.log", b"line 1\nline 2\n")]))
    assert log_excerpt(root, "logs/run.log").tail == "line 1\nline 2"
    assert "PRIVATE" not in log_excerpt(root, "../secret.log").tail
    assert log_excerpt(root, "logs/missing.log").tail.startswith("(log not readable")


def test_an_archived_log_tail_is_the_end_of_a_runaway_log(tmp_path: Path) -> None:
    root = tmp_path / "sent"
    root.mkdir()
    lines = "".join(f"line {i}\n" for i in range(400_000))  # about 4.6 MB, more than the 2 MB read
    (root / "logs").mkdir()
    (root / "logs" / "run.log").write_text(lines)
    loose = log_excerpt(root, "logs/run.log")
    pack(root)
    assert log_excerpt(root, "logs/run.log") == loose
    assert loose.tail.endswith("line 399999")


_NAMES = st.one_of(
    st.sampled_from(["records/a/c/x.json", "logs/a.log", "/abs.json", "../up.json", "records/../../x.json", "."]),
    st.text(alphabet=st.sampled_from("ab./\\\0"), min_size=1, max_size=12),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    names=st.lists(_NAMES, max_size=6),
    kinds=st.lists(st.sampled_from([tarfile.REGTYPE, tarfile.SYMTYPE, tarfile.LNKTYPE, tarfile.DIRTYPE]), max_size=6),
)
def test_any_member_names_and_types_never_crash_or_escape(tmp_path: Path, names: list[str], kinds: list[str]) -> None:
    root = tmp_path / "hyp"
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir()
    entries: list[tarfile.TarInfo | tuple[str, bytes]] = []
    for name, kind in zip(names, kinds + [tarfile.REGTYPE] * len(names), strict=False):
        if kind == tarfile.REGTYPE:
            entries.append((name, _record(name)))
        else:
            info = tarfile.TarInfo(name)
            info.type, info.linkname = kind, "/etc/passwd"
            entries.append(info)
    try:
        data = _tar_xz(entries)
    except (ValueError, UnicodeError):  # a name tarfile itself cannot write
        return
    (root / ARCHIVE).write_bytes(data)
    archive._cached.cache_clear()
    _loaded(root)
    found = archive.contents(root)
    assert found is not None
    for name in [n for n, _ in found.records] + list(found.tails):
        assert safe_name(name) == name
        assert (root / name).resolve().is_relative_to(root.resolve())
    assert _tree(root) == {ARCHIVE}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.binary(max_size=2000), cut=st.integers(min_value=0, max_value=4000))
def test_any_bytes_as_an_archive_never_crash_the_report(tmp_path: Path, data: bytes, cut: int) -> None:
    root = tmp_path / "hyp"
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir()
    valid = _tar_xz([("records/a/c/x__y__r0.json", _record("x")), ("logs/a.log", b"log")])
    (root / ARCHIVE).write_bytes(valid[:cut] + data if data else valid[:cut])
    archive._cached.cache_clear()
    _loaded(root)
    log_excerpt(root, "logs/a.log")
    assert _tree(root) == {ARCHIVE}


def test_a_nightly_state_whose_baseline_is_packed_says_how_to_unpack_it(tmp_path: Path) -> None:
    from reprobisect.errors import ConfigError
    from reprobisect.nightly.state import load_state

    state = tmp_path / "state"
    shutil.copytree(BASELINE, state / "baseline")
    (state / "state.json").write_text(json.dumps({"schema": 1, "baseline": "0.19.8", "baseline_dir": "baseline"}))
    load_state(state)  # loose: as before
    pack(state / "baseline")
    with pytest.raises(ConfigError, match=r"packed in .*records\.tar\.xz .*tar -xJf"):
        load_state(state)


def test_reprobisect_report_writes_the_same_markdown_from_packed_folders(tmp_path: Path) -> None:
    """The command the READMEs give, ``report --out A --merge B``, on packed folders: report.md and report-full.md
    byte for byte as from the loose files (the folders are copied to the same paths, packed in between)."""
    from reprobisect.commands.main import main as reprobisect

    records = BASELINE.parent
    for name in ("releases", "bisect"):
        shutil.copytree(records / name, tmp_path / name)
    argv = ["report", "--out", str(tmp_path / "releases"), "--merge", str(tmp_path / "bisect"), "--latest"]
    assert reprobisect([*argv, "--dest", str(tmp_path / "loose")]) == 0
    archive._cached.cache_clear()
    for name in ("releases", "bisect"):
        pack(tmp_path / name)
        assert not (tmp_path / name / "records").exists()
    assert reprobisect([*argv, "--dest", str(tmp_path / "packed")]) == 0
    for name in ("report.md", "report-full.md"):
        loose, packed = tmp_path / "loose" / name, tmp_path / "packed" / name
        assert loose.exists() == packed.exists()
        if loose.exists():
            assert packed.read_bytes() == loose.read_bytes()
