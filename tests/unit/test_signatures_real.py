"""Signatures of tracebacks captured from real DeepSpeed releases (tests/resources/tracebacks/).

Fixture names are ``<script>__ds-<version>__<fix or label>.log``; the Fabric script ran through the CPU
shim, the deepspeed script is the pure-DeepSpeed analogue.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from reprobisect.model.classify import classify, find_known
from reprobisect.model.signature import signature_from_log
from tests.conftest import TRACEBACKS

FIXTURES = sorted(TRACEBACKS.glob("*.log"))
REPORT_ID = "36b244a365"  # the signature of the traceback in the GAN report itself


def _sig(name: str):
    sig = signature_from_log((TRACEBACKS / name).read_text())
    assert sig is not None, name
    return sig


@pytest.mark.parametrize("path", FIXTURES, ids=[p.stem for p in FIXTURES])
def test_every_captured_traceback_has_a_signature_without_paths_or_line_numbers(path: Path) -> None:
    sig = signature_from_log(path.read_text())
    assert sig is not None
    assert sig.frames, "at least one frame inside torch/deepspeed/lightning"
    for frame in sig.frames:
        assert "/" not in frame
        assert frame.split(":")[0].split(".")[0] in {"torch", "deepspeed", "lightning"}
    assert "site-packages" not in sig.text


def test_the_report_signature_on_0_16_4_in_both_forms_fp32_bf16_and_full_size() -> None:
    for name in (
        "gan_deepspeed_zero1__ds-0.16.4__nofix.log",
        "gan_deepspeed_zero1__ds-0.16.4__nofix-fp32.log",
        "gan_fabric_zero1__ds-0.16.4__nofix.log",
        "gan_fabric_zero1__ds-0.16.4__nofix-fullsize.log",
    ):
        assert _sig(name).id == REPORT_ID, name


@pytest.mark.parametrize(
    ("version", "known"),
    [
        ("0.16.4", "zero-ipg-buffer-none"),
        ("0.17.0", "zero-param-already-reduced"),
        ("0.18.2", "zero-epilogue-none-iterable"),
        ("0.19.8", "buffers-fp32-batchnorm"),
    ],
)
def test_the_symptom_drifts_but_both_forms_agree_per_release(version: str, known: str | None) -> None:
    fabric = _sig(f"gan_fabric_zero1__ds-{version}__nofix.log")
    pure = _sig(f"gan_deepspeed_zero1__ds-{version}__nofix.log")
    assert fabric.id == pure.id
    match = find_known(pure)
    assert (match.name if match else None) == known


def test_drift_ids_are_distinct() -> None:
    ids = {_sig(f"gan_deepspeed_zero1__ds-{v}__nofix.log").id for v in ("0.16.4", "0.17.0", "0.18.2", "0.19.8")}
    assert len(ids) == 4


@pytest.mark.parametrize(
    ("name", "outcome"),
    [
        ("gan_fabric_zero1__ds-0.16.4__nofix.log", "REPRODUCED"),
        ("gan_fabric_zero1__ds-0.17.0__nofix.log", "OTHER_FAILURE"),
        ("gan_fabric_zero1__ds-0.16.4__noshim.log", "ENV_ERROR"),  # the CUDA-only strategy on a CPU
        ("gan_fabric_zero1__ds-0.16.4__nofix-16-mixed.log", "ENV_ERROR"),  # fp16 refused on this CPU
        ("boring_trainer_zero3__ds-0.16.4__noshim.log", "ENV_ERROR"),
    ],
)
def test_classification_of_real_failures(name: str, outcome: str) -> None:
    log = (TRACEBACKS / name).read_text()
    assert classify(exit_code=1, timed_out=False, log=log, expected="zero-ipg-buffer-none").outcome.value == outcome


def test_zero3_mixed_dtype_allgather_on_0_19_2_is_the_zero3_report_bug() -> None:
    log = (TRACEBACKS / "boring_deepspeed_zero3__ds-0.19.2__mixed-dtype-params.log").read_text()
    result = classify(exit_code=1, timed_out=False, log=log, expected="zero3-allgather-dtype")
    assert result.outcome.value == "REPRODUCED"


def test_a_port_taken_by_another_run_is_no_verdict() -> None:
    """On the H200, four Lightning tests at once: one lost its rendezvous port to another (EADDRINUSE)."""
    log = (TRACEBACKS / "lightning_test_inference_bf16__ds-0.17.0__h200__port-in-use.log").read_text()
    result = classify(exit_code=1, timed_out=False, log=log, expected=None)
    assert result.outcome.value == "ENV_ERROR" and result.known is not None and result.known.name == "port-in-use"


def test_a_lightning_test_run_by_pytest_is_signed_with_its_own_exception() -> None:
    """Lightning's own Fabric test on DeepSpeed 0.19.8 (H200, --pytest): DeepSpeed's assertion, in its own frame."""
    log = (TRACEBACKS / "lightning_fabric_activation_checkpointing__ds-0.19.8__h200.log").read_text()
    result = classify(exit_code=1, timed_out=False, log=log, expected=None)
    assert result.outcome.value == "OTHER_FAILURE" and result.signature is not None
    assert result.signature.exception == "AssertionError"
    assert result.signature.message.startswith("Must specify the number of layers with contiguous memory checkpointing")
    assert "deepspeed.runtime.activation_checkpointing.checkpointing:configure" in result.signature.frames


@pytest.mark.parametrize(
    ("name", "known"),
    [
        # the GAN's zero-stage-0 fix on 0.18.3-0.19.1: D's stage-0 engine refuses G's backward through it
        ("gan_fabric_zero1__ds-0.18.3__zero-stage-0-16-mixed__h200.log", "foreign-backward-zero0"),
        # the GAN's freeze-d fix in bf16 on 0.18.5-0.19.1: D's backward epilogue meets its unallocated ipg bucket
        ("gan_fabric_zero1__ds-0.18.5__freeze-d-bf16__h200.log", "zero-ipg-buffer-empty"),
    ],
)
def test_the_h200_maps_failures_of_the_gan_fixes_have_names(name: str, known: str) -> None:
    """The two failures call 7 of the H200 map left unnamed: bugs (a verdict), not the report's own signature."""
    result = classify(
        exit_code=1, timed_out=False, log=(TRACEBACKS / name).read_text(), expected="zero-ipg-buffer-none"
    )
    assert result.outcome.value == "OTHER_FAILURE"
    assert result.known is not None and result.known.name == known and result.known.kind == "bug"


def test_an_index_error_elsewhere_is_not_the_ipg_bucket() -> None:
    """zero-ipg-buffer-empty needs DeepSpeed's reduce_ipg_grads frame: a user's own IndexError stays unnamed."""
    log = (
        "Traceback (most recent call last):\n"
        '  File "/x/site-packages/lightning/fabric/fabric.py", line 1, in backward\n'
        "    x = y[3]\n"
        "IndexError: list index out of range\n"
    )
    result = classify(exit_code=1, timed_out=False, log=log, expected=None)
    assert result.outcome.value == "OTHER_FAILURE" and result.known is None
