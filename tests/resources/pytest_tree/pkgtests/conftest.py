import pytest


@pytest.fixture
def answer():
    return 42
