"""The GAN's training check (issue #17, item 1) on real releases, on the CPU: "it runs" is not "it trains".

The Fabric GAN runs 50 bf16 steps under Lightning's DeepSpeed strategy (the CPU shim), then the same steps under
plain ``strategy="ddp"`` from the same weights on the same inputs. On DeepSpeed 0.16.4 with ``--freeze-d`` it trains
(losses within a few per cent of ddp's); the negative control, a D that learns from its real-image loss only, is
DoesNotTrain; DeepSpeed 0.19.8 with ``--buffer-dtype half``, which completes every step, is DoesNotTrain too, and
trains again with matrix.yaml's fix one-backward-frozen-d (``--freeze-d --d-one-backward --no-overlap-comm``) and
with one-backward-frozen-d-logits (the same, D's sigmoid moved into a logits loss: measured 2.5 % and 3.5 %).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.integration.test_real_cells import envs_dir  # noqa: F401 - shared fixture
from tests.integration.test_triage_real import _harness, _records
from tests.system_tools import DEEPSPEED_OPS

pytestmark = [pytest.mark.slow, pytest.mark.requires_tool(*DEEPSPEED_OPS)]

GAN = str(ROOT / "repros" / "gan_fabric_zero1.py")  # the report's code: no fix flags
GAN_FIXES = str(ROOT / "repros" / "gan_fabric_zero1_fixes.py")  # the same code with the user-side fixes as flags
# one thread a run, two runs at a time: CI's two cores both work (each run and its ddp reference is single-threaded)
CPU = ("--shim", "--env", "DS_ACCELERATOR=cpu", "--env", "OMP_NUM_THREADS=1", "--lightning", "2.6.6", "--jobs", "2")
TRAIN = ("--precision", "bf16-mixed", "--steps", "50", "--batch-size", "8", "--ngf", "16", "--ndf", "16")


def test_a_gan_that_trains_passes_and_one_that_only_runs_does_not(tmp_path: Path, envs_dir: Path) -> None:  # noqa: F811
    out = tmp_path / "out"
    _harness(
        "triage", GAN_FIXES, *CPU, "--deepspeed", "0.16.4", "--fix-args", "control=--control-d-one-loss",
        "--", *TRAIN, "--freeze-d", "--check-training", envs=envs_dir, out=out,
    )  # fmt: skip
    _harness(
        "triage", GAN_FIXES, *CPU, "--deepspeed", "0.19.8", "--fix-args", "one-backward=--freeze-d --d-one-backward --no-overlap-comm",
        "--fix-args", "logits=--freeze-d --d-one-backward --no-overlap-comm --logits-loss",
        "--", *TRAIN, "--buffer-dtype", "half", "--check-training", envs=envs_dir, out=out,
    )  # fmt: skip
    runs = {(r.versions["deepspeed"], r.fix): r for r in _records(out)}
    # freeze-d; on 0.19.8 D's losses in one backward, and the same with D's sigmoid in its loss (16-mixed's fix)
    for key in (("0.16.4", "none"), ("0.19.8", "one-backward"), ("0.19.8", "logits")):
        trains = runs[key]
        assert trains.outcome == "PASS", (key, trains.signature)
        assert trains.training["trains"] is True and trains.training["steps"] == 50
        assert trains.training["compared_steps"] == 20
        assert trains.training["deviation_D"] < 0.10 and trains.training["deviation_G"] < 0.10  # measured: <= 3.9 %
        assert trains.training["changed_G"] and trains.training["changed_D"]
    for key in (("0.16.4", "control"), ("0.19.8", "none")):
        record = runs[key]
        assert record.outcome == "OTHER_FAILURE" and record.known_signature == "does-not-train", key
        assert record.training["trains"] is False and record.training["deviation_D"] > 0.5, key  # measured: >= 107 %
        assert record.failing_step == "after-steps" and len(record.steps) == 50, key  # every step ran


LIGHTNING_TESTS = ROOT / "repros" / "fixes" / "lightning-tests" / "test_deepspeed_several_backward.py"
SEVERAL = ROOT / "repros" / "fixes" / "lightning-several-backward.diff"
CLIPPING_TEST = "test_deepspeed_clips_gradients_only_when_the_config_asks"


def test_the_lightning_patch_makes_the_reports_code_train_and_passes_its_lightning_style_tests(
    tmp_path: Path,
    envs_dir: Path,  # noqa: F811
) -> None:
    """Issue #17, item 2: under repros/fixes/lightning-several-backward.diff the report's code, unchanged (no fix
    flag), trains where it silently trained D on one loss (0.18.3); and the patch's tests, written for Lightning's
    test suite, fail without it (0.17.6: the second backward raises; 0.18.3: the step lost a backward) and pass with
    it, run by the harness's --pytest through the CPU shim; its clipping test fails where DeepSpeed clips to 1.0 by
    default (0.19.8; from 0.19.3) and passes before that and under the patch."""
    out = tmp_path / "out"
    _harness(
        "triage", GAN, *CPU, "--deepspeed", "0.18.3", "--fix-patch", f"several={SEVERAL}",
        "--", *TRAIN, "--check-training", envs=envs_dir, out=out,
    )  # fmt: skip
    _harness(
        "triage", "--pytest", str(LIGHTNING_TESTS), *CPU, "--deepspeed", "0.17.6,0.18.3",
        "--fix-patch", f"several={SEVERAL}", envs=envs_dir, out=out,
    )  # fmt: skip
    _harness(
        "triage", "--pytest", f"{LIGHTNING_TESTS}::{CLIPPING_TEST}", *CPU, "--deepspeed", "0.18.3,0.19.8",
        "--fix-patch", f"several={SEVERAL}", envs=envs_dir, out=out,
    )  # fmt: skip
    runs = {(r.repro, r.versions["deepspeed"], r.fix): r for r in _records(out)}
    gan = {k[1:]: r for k, r in runs.items() if not k[0].startswith("pytest-")}
    assert gan[("0.18.3", "none")].known_signature == "does-not-train"  # measured: D 62 %, G 76 %
    patched = gan[("0.18.3", "several")]
    assert patched.outcome == "PASS" and patched.training["trains"] is True, patched.signature
    assert patched.training["deviation_D"] < 0.10 and patched.training["deviation_G"] < 0.10  # measured: 1.4 %, 1.5 %
    tests = {k[1:]: r for k, r in runs.items() if k[0] == f"pytest-{LIGHTNING_TESTS.stem}"}
    assert tests[("0.17.6", "none")].known_signature == "zero-epilogue-none-iterable"
    assert tests[("0.18.3", "none")].outcome == "OTHER_FAILURE"  # the accumulate test: the step lost a backward
    assert "AssertionError" in str(tests[("0.18.3", "none")].signature)
    for release in ("0.17.6", "0.18.3"):
        assert tests[(release, "several")].outcome == "PASS", (release, tests[(release, "several")].signature)
    clipping = {
        k[1:]: r for k, r in runs.items() if k[0].startswith("pytest-") and k[0] != f"pytest-{LIGHTNING_TESTS.stem}"
    }
    assert clipping[("0.18.3", "none")].outcome == "PASS"  # DeepSpeed's default was 0.0, no clipping
    assert clipping[("0.19.8", "none")].outcome == "OTHER_FAILURE"  # 1.0 from 0.19.3 (DeepSpeed PR 8068)
    assert "AssertionError" in str(clipping[("0.19.8", "none")].signature)
    for release in ("0.18.3", "0.19.8"):
        assert clipping[(release, "several")].outcome == "PASS", (release, clipping[(release, "several")].signature)
