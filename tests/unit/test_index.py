"""Which releases the index lists: pip's answer parsed whatever it prints, and cached for a while.

pip is never asked: the interpreter handed to list_versions is a tiny fake that prints a canned answer and
writes down how it was called.
"""

from __future__ import annotations

import json
import os
import random
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from packaging.version import Version

from reprobisect.cells.index import IndexCache, list_versions
from reprobisect.errors import ConfigError, StorageError


class FakePip:
    """An executable standing in for ``python``: prints ``stdout``/``stderr``, exits ``code``, logs its argv."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        self.path = folder / "python"
        self.path.write_text(
            "#!/bin/sh\n"
            f'd="{folder}"\n'
            'for a in "$@"; do printf "%s\\037" "$a"; done >> "$d/calls"\n'
            'printf "\\n" >> "$d/calls"\n'
            'cat "$d/out"\n'
            'cat "$d/err" >&2\n'
            'exit "$(cat "$d/code")"\n'
        )
        self.path.chmod(0o755)
        self.answer("")

    def answer(self, stdout: str | bytes, stderr: str = "", code: int = 0) -> None:
        (self.folder / "out").write_bytes(stdout if isinstance(stdout, bytes) else stdout.encode())
        (self.folder / "err").write_text(stderr)
        (self.folder / "code").write_text(str(code))

    def listing(self, *versions: str) -> None:
        self.answer(f"deepspeed ({versions[0] if versions else ''})\nAvailable versions: {', '.join(versions)}\n")

    @property
    def calls(self) -> list[list[str]]:
        path = self.folder / "calls"
        if not path.exists():
            return []
        return [line.split("\x1f")[:-1] for line in path.read_text().splitlines()]


@pytest.fixture
def pip(tmp_path: Path) -> FakePip:
    return FakePip(tmp_path / "fakepy")


def test_releases_come_oldest_first_in_version_order(pip: FakePip) -> None:
    pip.answer(
        "deepspeed (0.19.8)\n"
        "Available versions: 0.19.8, 0.18.2, 0.16.10, 0.16.4, 0.9.0, 0.16.4rc1\n"
        "  INSTALLED: 0.16.4\n"
        "  LATEST:    0.19.8\n"
    )
    assert list_versions(str(pip.path), "deepspeed") == ["0.9.0", "0.16.4rc1", "0.16.4", "0.16.10", "0.18.2", "0.19.8"]
    (call,) = pip.calls
    assert call[:5] == ["-m", "pip", "index", "versions", "deepspeed"]
    assert "--pre" not in call


def test_pre_releases_are_asked_for_only_when_wanted(pip: FakePip) -> None:
    pip.listing("1.0rc1", "0.9")
    assert list_versions(str(pip.path), "lightning", prereleases=True) == ["0.9", "1.0rc1"]
    assert "--pre" in pip.calls[0]


def test_entries_that_are_no_versions_are_skipped(pip: FakePip) -> None:
    pip.answer("Available versions: 1.0, garbage, , 2.0.dev1, 1.0.post1, 1!0.1, ../../etc, 3.0 ; rm -rf /\n")
    assert list_versions(str(pip.path), "x") == ["1.0", "1.0.post1", "2.0.dev1", "1!0.1"]


def test_the_line_is_found_among_warnings(pip: FakePip) -> None:
    pip.answer(
        "WARNING: pip index is currently an experimental command.\nx (2.0)\nAvailable versions: 2.0, 1.0\n",
        stderr="WARNING: the index is slow\n",
    )
    assert list_versions(str(pip.path), "x") == ["1.0", "2.0"]


@pytest.mark.parametrize(
    ("stdout", "stderr", "code", "says"),
    [
        ("", "ERROR: No matching distribution found for nosuch\n", 1, "No matching distribution found"),
        ("", "", 1, "no output"),
        ("", "", 0, "no output"),
        ("nothing useful\nat all\n", "", 0, "at all"),
        ("Available versions: 1.0\n", "ERROR: boom\n", 2, "boom"),
        ("available versions: 1.0\n", "", 0, "available versions"),  # not pip's spelling
    ],
)
def test_a_failed_or_odd_answer_is_a_config_error_naming_the_package(
    pip: FakePip, stdout: str, stderr: str, code: int, says: str
) -> None:
    pip.answer(stdout, stderr, code)
    with pytest.raises(ConfigError, match=r"cannot list releases of 'nosuch'") as info:
        list_versions(str(pip.path), "nosuch")
    assert says in str(info.value)


def test_an_interpreter_that_cannot_start_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot list releases of 'deepspeed'"):
        list_versions(str(tmp_path / "no-such-python"), "deepspeed")
    not_executable = tmp_path / "python"
    not_executable.write_text("")
    with pytest.raises(ConfigError, match="cannot list releases of 'deepspeed'"):
        list_versions(str(not_executable), "deepspeed")


@pytest.mark.parametrize(
    "stdout",
    [
        b"Available versions: 1.0, \xff\xfe2.0, 3.0\n",
        b"\x00\x01\x02\x1b[31mAvailable versions: 1.0\n",
        bytes(range(256)) * 64,
        b"Available versions: 1.0, " + b"9" * 4000 + b"\n",
        b"Available versions: " + b"," * 20_000 + b"\n",
    ],
)
def test_garbage_output_is_versions_or_a_config_error_never_a_crash(pip: FakePip, stdout: bytes) -> None:
    pip.answer(stdout)
    try:
        versions = list_versions(str(pip.path), "x")
    except ConfigError as exc:
        assert len(str(exc)) < 100_000
        return
    assert all(isinstance(Version(v), Version) for v in versions)


def test_a_release_number_too_long_for_int_is_skipped(pip: FakePip) -> None:
    pip.answer("Available versions: 2.0, " + "9" * 5000 + ", 1.0\n")
    assert list_versions(str(pip.path), "x") == ["1.0", "2.0"]


def test_a_huge_listing_is_parsed_quickly(pip: FakePip) -> None:
    versions = [f"{major}.{minor}.{patch}" for major in range(20) for minor in range(50) for patch in range(20)]
    shuffled = versions.copy()
    random.Random(0).shuffle(shuffled)
    pip.listing(*shuffled)
    start = time.perf_counter()
    assert list_versions(str(pip.path), "x") == versions
    assert time.perf_counter() - start < 10


_VERSIONS = st.builds(
    lambda parts, pre: ".".join(map(str, parts)) + pre,
    st.lists(st.integers(0, 300), min_size=1, max_size=4),
    st.sampled_from(["", "rc1", "a2", "b3", ".post1", ".dev4"]),
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(versions=st.lists(_VERSIONS, min_size=1, max_size=40, unique_by=lambda v: Version(v)))
def test_any_listing_comes_back_sorted_and_whole(pip: FakePip, versions: list[str]) -> None:
    pip.listing(*versions)
    assert list_versions(str(pip.path), "x") == [str(v) for v in sorted(map(Version, versions))]


@pytest.mark.parametrize("package", ["--index-url=https://evil.example/simple", "-r/etc/passwd"])
def test_a_package_name_that_looks_like_an_option_never_reaches_pip_as_one(pip: FakePip, package: str) -> None:
    pip.listing("1.0")
    try:
        list_versions(str(pip.path), package)
    except ConfigError:
        assert pip.calls == []
        return
    (call,) = pip.calls
    assert "--" in call and call.index("--") < call.index(package)


# --- the cache ---------------------------------------------------------------------------------------------


@pytest.fixture
def cache_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.delenv("PIP_NO_INDEX", raising=False)
    monkeypatch.delenv("PIP_FIND_LINKS", raising=False)
    return tmp_path / "envs" / "index-cache.json"


def test_a_fresh_answer_comes_from_the_cache(pip: FakePip, cache_file: Path) -> None:
    pip.listing("2.0", "1.0")
    cache = IndexCache(cache_file, str(pip.path))
    assert cache.versions("deepspeed") == ["1.0", "2.0"]
    pip.listing("3.0")
    assert cache.versions("deepspeed") == ["1.0", "2.0"]
    assert IndexCache(cache_file, str(pip.path)).versions("deepspeed") == ["1.0", "2.0"]  # another process too
    assert len(pip.calls) == 1
    data = json.loads(cache_file.read_text())
    assert data["deepspeed"]["versions"] == ["1.0", "2.0"]
    assert abs(data["deepspeed"]["at"] - time.time()) < 60
    assert [p.name for p in cache_file.parent.iterdir()] == [cache_file.name]  # written atomically


def test_refresh_and_pre_releases_ask_again(pip: FakePip, cache_file: Path) -> None:
    cache = IndexCache(cache_file, str(pip.path))
    pip.listing("1.0")
    cache.versions("deepspeed")
    pip.listing("1.0", "2.0rc1")
    assert cache.versions("deepspeed", prereleases=True) == ["1.0", "2.0rc1"]
    assert cache.versions("deepspeed") == ["1.0"]  # kept apart from the pre-release answer
    pip.listing("1.0", "1.1")
    assert cache.versions("deepspeed", refresh=True) == ["1.0", "1.1"]
    assert cache.versions("deepspeed") == ["1.0", "1.1"]
    assert len(pip.calls) == 3


def test_an_expired_answer_is_asked_again(pip: FakePip, cache_file: Path) -> None:
    cache_file.parent.mkdir(parents=True)
    cache_file.write_text(json.dumps({"deepspeed": {"at": time.time() - 3601, "versions": ["0.1"]}}))
    pip.listing("1.0")
    assert IndexCache(cache_file, str(pip.path), ttl=3600).versions("deepspeed") == ["1.0"]
    assert IndexCache(cache_file, str(pip.path), ttl=3600).versions("deepspeed") == ["1.0"]
    assert len(pip.calls) == 1
    assert IndexCache(cache_file, str(pip.path), ttl=0).versions("deepspeed") == ["1.0"]
    assert len(pip.calls) == 2


def test_other_packages_are_kept_when_one_is_written(pip: FakePip, cache_file: Path) -> None:
    cache = IndexCache(cache_file, str(pip.path))
    pip.listing("1.0")
    cache.versions("a")
    pip.listing("2.0")
    cache.versions("b")
    assert set(json.loads(cache_file.read_text())) == {"a", "b"}
    assert cache.versions("a") == ["1.0"]


@pytest.mark.parametrize(
    "content",
    [
        "",
        "not json",
        "[1, 2]",
        '"text"',
        "null",
        '{"deepspeed": []}',
        '{"deepspeed": {"versions": ["9.9"]}}',  # no time: as old as can be
        '{"deepspeed": {"at": 0, "versions": ["9.9"]}}',
        '{"deepspeed": {"at": NaN, "versions": ["9.9"]}}',
        '{"deepspeed": {"versions": "9.9"}}',
        pytest.param('{"a": ' * 5000 + "1" + "}" * 5000),
    ],
)
def test_a_broken_cache_file_is_asked_again_and_rewritten(pip: FakePip, cache_file: Path, content: str) -> None:
    cache_file.parent.mkdir(parents=True)
    cache_file.write_text(content)
    pip.listing("1.0")
    assert IndexCache(cache_file, str(pip.path)).versions("deepspeed") == ["1.0"]
    assert json.loads(cache_file.read_text())["deepspeed"]["versions"] == ["1.0"]


def test_a_fresh_entry_with_a_non_list_answer_is_asked_again(pip: FakePip, cache_file: Path) -> None:
    cache_file.parent.mkdir(parents=True)
    cache_file.write_text(json.dumps({"deepspeed": {"at": time.time(), "versions": {"1.0": 1}}}))
    pip.listing("2.0")
    assert IndexCache(cache_file, str(pip.path)).versions("deepspeed") == ["2.0"]


@pytest.mark.parametrize("at", ["yesterday", None, [1], {"t": 1}])
def test_a_cache_entry_whose_time_is_not_a_number_is_asked_again(pip: FakePip, cache_file: Path, at: object) -> None:
    cache_file.parent.mkdir(parents=True)
    cache_file.write_text(json.dumps({"deepspeed": {"at": at, "versions": ["9.9"]}}))
    pip.listing("1.0")
    assert IndexCache(cache_file, str(pip.path)).versions("deepspeed") == ["1.0"]


def test_a_cache_entry_from_the_future_does_not_stay_fresh_forever(pip: FakePip, cache_file: Path) -> None:
    cache_file.parent.mkdir(parents=True)
    cache_file.write_text(json.dumps({"deepspeed": {"at": time.time() + 10 * 365 * 86400, "versions": ["9.9"]}}))
    pip.listing("1.0")
    assert IndexCache(cache_file, str(pip.path), ttl=3600).versions("deepspeed") == ["1.0"]


def test_an_offline_wheelhouse_is_cached_apart(
    pip: FakePip, cache_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    online = IndexCache(cache_file, str(pip.path))
    monkeypatch.setenv("PIP_FIND_LINKS", str(tmp_path / "wheels"))
    assert IndexCache(cache_file, str(pip.path)).path == online.path  # find-links beside an index: same answers
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    offline = IndexCache(cache_file, str(pip.path))
    assert offline.path != online.path and offline.path.parent == cache_file.parent
    assert offline.path.name.startswith("index-cache-") and offline.path.suffix == ".json"
    monkeypatch.setenv("PIP_FIND_LINKS", str(tmp_path / "other-wheels"))
    assert IndexCache(cache_file, str(pip.path)).path not in (online.path, offline.path)
    pip.listing("1.0")
    offline.versions("x")
    assert offline.path.is_file() and not cache_file.exists()


def test_a_cache_that_cannot_be_written_is_a_storage_error_not_a_crash(pip: FakePip, tmp_path: Path) -> None:
    blocker = tmp_path / "blocker"
    blocker.write_text("a file where the envs folder should be")
    pip.listing("1.0")
    with pytest.raises(StorageError, match="index cache"):
        IndexCache(blocker / "index-cache.json", str(pip.path)).versions("x")
    assert os.path.isfile(blocker)
