"""A minimized script keeps the lines that set its environment: the harness's runs set the launcher's variables
too, so inside the harness their removal went unseen, and ``python minimized.py`` then failed on a plain machine."""

from __future__ import annotations

import textwrap

from hypothesis import given
from hypothesis import strategies as st

from reprobisect.minimize.settings import lost_sites, required_sites, sites
from reprobisect.minimize.slicing import failure_slice
from reprobisect.minimize.static import why_not_runnable

PREAMBLE = textwrap.dedent(
    """\
    import os
    import socket
    from os import environ

    def setup_distributed():
        for name, value in {"RANK": "0", "WORLD_SIZE": "1", "MASTER_ADDR": "127.0.0.1"}.items():
            os.environ.setdefault(name, value)
        if "MASTER_PORT" not in os.environ:
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                os.environ["MASTER_PORT"] = str(s.getsockname()[1])

    def never_called():
        os.environ["UNUSED"] = "1"

    os.environ.setdefault("DS_ACCELERATOR", "cpu")
    environ.update({"LOCAL_RANK": "0"}, LOCAL_WORLD_SIZE="1")
    os.putenv("OMP_NUM_THREADS", "1")
    setup_distributed()
    x = os.environ["RANK"]
    assert x == "1", "the failure"
    """
)


def test_every_way_of_setting_the_environment_is_a_site() -> None:
    found = {site.line: site for site in sites(PREAMBLE)}
    assert set(found) == {7, 11, 14, 16, 17, 18}  # the loop's setdefault, MASTER_PORT, UNUSED, and the three calls
    assert found[7].names == () and found[7].code == "os.environ.setdefault(name, value)"  # a key from a loop
    assert found[11].names == ("MASTER_PORT",) and found[16].names == ("DS_ACCELERATOR",)
    assert found[17].names == ("LOCAL_RANK", "LOCAL_WORLD_SIZE") and found[18].names == ("OMP_NUM_THREADS",)
    assert 20 not in found  # reading the environment sets nothing


def test_only_the_sites_that_ran_are_required() -> None:
    ran = set(range(1, 22)) - {14}  # never_called's body did not run
    required = required_sites(PREAMBLE, ran)
    assert "os.environ['UNUSED'] = '1'" not in required and len(required) == 5
    assert len(required_sites(PREAMBLE, None)) == 6  # untraced: all of them


def test_a_site_the_harness_s_own_variable_skipped_is_required() -> None:
    """Inside the harness MASTER_PORT is set, so `if "MASTER_PORT" not in os.environ:` never ran its body; as plain
    python it must: the site under an `if` that ran and reads the environment is required all the same."""
    ran = set(range(1, 22)) - {9, 10, 11, 14}  # the if's test (line 8) ran, its body did not
    required = required_sites(PREAMBLE, ran)
    assert "os.environ['MASTER_PORT'] = str(s.getsockname()[1])" in required
    assert "os.environ['UNUSED'] = '1'" not in required  # never_called is no environment test
    assert "os.environ['MASTER_PORT'] = str(s.getsockname()[1])" not in required_sites(PREAMBLE, ran - {8})


def test_a_candidate_that_drops_a_site_is_refused_unrun_and_one_that_moves_it_is_not() -> None:
    required = required_sites(PREAMBLE, None)
    dropped = PREAMBLE.replace('    os.environ.setdefault("DS_ACCELERATOR", "cpu")\n', "").replace(
        'os.environ.setdefault("DS_ACCELERATOR", "cpu")\n', ""
    )
    why = why_not_runnable(dropped, frozenset(), required)
    assert why is not None and "DS_ACCELERATOR" in why and "plain python" in why
    no_loop = PREAMBLE.replace("        os.environ.setdefault(name, value)\n", "        pass\n")
    assert lost_sites(no_loop, required) == ["os.environ.setdefault(name, value)"]
    # setup_distributed inlined: the same code at another place is the same site
    inlined = PREAMBLE.replace(
        "setup_distributed()\n", "for name, value in {}.items():\n    os.environ.setdefault(name, value)\n"
    )
    assert lost_sites(inlined, required) == []
    assert why_not_runnable(PREAMBLE, frozenset(), required) is None
    assert why_not_runnable(dropped, frozenset(), {}) is None  # without sites, as before


def test_the_failures_slice_keeps_the_lines_that_set_the_environment() -> None:
    failing = [21]
    required = {k: v for k, v in required_sites(PREAMBLE, None).items() if "UNUSED" not in k}
    bare = failure_slice(PREAMBLE, failing)
    assert bare is not None and lost_sites(bare, required)  # what the slice alone drops: setup_distributed's
    kept = failure_slice(PREAMBLE, [*failing, *(s.line for s in sites(PREAMBLE) if s.code in required)])
    assert kept is not None and not lost_sites(kept, required)


@given(st.text(max_size=200))
def test_any_text_gives_sites_without_raising(text: str) -> None:
    assert isinstance(sites(text), tuple)
    assert isinstance(lost_sites(text, {"os.environ['A'] = '1'": 1}), list)
