"""A search that starts from a sweep's answer (a commit search between two releases) builds its cells as the
sweep's were: the other packages, and the Python and torch where they were pinned. The Lightning entries of the
corpus run on Python 3.11.2 with torch 2.13.0; their commit cells were once built on the base interpreter with its
own torch, where no old commit of Lightning builds."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from reprobisect.bisect.answer import held_pins


def test_a_pinned_python_and_torch_are_held_the_varied_package_is_not() -> None:
    cell = {
        "packages": {"deepspeed": "0.18.6", "lightning": "2.1.4", "setuptools": "80.9.0"},
        "python": "3.11.2",
        "python_source": "3.11.2",
        "torch": "2.13.0",
        "torch_source": "pinned",
    }
    assert held_pins(cell, "lightning") == {
        "deepspeed": "0.18.6",
        "setuptools": "80.9.0",
        "python": "3.11.2",
        "torch": "2.13.0",
    }


def test_the_base_interpreter_and_its_torch_are_not_pins() -> None:
    cell = {
        "packages": {"deepspeed": "0.16.4"},
        "python": "3.11.7",
        "python_source": "system",
        "torch": "2.13.0+cpu",
        "torch_source": "system",
    }
    assert held_pins(cell, "deepspeed") == {}
    assert held_pins({"packages": {"lightning": "2.6.6"}}, "deepspeed") == {"lightning": "2.6.6"}  # older records


@given(
    st.sampled_from(["/tmp/evil/python3", "--version", "3.11.2\n", "../bin/python", "", "system", "3"]),
    st.sampled_from(["2.13.0 --index-url http://x", "-e .", "latest", "", "2.13.0\n", "../torch.whl"]),
)
def test_a_record_s_hostile_python_or_torch_is_never_held(python: str, torch: str) -> None:
    """A planted record's Python path would be run as the search's interpreter: only versions are held."""
    cell = {"packages": {}, "python_source": python, "torch_source": "pinned", "torch": torch}
    assert held_pins(cell, "lightning") == {}


@given(st.dictionaries(st.text(min_size=1, max_size=8), st.text(max_size=8), max_size=4), st.text(max_size=8))
def test_any_cell_gives_string_pins_without_the_axis(packages: dict[str, str], axis: str) -> None:
    pins = held_pins(
        {"packages": packages, "python_source": "3.12.1", "torch_source": "pinned", "torch": "2.4.0"}, axis
    )
    assert axis not in pins and all(isinstance(k, str) and isinstance(v, str) for k, v in pins.items())
