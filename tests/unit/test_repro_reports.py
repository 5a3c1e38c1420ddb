"""Each repro reads as the report (issue #29, item 2): the report's code is what fix ``none`` runs, line for line.

``repros/gan_fabric_zero1.py`` holds the GAN report's code between two marker lines. Every line there is a line of the
issue as filed (``tests/resources/reports/gan_fabric_zero1.filed.txt``, the code block of Lightning #19773, whose
indentation the issue's text lost), in the issue's order, unless it says ``# adapted`` (standalone here) or
``# instruments`` (the harness's measurements); the training loop is the issue's, every line. Fix ``none`` and the
patches run that file, a fix with flags runs its sibling, and the sibling without flags differs from it only in
lines its flags name.

``repros/boring_trainer_zero3.py`` holds the ZeRO-3 report's code (Lightning #10510,
``boring_trainer_zero3.filed.txt``, indentation kept) the same way, each unmarked line as filed, indentation and all;
the filed lines it leaves out are exactly those its adapted lines replace. Its fixes are flags that reach the report's
code only on marked lines, so every fix runs that file.
"""

from __future__ import annotations

import ast
import difflib
import re
from pathlib import Path

import pytest

from reprobisect.config.load import load_config
from tests.conftest import ROOT

REPORT = ROOT / "repros" / "gan_fabric_zero1.py"
FIXES = ROOT / "repros" / "gan_fabric_zero1_fixes.py"
FILED = ROOT / "tests" / "resources" / "reports" / "gan_fabric_zero1.filed.txt"
ZERO3 = ROOT / "repros" / "boring_trainer_zero3.py"
ZERO3_FILED = ROOT / "tests" / "resources" / "reports" / "boring_trainer_zero3.filed.txt"
MARKED = re.compile(r"#\s*(adapted|instruments)\b")


def _block(path: Path) -> list[str]:
    """The lines between ``# --- the report's code`` and ``# --- end of the report's code``, ruff's fmt lines out."""
    lines = path.read_text(encoding="utf-8").splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("# --- the report's code"))
    end = next(i for i, line in enumerate(lines) if line.startswith("# --- end of the report's code"))
    return [line for line in lines[start + 1 : end] if line not in ("# fmt: off", "# fmt: on")]


