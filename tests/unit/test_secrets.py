"""A secret the user hands over stays secret (issue #50, item 1): ``--env``, ``--fix-env``, ``--secret-env`` and a
matrix file's env reach the run, and no record, log, summary, report, JSON file or terminal line.

The redactor (``util.redact``): which names are secrets, values found whole across any chunk boundary, in linear
time; the command lines that name a secret by its variable (``util.shell``); the scrubber's shared rule.
"""

from __future__ import annotations

import html
import io
import itertools
import json
import sys
import time
import urllib.parse
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reprobisect.commands.main import _parse
from reprobisect.commands.options import register_option_secrets
from reprobisect.config.scripts import CliFixes, cli_fixes
from reprobisect.report.frame import _rerun_text
from reprobisect.run.child_env import scrubbed_environ
from reprobisect.run.child_process import ChildSpec, run_child
from reprobisect.util.console import redacted_terminal
from reprobisect.util.files import write_atomic
from reprobisect.util.redact import (
    MASK,
    StreamRedactor,
    credential_looking,
    declare_secret_name,
    forget_secrets,
    redact,
    redact_bytes,
    register_secret,
    register_secret_env,
    secret_name,
    secret_values,
)
from reprobisect.util.shell import shell_join, shown_argv

CANARY = "canary-7f3a9c2e-token"


@pytest.fixture(autouse=True)
def _no_secrets() -> Iterator[None]:
    """Each test starts and ends with an empty registry: it is process-wide."""
    forget_secrets()
    yield
    forget_secrets()


# --- which names are secrets ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    [
        "HF_TOKEN",
        "GITHUB_TOKEN",
        "WANDB_API_KEY",
        "OPENAI_APIKEY",
        "DS_HUB_PASSWD",
        "DB_PASSWORD",
        "SMTP_PASS",
        "SLACK_WEBHOOK_URL",
        "AWS_SECRET_ACCESS_KEY",
        "SSH_KEYS",
        "KEY",
        "SESSION_COOKIE",
        "GOOGLE_APPLICATION_CREDENTIALS",
        "PRIVATE_KEY_FILE",
        "hf_token",
        "NVIDIA_NGC_AUTH",
    ],
)
def test_a_credential_looking_name_is_a_secret(name: str) -> None:
    assert credential_looking(name) and secret_name(name)


@pytest.mark.parametrize(
    "name", ["MONKEY_PATCH", "KEYBOARD_LAYOUT", "PASSTHROUGH", "NCCL_DEBUG", "PATH", "CUDA_VISIBLE_DEVICES", "DONKEY"]
)
def test_key_and_pass_count_only_as_whole_parts_of_a_name(name: str) -> None:
    assert not credential_looking(name)


def test_secret_env_makes_any_name_a_secret_for_the_scrubber_too() -> None:
    assert not secret_name("MY_ORG_THING")
    declare_secret_name("MY_ORG_THING")
    assert secret_name("MY_ORG_THING")
    env = {"MY_ORG_THING": "x", "NCCL_DEBUG": "INFO", "DS_HUB_PASSWD": "p", "WEBHOOK": "w"}
    assert scrubbed_environ(env) == {"NCCL_DEBUG": "INFO"}


# --- the redactor ----------------------------------------------------------------------------------------------


def test_a_registered_value_and_its_escaped_forms_are_redacted() -> None:
    secret = 'tok"en/with&odd+chars'
    assert register_secret(secret)
    for form in (secret, json.dumps(secret)[1:-1], html.escape(secret), urllib.parse.quote(secret, safe="")):
        assert redact(f"a {form} b") == f"a {MASK} b"
    assert redact_bytes(f"x{secret}y".encode()) == f"x{MASK}y".encode()


def test_a_short_value_is_not_registered_it_would_shred_every_line() -> None:
    assert not register_secret("true")
    register_secret_env({"GITHUB_ACTIONS": "true", "NCCL_DEBUG": "INFO-long-enough"})
    assert redact("true INFO-long-enough") == "true INFO-long-enough"


