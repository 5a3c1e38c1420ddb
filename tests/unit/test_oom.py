"""Whether the OOM killer ended a run (issue #39): the kernel's counters and log decide, never a guess."""

from __future__ import annotations

from pathlib import Path

from reprobisect.model.classify import classify
from reprobisect.run.oom import OomWatch, kill_cause, memory_cgroup_counter, oom_killed_pids


def test_the_cgroup_counter_is_found_on_v1_v2_and_hybrid_hosts(tmp_path: Path) -> None:
    v1 = tmp_path / "memory" / "jobs" / "42"
    v1.mkdir(parents=True)
    (v1 / "memory.oom_control").write_text("oom_kill_disable 0\nunder_oom 0\noom_kill 3\n")
    assert memory_cgroup_counter("4:memory:/jobs/42\n0::/\n", tmp_path) == (v1 / "memory.oom_control", "oom_kill")
    v2 = tmp_path / "user.slice" / "run.scope"
    v2.mkdir(parents=True)
    (v2 / "memory.events").write_text("low 0\nhigh 0\nmax 0\noom 1\noom_kill 1\n")
    assert memory_cgroup_counter("0::/user.slice/run.scope\n", tmp_path) == (v2 / "memory.events", "oom_kill")
    assert memory_cgroup_counter("0::/nowhere\n1:cpu:/\n", tmp_path) is None


def test_the_kernel_logs_oom_kills_are_read_by_pid() -> None:
    records = [
        "Out of memory: Killed process 4242 (python3) total-vm:123kB, anon-rss:99kB",
        "Memory cgroup out of memory: Killed process 17 (python)",
        "oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),task_memcg=/x,task=python3,pid=99,uid=0",
        "python3 invoked oom-killer: gfp_mask=0x140cca(GFP_HIGHUSER_MOVABLE|__GFP_COMP), order=0",
        "Killed process tree of a story 5",  # no pid where one must be
    ]
    assert oom_killed_pids(records) == {4242, 17, 99}


def test_each_piece_of_evidence_gives_its_verdict() -> None:
    by_log = kill_cause(counter="/g", rise=1, killed={7}, run_pids={7, 8})
    assert by_log.verdict == "oom" and "process 7" in by_log.evidence
    by_counter = kill_cause(counter="/g", rise=1, killed=None, run_pids={7})
    assert by_counter.verdict == "oom" and by_counter.evidence == "memory cgroup /g: oom_kill +1 during the run"
    shared = kill_cause(counter="/g", rise=1, killed={3}, run_pids={7})
    assert shared.verdict == "oom" and "may have been another process" in shared.evidence
    unchanged = kill_cause(counter="/g", rise=0, killed=None, run_pids={7})
    assert unchanged.verdict == "not-oom" and unchanged.evidence == "memory cgroup /g: oom_kill unchanged"
    log_only = kill_cause(counter=None, rise=None, killed=set(), run_pids={7})
    assert log_only.verdict == "not-oom" and log_only.evidence == "the kernel log names no OOM kill during the run"
    both = kill_cause(counter="/g", rise=0, killed=set(), run_pids={7})
    assert both.verdict == "not-oom" and both.evidence.startswith("memory cgroup /g: oom_kill unchanged; the kernel")
    # a kill of a process the harness never saw (short-lived, or moved out of the cgroup) is never "not the OOM"
    unseen = kill_cause(counter="/g", rise=0, killed={3}, run_pids={7})
    assert unseen.verdict == "unknown" and "process 3" in unseen.evidence
    blind = kill_cause(counter=None, rise=None, killed=None, run_pids={7})
    assert blind.verdict == "unknown" and "no memory cgroup counter or kernel log readable" in blind.evidence


def test_a_sigkill_says_what_the_kernel_said_never_often() -> None:
    def message(oom: bool | None) -> str:
        crash = classify(exit_code=-9, timed_out=False, log="", expected=None, oom_killed=oom)
        assert crash.signature is not None
        return crash.signature.message

    assert message(True) == "SIGKILL (the out-of-memory killer)"
    assert message(False) == "SIGKILL (not the out-of-memory killer: sent from inside the run or from outside)"
    assert message(None) == "SIGKILL (cannot tell whether the out-of-memory killer sent it)"
    shell = classify(exit_code=137, timed_out=False, log="", expected=None, oom_killed=False).signature
    assert shell is not None and shell.message.startswith("SIGKILL (not the")


def test_a_watch_over_a_run_without_kills_says_not_oom_or_cannot_tell() -> None:
    watch = OomWatch()
    cause = watch.finish({1})
    assert cause.verdict in ("not-oom", "unknown")  # nothing was killed here; "unknown" where nothing is readable
    watch.close()
