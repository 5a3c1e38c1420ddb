from __future__ import annotations

import signal

from reprobisect.model.classify import classify, find_known, known_signatures
from reprobisect.model.outcome import Outcome
from reprobisect.model.signature import Signature

GAN = """Traceback (most recent call last):
  File "/v/site-packages/deepspeed/runtime/zero/stage_1_and_2.py", line 949, in reduce_independent_p_g_buckets_and_remove_grads
    new_grad_tensor = self.ipg_buffer[self.ipg_index].narrow(0, self.elements_in_ipg_bucket, param.numel())
TypeError: 'NoneType' object is not subscriptable
"""
LIGHTNING_TOO_OLD_DS = """Traceback (most recent call last):
  File "/v/site-packages/lightning/fabric/strategies/deepspeed.py", line 250, in __init__
    raise ImportError(
ImportError: PyTorch >= 2.6 requires DeepSpeed >= 0.16.0. Please upgrade DeepSpeed.
"""
ARCH_LIST = """Traceback (most recent call last):
  File "/v/site-packages/deepspeed/ops/op_builder/builder.py", line 600, in compute_capability_args
    num = cc[0] + cc[1].split('+')[0]
ValueError: invalid literal for int() with base 10: '0a'
"""


def test_expected_signature_is_reproduced() -> None:
    result = classify(exit_code=1, timed_out=False, log=GAN, expected="zero-ipg-buffer-none")
    assert result.outcome is Outcome.REPRODUCED
    assert result.known is not None
    assert "Lightning-AI/pytorch-lightning#17856" in result.known.upstream


def test_expected_by_signature_id() -> None:
    sig = classify(exit_code=1, timed_out=False, log=GAN, expected=None).signature
    assert sig is not None
    assert classify(exit_code=1, timed_out=False, log=GAN, expected=sig.id).outcome is Outcome.REPRODUCED


def test_a_known_bug_that_is_not_the_expected_one_is_other_failure() -> None:
    assert (
        classify(exit_code=1, timed_out=False, log=GAN, expected="zero3-allgather-dtype").outcome
        is Outcome.OTHER_FAILURE
    )


def test_environment_failures_are_env_error() -> None:
    for log in (LIGHTNING_TOO_OLD_DS, ARCH_LIST):
        assert (
            classify(exit_code=1, timed_out=False, log=log, expected="zero-ipg-buffer-none").outcome
            is Outcome.ENV_ERROR
        )


def test_pass_timeout_crash() -> None:
    assert classify(exit_code=0, timed_out=False, log="", expected=None).outcome is Outcome.PASS
    assert classify(exit_code=None, timed_out=True, log="", expected=None).outcome is Outcome.TIMEOUT
    crash = classify(exit_code=-signal.SIGSEGV, timed_out=False, log="Fatal Python error", expected=None)
    assert crash.outcome is Outcome.CRASH
    assert crash.signature is not None
    assert crash.signature.message == "SIGSEGV"
    # a shell's way of saying "killed by SIGKILL"
    assert classify(exit_code=137, timed_out=False, log="", expected=None).outcome is Outcome.CRASH


def test_a_handled_traceback_then_another_exit_code_is_that_exit_code() -> None:
    """Python exits 1 after an uncaught exception: with any other status the traceback did not end the run."""
    result = classify(exit_code=2, timed_out=False, log=GAN + "giving up\n", expected="zero-ipg-buffer-none")
    assert result.outcome is Outcome.OTHER_FAILURE
    assert result.signature == Signature(exception="Exit", message="status N: giving up")
    assert result.context is not None and result.context.exception == "TypeError"
    uncaught = classify(exit_code=1, timed_out=False, log=GAN, expected="zero-ipg-buffer-none")
    assert uncaught.outcome is Outcome.REPRODUCED and uncaught.context is None


def test_a_signal_keeps_a_handled_traceback_as_context() -> None:
    crash = classify(exit_code=-signal.SIGSEGV, timed_out=False, log=GAN, expected="zero-ipg-buffer-none")
    assert crash.outcome is Outcome.CRASH
    assert crash.signature is not None and crash.signature.message == "SIGSEGV"
    assert crash.context is not None and crash.context.exception == "TypeError"


def test_exit_without_traceback_is_other_failure_with_the_last_line() -> None:
    result = classify(exit_code=3, timed_out=False, log="loading\nfatal: gave up after 12 tries\n", expected=None)
    assert result.outcome is Outcome.OTHER_FAILURE
    assert result.signature == Signature(exception="Exit", message="status N: fatal: gave up after N tries")


def test_known_table_loads_and_every_entry_is_reachable() -> None:
    names = [k.name for k in known_signatures()]
    assert len(names) == len(set(names))
    assert find_known(Signature(exception="ModuleNotFoundError", message="No module named 'x'")) is not None


def _import_failure(line: str) -> str:
    return f'Traceback (most recent call last):\n  File "/v/site-packages/deepspeed/__init__.py", line 9, in <module>\n{line}\n'


def test_a_name_one_release_lacks_that_another_asks_for_is_a_failure_a_missing_module_no_verdict() -> None:
    """DeepSpeed < 0.14.4 on torch >= 2.4 (DeepSpeed #5603): the package imports and lacks what another asks of
    it, a break between the installed releases and the very bug a grid of two packages looks for. A module that is
    not there, or a library that does not load, stays a cell without a verdict."""
    gone = _import_failure(
        "ImportError: cannot import name '_get_socket_with_port' from 'torch.distributed.elastic.agent.server.api'"
    )
    assert classify(exit_code=1, timed_out=False, log=gone, expected=None).outcome is Outcome.OTHER_FAILURE
    for line in (
        "ModuleNotFoundError: No module named 'pkg_resources'",
        "ImportError: libcudart.so.12: cannot open shared object file: No such file or directory",
    ):
        result = classify(exit_code=1, timed_out=False, log=_import_failure(line), expected=None)
        assert (
            result.outcome is Outcome.ENV_ERROR and result.known is not None and result.known.name == "missing-module"
        )