def test_a_longer_secret_holding_a_shorter_one_is_hidden_whole() -> None:
    register_secret("abcdef")
    register_secret("abcdefghij")
    assert redact("xabcdefghijx") == f"x{MASK}x"


def test_every_file_written_through_write_atomic_is_redacted(tmp_path: Path) -> None:
    register_secret(CANARY)
    path = write_atomic(tmp_path / "r.json", '{"message": "boom ' + CANARY + '"}')
    assert CANARY not in path.read_text() and MASK in path.read_text()


_ALPHABET = st.sampled_from("ab-\n\x00é")


@settings(max_examples=300, deadline=None)
@given(
    secrets=st.lists(st.text(_ALPHABET, min_size=6, max_size=12), min_size=1, max_size=3),
    parts=st.lists(st.text(_ALPHABET, max_size=30), max_size=6),
    cuts=st.lists(st.integers(0, 200), max_size=8),
    data=st.data(),
)
def test_a_stream_hides_every_secret_whatever_its_chunks(
    secrets: list[str], parts: list[str], cuts: list[int], data: st.DataObject
) -> None:
    """Text with secrets at any place, cut at any chunk boundary: no secret comes out, and the result is the
    whole text's redaction (nothing lost, nothing doubled)."""
    forget_secrets()
    for secret in secrets:
        register_secret(secret)
    text = "".join(p + data.draw(st.sampled_from(secrets)) for p in parts) or secrets[0]
    raw = text.encode()
    redactor = StreamRedactor()
    bounds = sorted({min(c, len(raw)) for c in cuts} | {0, len(raw)})
    out = b"".join(redactor.feed(raw[a:b]) for a, b in itertools.pairwise(bounds)) + redactor.finish()
    assert out == redact_bytes(raw)
    for secret in secrets:
        assert secret.encode() not in out


