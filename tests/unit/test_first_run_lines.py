"""A newcomer's first run says why it waits: a script that only imports DeepSpeed waits for its CPU comm op."""

from __future__ import annotations

import time

from reprobisect.run import matrix_build as prepare
from reprobisect.run.op_prebuild import SHM_OP
from reprobisect.util.console import heartbeat


def test_the_first_heartbeat_of_an_op_build_says_why_and_later_ones_do_not() -> None:
    lines: list[str] = []
    echo = prepare._first_says(lines.append, prepare._why_ops((SHM_OP,)))
    with heartbeat(echo, f"building ops {SHM_OP} for cell c", every=0.01):
        while len(lines) < 4:
            time.sleep(0.005)
    assert lines[0].startswith(f"  … building ops {SHM_OP} for cell c")
    assert "loads its comm op when a run starts torch.distributed" in lines[1] and "built once" in lines[1]
    assert not any("torch.distributed" in line for line in lines[2:])


def test_an_op_the_script_names_is_said_as_such() -> None:
    assert prepare._why_ops(("fused_adam",)).startswith("the script names fused_adam: built once")
    both = prepare._why_ops(("fused_adam", SHM_OP))
    assert "comm op" in both and "the script names fused_adam" in both