def _filed(path: Path = FILED) -> list[str]:
    return [line.strip() for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def test_every_unmarked_line_of_the_repro_is_the_issues_in_its_order() -> None:
    filed, at = _filed(), 0
    for line in _block(REPORT):
        if not line.strip() or MARKED.search(line):
            continue
        # the issue lost its indentation: a line matches the filed one with its leading spaces
        found = next((i for i in range(at, len(filed)) if filed[i] == line.strip()), None)
        assert found is not None, f"not the issue's line (or out of its order), and not marked: {line!r}"
        at = found + 1


def test_the_training_loop_is_the_issues_every_line() -> None:
    filed = _filed()
    first, last = (
        filed.index("for epoch in range(args.epochs):"),
        filed.index('writer.add_scalar("Loss_G", errG.item(), epoch*len(dataloader)+i)'),
    )
    loop = [line.strip() for line in _block(REPORT) if line.strip()]
    start = loop.index(filed[first])
    assert loop[start : start + last - first + 1] == filed[first : last + 1]


def test_the_adapted_lines_are_few() -> None:
    # what makes the report stand alone here: imports of what it took from DeepSpeedExamples, the precision the CPU
    # forms need, tensorboard's writer, torch.cuda.synchronize on a machine without CUDA; the instruments hook in
    adapted = [line for line in _block(REPORT) if MARKED.search(line)]
    assert 0 < len(adapted) <= 10, adapted  # 9 today: 3 imports, Fabric, 2 syncs, 3 instruments


def test_none_and_the_patches_run_the_reports_code_and_flags_run_the_sibling() -> None:
    gan = load_config(ROOT / "matrix.yaml").repros["gan"]
    fabric = [form for form in gan.forms.values() if form.script == REPORT]
    assert {form.name for form in fabric} == {"cuda", "cuda-bf16", "cpu-shim"}
    for form in fabric:
        for fix in gan.fixes.values():
            script = form.script_for(fix)
            if fix.name == "none" or fix.kind == "patch":
                assert script == REPORT, (form.name, fix.name)
                assert not fix.args_for(form.name)
            else:
                assert script == FIXES, (form.name, fix.name)


def test_the_sibling_without_flags_changes_only_lines_its_flags_name() -> None:
    report = [line.split("  #")[0].rstrip() for line in _block(REPORT) if not MARKED.search(line)]
    sibling = FIXES.read_text(encoding="utf-8").splitlines()
    removed = [
        line[1:]
        for line in difflib.unified_diff(report, sibling, lineterm="", n=0)
        if line.startswith("-") and not line.startswith("---") and line[1:].strip()
    ]
    # the report's lines the sibling rewrites: D's and G's forward and backward, the criterion, the strategy, the
    # set-up (indented under single-engine's else); each rewritten line in the sibling carries its flag's name
    assert len(removed) <= 20, removed  # 18 today
    flagged = [line for line in sibling if re.search(r"# --[a-z-]+", line)]
    assert len(flagged) >= len(removed) // 2


@pytest.mark.parametrize("script", sorted((ROOT / "repros").glob("*.py")), ids=lambda p: p.name)
def test_no_repro_keeps_its_own_step_helper(script: Path) -> None:
    text = script.read_text(encoding="utf-8")
    if script.name == "instruments.py":
        assert "def step(" in text
    else:
        assert "def step(" not in text, "the step events come from instruments.py"


def _zero3_filed() -> list[str]:
    """The ZeRO-3 issue's code block, its non-blank lines as filed (this issue kept their indentation)."""
    return [line.rstrip() for line in ZERO3_FILED.read_text(encoding="utf-8").splitlines() if line.strip()]


def _zero3_unmarked() -> list[str]:
    return [line.rstrip() for line in _block(ZERO3) if line.strip() and not MARKED.search(line)]


def test_zero3_every_unmarked_line_is_the_issues_as_filed_in_its_order() -> None:
    filed, at = _zero3_filed(), 0
    for line in _zero3_unmarked():
        found = next((i for i in range(at, len(filed)) if filed[i] == line), None)
        assert found is not None, f"not the issue's line as filed (or out of its order), and not marked: {line!r}"
        at = found + 1


def test_zero3_the_reports_essential_lines_are_there_unchanged() -> None:
    unmarked = _zero3_unmarked()
    essential = [
        "from deepspeed.ops.adam import DeepSpeedCPUAdam, FusedAdam",
        "class RandomDataset(Dataset):",
        "        self.data = torch.randn(length, size)",
        "class BoringModel(LightningModule):",
        "        self.layer = torch.nn.Linear(32, 2)",
        "    def configure_optimizers(self):",
        "        return FusedAdam(self.layer.parameters(), lr=0.1)",
        "    train_data = DataLoader(RandomDataset(32, 64), batch_size=2)",
        "    trainer = Trainer(",
        '        strategy = "deepspeed_stage_3"',
        "    trainer.fit(model, train_dataloaders=train_data, val_dataloaders=val_data)",
        "    trainer.test(model, dataloaders=test_data)",
        'if __name__ == "__main__":',
    ]
    assert [line for line in essential if line not in unmarked] == []
    # as filed, configure_optimizers returns FusedAdam (the torch-adam lines before it are marked)
    body = unmarked[unmarked.index("    def configure_optimizers(self):") + 1 :]
    assert body[0] == "        return FusedAdam(self.layer.parameters(), lr=0.1)"


def test_zero3_the_filed_lines_left_out_are_those_the_adapted_lines_replace() -> None:
    unmarked = _zero3_unmarked()
    left_out = [line.strip() for line in _zero3_filed() if line not in unmarked]
    assert left_out == [
        "from pytorch_lightning import LightningModule, Trainer",  # lightning.pytorch
        "def __init__(self):",  # --optimizer
        "def run():",  # the harness's flags
        "model = BoringModel()",
        "limit_train_batches=1,",  # --steps
        "gpus = 4,",  # accelerator="auto", devices: 1 or the launcher's ranks
        "precision=16,",  # --precision
        "run()",
    ]
    adapted = [line for line in _block(ZERO3) if MARKED.search(line)]
    assert 0 < len(adapted) <= 14, adapted  # 13 today: 12 adapted (the 8 above, 4 added), 1 instruments


def test_zero3_the_flags_reach_the_reports_code_only_on_marked_lines() -> None:
    # the flags the fixes pass (--optimizer, --precision) and --steps: what they change is on a marked line
    harness = re.compile(
        r"\bargs\b|optimizer_name|_T0|trainer_events|torch\.optim\.Adam\(self\.parameters\(\), lr=0\.1\)"
    )
    reached = [line for line in _block(ZERO3) if harness.search(line) and not line.lstrip().startswith("#")]
    assert len(reached) >= 7
    assert [line for line in reached if not MARKED.search(line)] == []


def test_zero3_the_flags_default_to_the_reports_values() -> None:
    tree = ast.parse(ZERO3.read_text(encoding="utf-8"))
    defaults = {
        node.args[0].value: next(ast.literal_eval(k.value) for k in node.keywords if k.arg == "default")
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "add_argument"
        and any(k.arg == "default" for k in node.keywords)
    }
    # precision=16 is "16-mixed" now; limit_train_batches=1; FusedAdam
    assert defaults == {"--precision": "16-mixed", "--steps": 1, "--optimizer": "fused-adam", "--seed": 42}


def test_zero3_every_fix_runs_the_reports_code() -> None:
    zero3 = load_config(ROOT / "matrix.yaml").repros["zero3"]
    trainer = [form for form in zero3.forms.values() if form.script == ZERO3]
    assert {form.name for form in trainer} == {"cuda", "cuda-bf16", "cpu-shim"}
    for form in trainer:
        for fix in zero3.fixes.values():
            assert form.script_for(fix) == ZERO3, (form.name, fix.name)
            flags = {a for a in fix.args_for(form.name) if a.startswith("--")}
            assert flags <= {"--optimizer", "--precision"}, (form.name, fix.name, flags)
            assert fix.name != "none" or not flags


# The pure-DeepSpeed analogues (form cpu-deepspeed, and the #8072 repro's forms): each file is the report's loop on plain
# DeepSpeed with no fix in it; its ``_fixes`` sibling is that code with the fixes as flags.
ANALOGUES = {
    ROOT / "repros" / "gan_deepspeed_zero1.py": ROOT / "repros" / "gan_deepspeed_zero1_fixes.py",
    ROOT / "repros" / "boring_deepspeed_zero3.py": ROOT / "repros" / "boring_deepspeed_zero3_fixes.py",
}
FLAG = re.compile(r"""add_argument\(\s*["'](--[a-z0-9-]+)["']""")


def _analogue_forms() -> list[tuple[str, str, Path]]:
    config = load_config(ROOT / "matrix.yaml")
    return [
        (repro.name, form.name, form.script)
        for repro in config.repros.values()
        for form in repro.forms.values()
        if form.script in ANALOGUES
    ]


def _code(path: Path) -> list[str]:
    """A script's lines after its module docstring."""
    lines = path.read_text(encoding="utf-8").splitlines()
    closing = next(i for i, line in enumerate(lines) if i > lines.index(next(x for x in lines if x.startswith('"""')))
                   and line.rstrip().endswith('"""'))  # fmt: skip
    return lines[closing + 1 :]


def test_the_analogues_run_as_they_are_for_none_and_the_patches_and_their_siblings_for_flags() -> None:
    config = load_config(ROOT / "matrix.yaml")
    forms = _analogue_forms()
    assert {(repro, form) for repro, form, _ in forms} == {
        ("gan", "cpu-deepspeed"),
        ("zero3", "cpu-deepspeed"),
        ("zero3-mixed-dtype", "cpu-deepspeed"),
        ("zero3-mixed-dtype", "cuda"),
    }
    for repro_name, form_name, script in forms:
        repro = config.repros[repro_name]
        form = repro.forms[form_name]
        assert form.fix_script == ANALOGUES[script], (repro_name, form_name)
        for fix in repro.fixes.values():
            expected = ANALOGUES[script] if fix.args_for(form_name) else script
            assert form.script_for(fix) == expected, (repro_name, form_name, fix.name)
            assert fix.name != "none" or form.script_for(fix) == script


@pytest.mark.parametrize("plain", sorted(ANALOGUES), ids=lambda p: p.name)
def test_an_analogue_has_no_fix_flag_and_its_sibling_adds_exactly_the_fixes_flags(plain: Path) -> None:
    config = load_config(ROOT / "matrix.yaml")
    own, sibling = set(FLAG.findall(plain.read_text())), set(FLAG.findall(ANALOGUES[plain].read_text()))
    passed_by_forms, passed_by_fixes = set(), set()
    for repro_name, form_name, script in _analogue_forms():
        if script != plain:
            continue
        repro = config.repros[repro_name]
        passed_by_forms |= {a for a in repro.forms[form_name].args if a.startswith("--")}
        for fix in repro.fixes.values():
            passed_by_fixes |= {a for a in fix.args_for(form_name) if a.startswith("--")}
    assert passed_by_forms <= own  # every form's own arguments run the report's loop as it is
    assert own <= sibling
    # the sibling's extra flags are exactly the fixes' (a fix may also pass a form's own argument: zero3's bf16)
    assert sibling - own == passed_by_fixes - own


def _headers(lines: list[str], j: int) -> list[str]:
    """The block headers line ``j`` is under (an ``else:`` brings its ``if``), innermost first."""
    found, indent = [], len(lines[j]) - len(lines[j].lstrip())
    for line in reversed(lines[:j]):
        depth = len(line) - len(line.lstrip())
        if line.strip() and depth < indent:
            found.append(line)
            if not line.strip().startswith(("else", "elif")):
                indent = depth
    return found


@pytest.mark.parametrize("plain", sorted(ANALOGUES), ids=lambda p: p.name)
def test_an_analogues_sibling_differs_from_it_only_where_a_flag_is_named(plain: Path) -> None:
    fixes = ANALOGUES[plain]
    flags = set(FLAG.findall(fixes.read_text())) - set(FLAG.findall(plain.read_text()))
    named = re.compile("|".join(rf"{re.escape(f)}\b|args\.{f[2:].replace('-', '_')}\b" for f in sorted(flags)))
    ours, theirs = _code(plain), _code(fixes)
    removed = 0
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(a=ours, b=theirs, autojunk=False).get_opcodes():
        if tag == "equal":
            continue
        removed += i2 - i1
        # each changed stretch names the flag it is for (on a line of it, in its comment or docstring, or in the
        # ``if`` it is under), or is the config event's list of the fixes applied
        stretch = theirs[j1:j2]
        if stretch == ["        fixes=fixes(args),"]:
            continue
        headers = _headers(theirs, j1)[:2] if j1 < j2 else []
        assert any(named.search(line) for line in stretch + headers), stretch
    # the report's loop is the sibling's with the flags off: few of its lines change (GAN: the forwards, the
    # backwards, the loss, the ZeRO settings, the set-up under --single-engine's else; ZeRO-3: the optimizer)
    assert removed <= {"gan_deepspeed_zero1.py": 30, "boring_deepspeed_zero3.py": 5}[plain.name], removed  # 27, 3 today