@pytest.mark.parametrize(
    "line", ["a" * 1000 + "secret-value-0\n", "secret-value-00-secret-value-0"], ids=["near-misses", "dense-matches"]
)
def test_redaction_is_linear_ten_mib_in_well_under_seconds(line: str) -> None:
    for index in range(20):
        register_secret(f"secret-value-{index:02d}-{'x' * index}")
    text = line * (10 * 2**20 // len(line))
    raw = text.encode()
    began = time.perf_counter()
    redact(text)
    redactor = StreamRedactor()
    for start in range(0, len(raw), 65536):
        redactor.feed(raw[start : start + 65536])
    redactor.finish()
    assert time.perf_counter() - began < 3.0


# --- a run's output ------------------------------------------------------------------------------------------


def test_a_run_that_prints_a_secret_in_pieces_leaves_none_in_its_log(tmp_path: Path) -> None:
    """The child writes the secret in two flushes, as a split pipe read would see it, and in a traceback."""
    register_secret(CANARY)
    half = len(CANARY) // 2
    code = (
        "import sys, time\n"
        f"sys.stdout.write({CANARY[:half]!r}); sys.stdout.flush(); time.sleep(0.2)\n"
        f"sys.stdout.write({CANARY[half:]!r} + '\\n'); sys.stdout.flush()\n"
        f"raise RuntimeError('token was ' + {CANARY!r})\n"
    )
    log = tmp_path / "run.log"
    spec = ChildSpec(
        argv=(sys.executable, "-c", code), env={"PATH": "/usr/bin:/bin"}, cwd=tmp_path, log_path=log, timeout=30
    )
    result = run_child(spec)
    text = log.read_text()
    assert result.exit_code == 1 and "RuntimeError: token was ***" in text
    assert CANARY not in text and CANARY[:half] + CANARY[half:] not in text


# --- command lines -------------------------------------------------------------------------------------------


def test_a_command_line_names_a_secret_by_its_variable() -> None:
    declare_secret_name("OTHER")
    words = ["issue.py", "--env", f"HF_TOKEN={CANARY}", f"--env=OTHER={CANARY}", "--env", "NCCL_DEBUG=INFO"]
    words += ["--fix-env", f"f=DB_PASSWORD={CANARY}", "--", "--env", "HF_TOKEN=script-arg"]
    shown = shown_argv(words)
    assert shown == [
        "issue.py",
        "--env",
        "HF_TOKEN=$HF_TOKEN",
        "--env=OTHER=$OTHER",
        "--env",
        "NCCL_DEBUG=INFO",
        "--fix-env",
        "f=DB_PASSWORD=$DB_PASSWORD",
        "--",
        "--env",
        "HF_TOKEN=script-arg",
    ]
    line = shell_join(shown)
    assert CANARY not in line
    assert '--env HF_TOKEN="$HF_TOKEN"' in line and 'f=DB_PASSWORD="$DB_PASSWORD"' in line
    assert line.endswith("-- --env HF_TOKEN=script-arg")  # the script's own arguments are its own


def test_a_reference_is_expanded_only_when_it_names_its_own_variable() -> None:
    assert shell_join(["X=$Y"]) == "'X=$Y'"
    assert shell_join(["AX=$X"]) == "'AX=$X'"
    assert shell_join(["X=$(rm -rf ~)"]) == "'X=$(rm -rf ~)'"
    assert shell_join(["a b=X=$X"]) == "'a b=X='\"$X\""
    assert _rerun_text(["nox", "-s", "triage", "--", "x.py", "--env", "HF_TOKEN=$HF_TOKEN"]).endswith(
        '--env HF_TOKEN="$HF_TOKEN"'
    )


def test_a_fix_variable_keeps_its_value_for_the_run_and_shows_its_name() -> None:
    (fix,) = cli_fixes(CliFixes(env=[f"with-token=HF_TOKEN={CANARY}"])).values()
    assert fix.env == {"HF_TOKEN": CANARY}  # the run gets it
    assert CANARY not in " ".join(fix.cli) and CANARY not in fix.description
    assert fix.cli == ("--fix-env", "with-token=HF_TOKEN=$HF_TOKEN")


def test_options_register_their_secrets_before_anything_runs() -> None:
    args = _parse(
        [
            "triage",
            "x.py",
            "--env",
            f"HF_TOKEN={CANARY}",
            "--secret-env",
            "OTHER",
            "--env",
            "OTHER=other-canary-value",
            "--fix-env",
            "f=MY_API_KEY=fix-canary-value",
            "--env",
            "NCCL_DEBUG=not-a-secret-at-all",
        ]
    )
    register_option_secrets(args)
    text = redact(f"{CANARY} other-canary-value fix-canary-value not-a-secret-at-all")
    assert text == "*** *** *** not-a-secret-at-all"


def test_the_terminal_shows_no_secret_even_printed_in_pieces() -> None:
    register_secret(CANARY)
    out = io.StringIO()
    saved = sys.stdout
    sys.stdout = out
    try:
        with redacted_terminal():
            print(CANARY[:5], end="")
            print(CANARY[5:])
            print(f"error: --env HF_TOKEN={CANARY}", file=sys.stdout)
    finally:
        sys.stdout = saved
    assert CANARY not in out.getvalue() and out.getvalue().count(MASK) == 2


# --- a whole session: matrix --script, matrix.yaml's env, report, nightly outputs, the terminal -------------------

_LEAKER = """\
import os, sys
names = ("HF_TOKEN", "OTHER", "DB_PASSWORD", "MY_WEBHOOK")
values = [os.environ.get(name, "") for name in names]
print("reversed, to show the run got them:", " ".join(v[::-1] for v in values))
print("secrets:", *values)
sys.stderr.write("half " + values[0][:9]); sys.stderr.flush(); sys.stderr.write(values[0][9:] + "\\n")
raise RuntimeError("bad token " + " ".join(values))
"""
_CANARIES = {
    "HF_TOKEN": "canary-hf-0123456789",
    "OTHER": "canary-other-abcdef",
    "DB_PASSWORD": "canary-fix-9876543",
    "MY_WEBHOOK": "canary-yaml-hook-42",
}


def _session_config(tmp_path: Path, script: Path) -> Path:
    """A matrix file of one cell whose repro's form and fix set secrets of their own (matrix.yaml's env)."""
    import yaml

    data = {
        "version": 1,
        "matrix": {"axes": {"torch": ["system"], "deepspeed": ["0.16.4"], "lightning": ["2.6.6"]}},
        "repros": {
            "demo": {
                "title": "leaks",
                "expected_signature": None,
                "forms": {"cpu-deepspeed": {"script": str(script), "precision": "fp32"}},
                "fixes": {
                    "none": {},
                    "hooked": {"description": "d", "env": {"MY_WEBHOOK": _CANARIES["MY_WEBHOOK"]}},
                },
            }
        },
    }
    path = tmp_path / "matrix.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def _fake_machine(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Cells are folders whose python is this interpreter; the index and the base interpreter are fixed: the runs,
    the store and the reports are real."""
    from reprobisect.cells.base import BaseInterpreter
    from reprobisect.cells.envs import CellEnv
    from reprobisect.commands import options
    from reprobisect.run import matrix_build as prepare
    from reprobisect.run import matrix_plan as plan

    def ensure_env(cell: object, base: object, envs_dir: Path, **_: object) -> CellEnv:
        path = envs_dir / "cell"
        (path / "bin").mkdir(parents=True, exist_ok=True)
        if not (path / "bin" / "python").exists():
            (path / "bin" / "python").symlink_to(sys.executable)
        return CellEnv(cell=cell, path=path, reused=True, build_seconds=0.0)  # type: ignore[arg-type]

    class Index:
        def __init__(self, *args: object, **kwargs: object) -> None:
            pass

        def versions(self, package: str, **_: object) -> list[str]:
            return {"deepspeed": ["0.16.4"], "lightning": ["2.6.6"]}.get(package, ["2.5.1"])

    base = BaseInterpreter(executable=sys.executable, version="3.11.2", is_venv=False, site_packages=(), torch="2.5.1")
    monkeypatch.setattr(prepare, "ensure_env", ensure_env)
    monkeypatch.setattr(plan, "IndexCache", Index)
    monkeypatch.setattr(plan, "find_python", lambda version: None)
    monkeypatch.setattr(options, "base_interpreter", lambda python: base)


def test_no_secret_reaches_any_file_or_the_terminal_of_a_session(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    from reprobisect.commands.main import main
    from reprobisect.nightly.regressions import masked
    from reprobisect.nightly.release_night import _write_outputs
    from reprobisect.report.frame import load_records, records_frame
    from reprobisect.report.views import ReportData
    from tests.conftest import night_news

    _fake_machine(monkeypatch, tmp_path)
    script = tmp_path / "issue.py"
    script.write_text(_LEAKER)
    config, out = _session_config(tmp_path, script), tmp_path / "reports"
    common = ["--config", str(config), "--out", str(out), "--envs", str(tmp_path / "cells"), "--no-sandbox"]
    script_run = ["matrix", "--script", str(script), "--backend", "cpu", "--secret-env", "OTHER"]
    script_run += ["--env", f"HF_TOKEN={_CANARIES['HF_TOKEN']}", "--env", f"OTHER={_CANARIES['OTHER']}"]
    script_run += ["--fix-env", f"passworded=DB_PASSWORD={_CANARIES['DB_PASSWORD']}", *common]
    monkeypatch.setattr(sys, "argv", ["reprobisect", *script_run])
    assert main(script_run) == 0
    summary = (out / "summary-matrix.md").read_text()  # the next session writes its own
    yaml_run = ["matrix", "--repro", "demo", "--backend", "cpu", *common]
    monkeypatch.setattr(sys, "argv", ["reprobisect", *yaml_run])
    assert main(yaml_run) == 0
    assert main(["report", "--out", str(out), "--dest", str(tmp_path / "report"), "--markdown"]) == 0
    data = ReportData(frame=records_frame(load_records([out])), sources=[out])
    after = masked(data.frame)
    before = after.assign(outcome="PASS", signature_id="")
    _write_outputs(tmp_path / "nightly", night_news(before, after, baseline="0.1", release="0.2"), data)

    inputs = {script, config}  # what the user wrote: the rest is what the harness wrote
    files = [p for p in tmp_path.rglob("*") if p.is_file() and "cells" not in p.parts and p not in inputs]
    kinds = {p.suffix for p in files}
    assert {".json", ".log", ".md", ".html", ".csv", ".parquet"} <= kinds
    shown = capfd.readouterr()
    texts = {str(p): p.read_bytes() for p in files} | {"stdout": shown.out.encode(), "stderr": shown.err.encode()}
    for where, text in texts.items():
        for name, canary in _CANARIES.items():
            assert canary.encode() not in text, f"{name}'s value in {where}"
    logs = b"".join(v for k, v in texts.items() if k.endswith(".log"))
    for canary in _CANARIES.values():  # each run got its secrets: their reversal, no secret, is in its log
        assert canary[::-1].encode() in logs
    assert b"RuntimeError: bad token ***" in logs
    assert '--env HF_TOKEN="$HF_TOKEN"' in summary and '--env OTHER="$OTHER"' in summary
    assert 'passworded=DB_PASSWORD="$DB_PASSWORD"' in summary
    report = (tmp_path / "report" / "report.md").read_text()
    assert '--env HF_TOKEN="$HF_TOKEN"' in report


def test_a_slurm_job_redacts_what_its_node_writes_and_prints(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A job runs in a fresh process on another node: the submitter's secrets travel in its payload."""
    from reprobisect.engine import slurm

    register_secret(CANARY)
    payload = slurm._Payload(
        config=None,  # type: ignore[arg-type]
        request=None,  # type: ignore[arg-type]
        base=None,  # type: ignore[arg-type]
        store_root=tmp_path,
        envs_dir=tmp_path,
        environ={},
        secrets=secret_values(),
    )
    forget_secrets()  # the node's process knows nothing yet

    def run_matrix(config: object, request: object, ctx: object, **_: object) -> list[object]:
        ctx.echo(f"cell c: build failed: {CANARY}")  # type: ignore[attr-defined]
        write_atomic(tmp_path / "record.json", f'"{CANARY}"')
        return []

    monkeypatch.setattr(slurm, "run_matrix", run_matrix)
    slurm.run_cell_job(payload, "c")
    assert CANARY not in capsys.readouterr().out and CANARY not in (tmp_path / "record.json").read_text()


@pytest.mark.parametrize(
    "words",
    [
        ["triage", "x.py", "--evn", "HF_TOKEN=hf_mistyped_0001"],
        ["triage", "x.py", "--fix-evn", "f=DB_PASSWORD=hf_mistyped_0001"],
        ["triage", "x.py", "--evn=HF_TOKEN=hf_mistyped_0001"],
    ],
)
def test_a_refused_word_is_quoted_by_argparse_without_its_secret(
    words: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """argparse quotes a word it refuses before the options are read: the values of NAME=VALUE words of a
    secret's name are hidden before it parses (issue #50: a mistyped --env printed the token)."""
    from reprobisect.commands.main import main

    with pytest.raises(SystemExit) as exited:
        main(words)
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert "unrecognized arguments" in err and "hf_mistyped_0001" not in err and "***" in err
