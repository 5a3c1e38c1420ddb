from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from reprobisect.config.load import load_config
from reprobisect.errors import ConfigError
from tests.conftest import ROOT


def _write(tmp_path: Path, data: object) -> Path:
    (tmp_path / "repro.py").write_text("print('hi')\n")
    path = tmp_path / "matrix.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _rule_with_imports(imports: object) -> dict:
    """A matrix whose one compatibility rule has ``imports`` as given."""
    rule = {"when": {"lightning": ">=2.6"}, "require": {"deepspeed": ">=0.16"}, "reason": "r", "imports": imports}
    return {"axes": {"deepspeed": ["0.16.4"]}, "compatibility": [rule]}


def _minimal() -> dict:
    return {
        "version": 1,
        "repros": {
            "gan": {
                "title": "t",
                "expected_signature": "zero-ipg-buffer-none",
                "forms": {"cpu-deepspeed": {"script": "repro.py", "precision": "bf16", "args": ["--steps", 3]}},
                "fixes": {"none": {}, "freeze-d": {"args": ["--freeze-d"], "description": "d"}},
            }
        },
    }


def test_the_projects_matrix_loads() -> None:
    config = load_config(ROOT / "matrix.yaml")
    assert set(config.repros) == {"gan", "zero3", "zero3-mixed-dtype"}
    gan = config.repro("gan")
    assert set(gan.forms) == {"cuda", "cuda-bf16", "cpu-shim", "cpu-deepspeed"}
    assert gan.forms["cuda-bf16"].backend == "cuda" and gan.forms["cuda-bf16"].precision == "bf16-mixed"
    assert all("--check-training" in gan.forms[name].args for name in ("cuda", "cuda-bf16"))
    assert next(iter(gan.fixes)) == "none"
    assert {"freeze-d", "no-overlap-comm", "single-engine", "zero-stage-0", "buffer-dtype-half"} <= set(gan.fixes)
    assert {"torch-adam", "bf16"} <= set(config.repro("zero3").fixes)
    assert config.default_cell["torch"] == "system" and config.default_cell["torchvision"] == "match"


def test_minimal_config_and_defaults(tmp_path: Path) -> None:
    config = load_config(_write(tmp_path, _minimal()))
    form = config.repro("gan").forms["cpu-deepspeed"]
    assert form.args == ("--steps", "3")
    assert form.script == tmp_path / "repro.py"
    assert config.default_cell == {"torch": "system", "deepspeed": "latest", "lightning": "latest"}


@pytest.mark.parametrize(
    ("mutate", "needles"),
    [
        (lambda d: d.update(repross=d.pop("repros")), ["top level", "'repross'", "Perhaps you meant 'repros'"]),
        (
            lambda d: d["repros"]["gan"]["forms"].update(cpu_shim=d["repros"]["gan"]["forms"].pop("cpu-deepspeed")),
            ["repros.gan.forms", "'cpu_shim'", "Perhaps you meant 'cpu-shim'"],
        ),
        (
            lambda d: d["repros"]["gan"]["forms"]["cpu-deepspeed"].update(script="missing.py"),
            ["repros.gan.forms.cpu-deepspeed.script", "missing.py does not exist"],
        ),
        (lambda d: d["repros"]["gan"]["fixes"].pop("none"), ["repros.gan.fixes", "'none'"]),
        (lambda d: d["repros"]["gan"].update(timeout=-1), ["repros.gan.timeout", "-1"]),
        (
            lambda d: d["repros"]["gan"]["fixes"]["freeze-d"].update(arg=["x"]),
            ["repros.gan.fixes.freeze-d", "'arg'", "Perhaps you meant 'args'"],
        ),
        (
            lambda d: d["repros"]["gan"]["forms"]["cpu-deepspeed"].update(args="--steps 3"),
            ["repros.gan.forms.cpu-deepspeed.args", "expected a list"],
        ),
        (lambda d: d.update(version=2), ["version", "2", "version 1"]),
        (lambda d: d.update(default_cell={"deepspeeed": "0.16.4"}), ["deepspeeed", "meant 'deepspeed'"]),
        (
            lambda d: d.update(matrix={"axes": {"deepspeed": ["0.16.4"]}}, default_cell={"deepspeeed": "0.16.4"}),
            ["default_cell", "'deepspeeed'", "Perhaps you meant 'deepspeed'"],
        ),
        (
            lambda d: d.update(matrix={"axes": {"deepspeed": ["0.16.4"]}, "exclude": [{"lightnin": "2.*"}]}),
            ["matrix.exclude[0]", "'lightnin'"],
        ),
        (
            lambda d: d.update(
                matrix={
                    "axes": {"deepspeed": ["0.16.4"]},
                    "compatibility": [
                        {"when": {"deepspeed": "0.16.4"}, "require": {"deepspeed": "0.17.0"}, "reason": "r"}
                    ],
                }
            ),
            ["matrix.compatibility[0]", "contradict"],
        ),
        (
            lambda d: d.update(matrix=_rule_with_imports(["lightning.pytorch"])),
            ["matrix.compatibility[0].imports", "'lightning.pytorch'", "top-level module name"],
        ),
        (
            lambda d: d.update(matrix=_rule_with_imports([{"lightning": 1}])),
            ["matrix.compatibility[0].imports[0]"],
        ),
        (
            lambda d: d["repros"]["gan"]["fixes"].update(p={"patch": "fixes/missing.diff"}),
            ["repros.gan.fixes.p.patch", "missing.diff does not exist"],
        ),
        (
            lambda d: d["repros"]["gan"]["fixes"].update(p={"patch": "repro.py", "override": {"deepspeed": "0.17.0"}}),
            ["repros.gan.fixes.p", "not both"],
        ),
    ],
)
def test_bad_input_names_file_key_and_fix(tmp_path: Path, mutate, needles: list[str]) -> None:
    data = _minimal()
    mutate(data)
    with pytest.raises(ConfigError) as excinfo:
        load_config(_write(tmp_path, data))
    message = str(excinfo.value)
    assert "matrix.yaml" in message
    for needle in needles:
        assert needle in message


