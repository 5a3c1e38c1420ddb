from __future__ import annotations

from pathlib import Path

import pytest

from reprobisect.model.signature import Signature, frame_name, last_traceback, normalize_message, signature_from_log

# Tracebacks as reporters pasted them into the two upstream issues (each file names its issue).
SEEDS = Path(__file__).parents[1] / "resources" / "seeds"


@pytest.mark.parametrize(
    ("raw", "normalized"),
    [
        ("invalid literal for int() with base 10: '0a'", "invalid literal for int() with base N: '0a'"),
        ("PyTorch >= 2.6 requires DeepSpeed >= 0.16.0", "PyTorch >= N requires DeepSpeed >= N"),
        ("object at 0x7f3a2b1c0d90 in /home/u/venv/lib/x.py", "object at 0x? in <path>"),
        ("Tried to allocate 20.00 MiB (GPU 0; 79.15 GiB total)", "Tried to allocate N MiB (GPU N; N GiB total)"),
        # identifiers that contain digits are not numbers
        ("fp16 and bf16 on ZeRO-3 with torch.Size([64, 3])", "fp16 and bf16 on ZeRO-N with torch.Size([N, N])"),
        # a cell id's versions end at "_": each is N whole (the H200 map had one PatchError id per release)
        (
            "does not apply to cell torch-2.11.0_deepspeed-0.17.2_lightning-system",
            "does not apply to cell torch-N_deepspeed-N_lightning-system",
        ),
        ("param_1 and layer_12_weight", "param_1 and layer_12_weight"),
    ],
)
def test_normalize_message(raw: str, normalized: str) -> None:
    assert normalize_message(raw) == normalized


@pytest.mark.parametrize(
    ("path", "function", "expected"),
    [
        (
            "/v/lib/python3.11/site-packages/deepspeed/runtime/zero/stage_1_and_2.py",
            "f",
            "deepspeed.runtime.zero.stage_1_and_2:f",
        ),
        ("/usr/lib/python3/dist-packages/torch/autograd/__init__.py", "backward", "torch.autograd:backward"),
        # a source checkout: the last path part that is a library's top-level package
        ("/home/me/deepspeed/DeepSpeed/deepspeed/runtime/engine.py", "step", "deepspeed.runtime.engine:step"),
        ("/v/site-packages/lightning/fabric/fabric.py", "backward", "lightning.fabric.fabric:backward"),
        ("/work/repro.py", "main", None),
        ("/v/site-packages/numpy/core/x.py", "f", None),
        ("<frozen runpy>", "_run_code", None),
    ],
)
def test_frame_name(path: str, function: str, expected: str | None) -> None:
    assert frame_name(path, function) == expected


CHAINED = """\
Traceback (most recent call last):
  File "/v/site-packages/torch/nn/modules/module.py", line 10, in forward
    raise ValueError("first")
ValueError: first

During handling of the above exception, another exception occurred:

Traceback (most recent call last):
  File "/work/repro.py", line 3, in <module>
    main()
  File "/v/site-packages/deepspeed/runtime/engine.py", line 1976, in backward
    self.optimizer.backward(loss)
    ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
  File "/v/site-packages/deepspeed/runtime/zero/stage_1_and_2.py", line 2056, in backward
    x = self.ipg_buffer[self.ipg_index]
TypeError: 'NoneType' object is not subscriptable
"""


def test_last_traceback_takes_the_one_that_ended_the_process() -> None:
    parsed = last_traceback("noise before\n" + CHAINED + "[rank0]: trailing log line\n")
    assert parsed is not None
    assert parsed.exception == "TypeError"
    assert [f for _, f in parsed.frames] == ["<module>", "backward", "backward"]


def test_signature_keeps_only_library_frames_and_is_stable_across_install_paths() -> None:
    sig = signature_from_log(CHAINED)
    moved = signature_from_log(
        CHAINED.replace("/v/site-packages", "/other/venv/lib/python3.12/site-packages").replace(
            "line 2056", "line 2101"
        )
    )
    assert sig is not None
    assert sig == moved
    assert sig.id == moved.id
    assert sig.frames == ("deepspeed.runtime.engine:backward", "deepspeed.runtime.zero.stage_1_and_2:backward")
    assert (
        sig.text == "TypeError: 'NoneType' object is not subscriptable @ deepspeed.runtime.zero.stage_1_and_2:backward"
    )


def test_different_message_gives_a_different_id() -> None:
    a = Signature(exception="TypeError", message="x", frames=("deepspeed.a:f",))
    b = Signature(exception="TypeError", message="y", frames=("deepspeed.a:f",))
    assert a.id != b.id
    assert Signature.from_dict(a.to_dict()) == a


def test_no_traceback_gives_none() -> None:
    assert signature_from_log("all fine\n@@repro {}\n") is None


@pytest.mark.parametrize(
    ("seed", "text"),
    [
        (
            "gan-fabric-zero1.md",
            "TypeError: 'NoneType' object is not subscriptable @ "
            "deepspeed.runtime.zero.stage_1_and_2:reduce_independent_p_g_buckets_and_remove_grads",
        ),
        (
            "boring-trainer-zero3-fp16.md",
            "RuntimeError: output tensor must have the same type as input tensor @ "
            "torch.distributed.distributed_c10d:_all_gather_base",
        ),
    ],
)
def test_seed_reports_tracebacks_as_pasted_into_issues(seed: str, text: str) -> None:
    """The GAN report lost its indentation when pasted; the parser must still read it."""
    sig = signature_from_log((SEEDS / seed).read_text(encoding="utf-8"))
    assert sig is not None
    assert sig.text == text
