"""A package's own tests, as --pytest runs them (issue #14): one passes, one fails until a fix sets THINGS_FIXED
(the failing test's assertion is the run's signature), one is skipped unless RUN_SLOW=1, one warns (a tree's
tests run with its own pytest settings, not those of a checkout above it), one imports the real deepspeed."""

import os
import warnings

import pytest


def test_passes(answer):
    assert answer == 42


def test_warns():
    warnings.warn("a deprecation the package's own settings tolerate", DeprecationWarning, stacklevel=1)


def test_fails_unless_fixed(answer):
    import deepspeed

    assert os.environ.get("THINGS_FIXED") == "1", f"deepspeed {deepspeed.__version__} broke things"


@pytest.mark.skipif(os.environ.get("RUN_SLOW") != "1", reason="slow")
def test_skipped():
    pass
