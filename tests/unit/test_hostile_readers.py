"""Every reader survives what it reads (issue #50, item 4): ``report`` (records, bisect results, logs, the records
archive), ``report --merge``, ``corpus`` (truth.toml) and the ``nightly`` state (state.json, the baseline's records).

Planted where a file should be: a FIFO (``open()`` on it waits for a writer forever), a UNIX socket, ``/dev/zero``
linked in (it never ends), a link to a well-formed file outside the folder, JSON or TOML nested 100,000 deep and a
5,000-digit number. Each is skipped or refused with a line naming the file, within a timeout: never a hang, never a
traceback. Then the nightly state's commit and ref, which reach git, and the CSV cells a spreadsheet would run.
"""

from __future__ import annotations

import csv
import io
import json
import lzma
import os
import shutil
import socket
import subprocess
import tarfile
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reprobisect.commands.main import main
from reprobisect.corpus.truth import load_truth
from reprobisect.errors import ConfigError, RecordError
from reprobisect.model.record import Record
from reprobisect.model.store import Store
from reprobisect.nightly.state import NightlyState, load_state, records_under, save_state
from reprobisect.report.frame import SkippedFileWarning, load_bisects, load_records, write_csv
from reprobisect.report.logs import log_excerpt
from reprobisect.util.git_names import is_commit_hash, ref_problem
from reprobisect.util.safe_read import UnsafeFileError, load_json_file, load_toml_file
from tests.unit.test_corpus import GOOD as GOOD_TRUTH

BASELINE = Path(__file__).parents[1] / "resources" / "records" / "baseline"
RECORD = next((BASELINE / "records").rglob("*__r0.json"))
DEEP_JSON = "[" * 100_000 + "]" * 100_000
BIG_JSON = '{"schema_version": ' + "7" * 5_000 + "}"
DEEP_TOML = "schema = " + "[" * 100_000 + "]" * 100_000 + "\n"
DOTTED_TOML = "[" + "a." * 100_000 + "b]\n"  # a dict 100,000 deep (the next repr() overflows), parsed in minutes
DOTTED_900_TOML = "[" + "a." * 900 + "b]\n"  # parsed at once, 900 deep
BIG_TOML = "schema = " + "7" * 5_000 + "\n"


# --- what is planted ------------------------------------------------------------------------------------------------


def _fifo(path: Path, _good: bytes, _outside: Path) -> None:
    os.mkfifo(path)


def _socket(path: Path, _good: bytes, _outside: Path) -> Iterator[None]:
    """A bound UNIX socket at ``path`` (bound from its folder: a socket's path is limited to 108 bytes)."""
    here = Path.cwd()
    os.chdir(path.parent)
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        server.bind(path.name)
    finally:
        os.chdir(here)
    yield
    server.close()


def _dev_zero(path: Path, _good: bytes, _outside: Path) -> None:
    path.symlink_to("/dev/zero")


def _link_out(path: Path, good: bytes, outside: Path) -> None:
    """A link to a well-formed file outside the folder: only the link is wrong (a key of the host's, in real life)."""
    outside.mkdir(exist_ok=True)
    (outside / path.name).write_bytes(good)
    path.symlink_to(outside / path.name)


Plant = Callable[[Path, bytes, Path], object]


def _text(text: str) -> Plant:
    def plant(path: Path, _good: bytes, _outside: Path) -> None:
        path.write_text(text, encoding="utf-8")

    return plant


PLACES: dict[str, Plant] = {"fifo": _fifo, "socket": _socket, "dev-zero": _dev_zero, "link-out": _link_out}
JSON_TEXTS = {"deep-json": _text(DEEP_JSON), "big-number-json": _text(BIG_JSON)}
TOML_TEXTS = {
    "deep-toml": _text(DEEP_TOML),
    "dotted-toml": _text(DOTTED_TOML),
    "dotted-900-toml": _text(DOTTED_900_TOML),
    "big-number-toml": _text(BIG_TOML),
}