def test_unknown_repro_lists_the_known_ones(tmp_path: Path) -> None:
    config = load_config(_write(tmp_path, _minimal()))
    with pytest.raises(ConfigError, match=r"unknown 'gna'.*Perhaps you meant 'gan'"):
        config.repro("gna")


def test_not_yaml(tmp_path: Path) -> None:
    path = tmp_path / "matrix.yaml"
    path.write_text("repros: [unclosed\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(path)


def test_default_fixes_are_the_reports_code_first_and_known_fixes(tmp_path: Path) -> None:
    """A newcomer's `repro NAME` runs the report's code and the fixes that answer it (issue #29), not all of them."""
    assert load_config(ROOT / "matrix.yaml").repro("gan").default_fixes == (
        "none",
        "one-backward-raw-d",
        "lightning-several-backward",
    )
    data = _minimal()
    assert load_config(_write(tmp_path, data)).repro("gan").default_fixes == ()  # none given: every fix runs
    data["repros"]["gan"]["default_fixes"] = ["none", "freeze-d"]
    assert load_config(_write(tmp_path, data)).repro("gan").default_fixes == ("none", "freeze-d")
    for wrong, needle in (
        (["none", "nope"], "'nope' is not one of its fixes"),
        (["freeze-d"], "must start with 'none'"),
        ([], "must start with 'none'"),
        ("none", "default_fixes"),
    ):
        data["repros"]["gan"]["default_fixes"] = wrong
        with pytest.raises(ConfigError, match=r"matrix\.yaml: repros\.gan\.default_fixes"):
            load_config(_write(tmp_path, data))
        with pytest.raises(ConfigError, match=needle):
            load_config(_write(tmp_path, data))
    data = _minimal()
    data["repros"]["gan"]["fixes"]["all"] = {"args": ["--x"], "description": "d"}
    with pytest.raises(ConfigError, match="'all' is reserved"):
        load_config(_write(tmp_path, data))


def test_repro_runs_its_default_fixes_and_all_runs_every_fix(monkeypatch) -> None:
    """`repro gan` without --fix asks the matrix for the default fixes; `--fix all` for every fix."""
    import types

    from reprobisect.run import reproduce as module
    from reprobisect.run.context import RunContext
    from reprobisect.run.reproduce import ReproRequest, reproduce

    asked = []
    monkeypatch.setattr(module, "resolve_cell", lambda base, wanted: types.SimpleNamespace(
        torch="2.13.0", torch_source="system", packages={"deepspeed": "0.16.4", "lightning": "2.6.6"}))  # fmt: skip
    monkeypatch.setattr(module, "run_matrix", lambda config, request, ctx, **_: asked.append(request.fixes) or [])
    config = load_config(ROOT / "matrix.yaml")
    for fixes in ((), ("all",)):
        reproduce(
            config,
            ReproRequest(repro="gan", backend="cpu", fixes=fixes),
            RunContext(
                base=types.SimpleNamespace(executable="python3"),
                store=None,
                envs_dir=Path("."),
                environ={},
                echo=lambda _: None,
            ),
        )
    assert asked[0] == ("none", "one-backward-raw-d", "lightning-several-backward")
    assert asked[1] == tuple(config.repro("gan").fixes)


def test_without_config_the_checkouts_matrix_else_the_installed_one(tmp_path: Path) -> None:
    from reprobisect.config.load import default_config_path

    (tmp_path / "matrix.yaml").write_text("repros: {}\n")
    assert default_config_path(tmp_path) == Path("matrix.yaml")  # a matrix where the command runs wins
    elsewhere = tmp_path / "empty"
    elsewhere.mkdir()
    # run from this checkout's src/ (tests, an editable install): the checkout's own file, its repros beside it
    assert default_config_path(elsewhere) == (ROOT / "matrix.yaml").resolve()
