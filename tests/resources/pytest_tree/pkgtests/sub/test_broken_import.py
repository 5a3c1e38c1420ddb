"""A test module whose import a release broke: collecting it fails, and that is the run's failure."""

from deepspeed.no_such_module import anything  # noqa: F401


def test_never_collected():
    pass