def _plant(kind: Plant, path: Path, good: bytes, outside: Path) -> Callable[[], None]:
    """Plant ``kind`` at ``path`` (``good``: the well-formed bytes a link out points to, in ``outside``); returns what
    ends it (a socket's server is closed after the read)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    made = kind(path, good, outside)
    if isinstance(made, Iterator):
        next(made)
        return lambda: next(made, None)
    return lambda: None


def _skipped(read: Callable[[], object]) -> tuple[object, list[str]]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = read()
    return result, [str(w.message) for w in caught if issubclass(w.category, SkippedFileWarning)]


def _refusal(read: Callable[[], object], error: type[Exception]) -> str:
    with pytest.raises(error) as info:
        read()
    message = str(info.value)
    assert "\n" not in message
    return message


# --- report: records, bisect results, the archive, logs -------------------------------------------------------------


@pytest.mark.timeout(10)
@pytest.mark.parametrize("kind", [*PLACES, *JSON_TEXTS])
def test_report_skips_a_hostile_record_file_by_name(tmp_path: Path, kind: str) -> None:
    root = tmp_path / "reports"
    path = root / "records" / "gan" / "cell" / "cpu__none__r0.json"
    done = _plant({**PLACES, **JSON_TEXTS}[kind], path, RECORD.read_bytes(), tmp_path / "outside")
    loaded, skipped = _skipped(lambda: load_records([root]))
    done()
    assert loaded == []
    assert len(skipped) == 1 and str(path) in skipped[0], skipped


@pytest.mark.timeout(10)
@pytest.mark.parametrize("kind", [*PLACES, *JSON_TEXTS])
def test_report_skips_a_hostile_bisect_result_by_name(tmp_path: Path, kind: str) -> None:
    root = tmp_path / "reports"
    path = root / "bisect-gan.json"
    good = json.dumps({"repro": "gan", "form": "f", "axis": "deepspeed", "transitions": []}).encode()
    done = _plant({**PLACES, **JSON_TEXTS}[kind], path, good, tmp_path / "outside")
    found, skipped = _skipped(lambda: load_bisects([root]))
    done()
    assert found == []
    assert len(skipped) == 1 and str(path) in skipped[0], skipped


def _archive(members: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return lzma.compress(buffer.getvalue(), format=lzma.FORMAT_XZ)


@pytest.mark.timeout(10)
@pytest.mark.parametrize("kind", [*PLACES, "folder"])
def test_report_skips_a_hostile_records_archive_by_name(tmp_path: Path, kind: str) -> None:
    root = tmp_path / "reports"
    path = root / "records.tar.xz"
    good = _archive({"records/gan/c/cpu__none__r0.json": RECORD.read_bytes()})
    plant = PLACES.get(kind, lambda p, _g, _o: p.mkdir())
    done = _plant(plant, path, good, tmp_path / "outside")
    loaded, skipped = _skipped(lambda: load_records([root]))
    done()
    assert loaded == []
    assert len(skipped) == 1 and str(path) in skipped[0], skipped


@pytest.mark.timeout(10)
@pytest.mark.parametrize("text", [DEEP_JSON, BIG_JSON], ids=["deep-json", "big-number-json"])
def test_report_skips_a_hostile_record_in_an_archive_by_name(tmp_path: Path, text: str) -> None:
    root = tmp_path / "reports"
    root.mkdir()
    (root / "records.tar.xz").write_bytes(_archive({"records/gan/c/cpu__none__r0.json": text.encode()}))
    loaded, skipped = _skipped(lambda: load_records([root]))
    assert loaded == []
    assert len(skipped) == 1 and "records.tar.xz/records/gan/c/cpu__none__r0.json" in skipped[0], skipped


@pytest.mark.timeout(10)
@pytest.mark.parametrize("kind", ["fifo", "socket"])
def test_a_log_that_is_no_file_is_noted_not_waited_on(tmp_path: Path, kind: str) -> None:
    root = tmp_path / "reports"
    done = _plant(PLACES[kind], root / "logs" / "gan" / "run.log", b"", tmp_path / "outside")
    excerpt = log_excerpt(root, "logs/gan/run.log")
    done()
    assert excerpt.tail.startswith("(log not readable: a ") and "not a regular file" in excerpt.tail


@pytest.mark.timeout(60)
def test_report_merge_of_a_hostile_folder_names_each_file_and_still_reports(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out, merged = tmp_path / "out", tmp_path / "machine-b"
    shutil.copytree(BASELINE, out)
    cell = merged / "records" / "gan" / "cell"
    cell.mkdir(parents=True)
    os.mkfifo(cell / "fifo__none__r0.json")
    (cell / "zero__none__r0.json").symlink_to("/dev/zero")
    (cell / "deep__none__r0.json").write_text(DEEP_JSON)
    (cell / "big__none__r0.json").write_text(BIG_JSON)
    (merged / "bisect-x.json").write_text(DEEP_JSON)
    os.mkfifo(merged / "records.tar.xz")
    code = main(["report", "--out", str(out), "--merge", str(merged), "--dest", str(tmp_path / "report")])
    err = capsys.readouterr().err
    assert code == 0, err
    assert "Traceback" not in err
    for name in ("fifo", "zero", "deep", "big"):
        assert f"{cell / name}__none__r0.json" in err
    assert str(merged / "bisect-x.json") in err and str(merged / "records.tar.xz") in err


# --- corpus: truth.toml ---------------------------------------------------------------------------------------------


@pytest.mark.timeout(10)
@pytest.mark.parametrize("kind", [*PLACES, *TOML_TEXTS])
def test_corpus_refuses_a_hostile_truth_by_name(tmp_path: Path, kind: str) -> None:
    folder = tmp_path / "corpus" / "entry"
    folder.mkdir(parents=True)
    (folder / "issue.py").write_text("print('hi')\n")
    done = _plant({**PLACES, **TOML_TEXTS}[kind], folder / "truth.toml", GOOD_TRUTH.encode(), tmp_path / "outside")
    message = _refusal(lambda: load_truth(folder), ConfigError)
    done()
    assert message.startswith(f"{folder / 'truth.toml'}: "), message


def test_corpus_refuses_an_entry_folder_that_links_out_of_the_corpus(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "issue.py").write_text("print('hi')\n")
    (elsewhere / "truth.toml").write_text(GOOD_TRUTH)
    (tmp_path / "corpus").mkdir()
    (tmp_path / "corpus" / "entry").symlink_to(elsewhere)
    message = _refusal(lambda: load_truth(tmp_path / "corpus" / "entry"), ConfigError)
    assert "outside the corpus" in message and str(tmp_path / "corpus" / "entry" / "truth.toml") in message


# --- nightly: state.json and the baseline's records -----------------------------------------------------------------


def _state_text() -> bytes:
    return json.dumps({"schema": 1, "baseline": None, "history": []}).encode()


@pytest.mark.timeout(10)
@pytest.mark.parametrize("kind", [*PLACES, *JSON_TEXTS])
def test_nightly_refuses_a_hostile_state_by_name(tmp_path: Path, kind: str) -> None:
    state = tmp_path / "state"
    done = _plant({**PLACES, **JSON_TEXTS}[kind], state / "state.json", _state_text(), tmp_path / "outside")
    message = _refusal(lambda: load_state(state), ConfigError)
    done()
    assert message.startswith(f"{state / 'state.json'}: "), message


def test_a_dangling_state_link_is_refused_not_taken_for_a_first_night(tmp_path: Path) -> None:
    (tmp_path / "state.json").symlink_to(tmp_path / "gone.json")
    assert "state.json" in _refusal(lambda: load_state(tmp_path), ConfigError)


@pytest.mark.timeout(10)
@pytest.mark.parametrize("kind", [*PLACES, *JSON_TEXTS])
def test_nightly_refuses_a_hostile_baseline_record_by_name(tmp_path: Path, kind: str) -> None:
    root = tmp_path / "state" / "baseline"
    path = root / "records" / "gan" / "cell" / "cpu__none__r0.json"
    done = _plant({**PLACES, **JSON_TEXTS}[kind], path, RECORD.read_bytes(), tmp_path / "outside")
    message = _refusal(lambda: records_under(root), RecordError)
    done()
    assert message.startswith(f"{path}: "), message


@pytest.mark.timeout(10)
def test_the_store_does_not_wait_on_a_fifo_where_its_record_goes(tmp_path: Path) -> None:
    store = Store(tmp_path)
    record = Record.load(RECORD)
    path = store.record_path(record.repro, record.cell["id"], record.form, record.fix, record.repeat)
    path.parent.mkdir(parents=True)
    os.mkfifo(path)
    assert store.find(record.spec_key, record.repro, record.cell["id"], record.form, record.fix) is None
    assert store.write(record) == path and Record.load(path).run_id == record.run_id  # replaced, not written into


def _main_state(tmp_path: Path, **main: str) -> Path:
    (tmp_path / "main-x" / "records").mkdir(parents=True)
    entry = {"commit": "a" * 40, "ref": "master", "since": "t", "dir": "main-x", "clone": "/c", **main}
    save_state(tmp_path, NightlyState(main=entry))
    return tmp_path


@pytest.mark.parametrize("commit", ["--upload-pack=touch /tmp/x", "HEAD~1", "main", "abc1234", "A" * 40, "a" * 41])
def test_a_state_whose_commit_is_no_hash_is_refused(tmp_path: Path, commit: str) -> None:
    message = _refusal(lambda: load_state(_main_state(tmp_path, commit=commit)), ConfigError)
    assert "state.json: key 'main.commit'" in message and "full commit hash" in message


@pytest.mark.parametrize("ref", ["-x", "a..b", "HEAD~1", "a b", "x\x1b]0;t\x07", "/a", "a/", "a.lock", "@", "a@{1}"])
def test_a_state_whose_ref_is_no_ref_is_refused(tmp_path: Path, ref: str) -> None:
    message = _refusal(lambda: load_state(_main_state(tmp_path, ref=ref)), ConfigError)
    assert "state.json: key 'main.ref'" in message and "\x1b" not in message


def test_a_state_of_a_hash_and_a_ref_loads(tmp_path: Path) -> None:
    state = load_state(_main_state(tmp_path, commit="0123456789abcdef" * 4, ref="release/v0.18"))
    assert state.main is not None and state.main["ref"] == "release/v0.18"


@pytest.mark.parametrize(
    ("key", "value"),
    [("baseline", "--index-url=http://x"), ("baseline", "0.16.4\n"), ("history", 7), ("slice", [1]), ("backend", 3)],
)
def test_a_state_of_wrong_values_is_refused_by_key(tmp_path: Path, key: str, value: object) -> None:
    (tmp_path / "baseline" / "records").mkdir(parents=True)
    (tmp_path / "state.json").write_text(json.dumps({"schema": 1, key: value}))
    assert f"key {key!r}" in _refusal(lambda: load_state(tmp_path), ConfigError)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=60))
def test_ref_problem_agrees_with_git_check_ref_format(name: str) -> None:
    """The ref rule is git's own: what ``git check-ref-format --allow-onelevel`` refuses is refused (and a leading
    '-', which git would read as an option, besides)."""
    if "\x00" in name:
        assert ref_problem(name) is not None
        return
    git = subprocess.run(["git", "check-ref-format", "--allow-onelevel", name], check=False, capture_output=True)
    if git.returncode != 0 or name.startswith("-"):
        assert ref_problem(name) is not None
    else:
        assert ref_problem(name) is None or len(name) > 255


def test_a_commit_hash_is_forty_or_sixty_four_lowercase_hex_digits() -> None:
    assert is_commit_hash("0" * 40) and is_commit_hash("f" * 64)
    assert not any(is_commit_hash(v) for v in ("0" * 39, "0" * 63, "0" * 65, "G" * 40, 40, None, "-" + "0" * 39))


# --- the safe reader itself -----------------------------------------------------------------------------------------


@pytest.mark.timeout(10)
def test_the_safe_reader_refuses_a_file_too_large_and_a_link_loop(tmp_path: Path) -> None:
    (tmp_path / "big.json").write_text("[" + "0," * 100 + "0]")
    with pytest.raises(UnsafeFileError, match=r"big\.json: larger than 64 bytes"):
        load_json_file(tmp_path / "big.json", root=tmp_path, max_bytes=64)
    (tmp_path / "loop.toml").symlink_to(tmp_path / "loop.toml")
    with pytest.raises(UnsafeFileError, match=r"loop\.toml: "):
        load_toml_file(tmp_path / "loop.toml", root=tmp_path, max_bytes=64)


def test_a_link_inside_the_folder_is_read(tmp_path: Path) -> None:
    (tmp_path / "real.json").write_text('{"a": 1}')
    (tmp_path / "link.json").symlink_to(tmp_path / "real.json")
    assert load_json_file(tmp_path / "link.json", root=tmp_path, max_bytes=64) == {"a": 1}


# --- CSV cells a spreadsheet would run ------------------------------------------------------------------------------

FORMULA = st.builds(lambda head, tail: head + tail, st.sampled_from(["=", "+", "-", "@", "\t", "\r"]), st.text())


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cells=st.lists(FORMULA, min_size=1, max_size=5))
def test_a_csv_cell_that_starts_a_formula_is_behind_a_quote(tmp_path: Path, cells: list[str]) -> None:
    """OWASP's CSV-injection rule: a text cell starting with = + - @ TAB or CR is written behind a single quote, so a
    spreadsheet shows it as text. A number column stays a number (-3 is no formula, and no text a run chose)."""
    frame = pd.DataFrame({"message": cells, "delta": [-3] * len(cells)})
    path = write_csv(frame, tmp_path / "runs.csv", what="the runs table")
    with path.open(newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    assert [row["message"][0] for row in rows] == ["'"] * len(cells)
    assert [row["delta"] for row in rows] == ["-3"] * len(cells)
