"""A real one-node Slurm cluster for the tests: munged, MariaDB, slurmdbd, slurmctld and slurmd, started as root
from Debian's ``slurm-wlm``, ``slurmdbd``, ``munge`` and ``mariadb-server`` (``.ci/run`` installs them).

Everything lives in one folder (configs, state, spool, logs, the database) with ports and sockets of its own, so a
Slurm the machine may already run is never touched; ``SLURM_CONF`` points the clients (``sbatch``, ``sacct``,
``scancel``, submitit) at it. ``sacct`` is why the database is here: Slurm 22.05 answers it only from slurmdbd,
and submitit learns every job's end (a cancelled job has no result file) from ``sacct``.

``start`` raises ``ClusterUnavailable`` with the reason when a piece is missing or a daemon does not come up; the
fixture turns that into a skip that names it, never a silent pass.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

__all__ = ["Cluster", "ClusterUnavailable", "running_cluster"]

DAEMONS = ("munged", "mariadbd", "mariadb-install-db", "slurmdbd", "slurmctld", "slurmd", "sbatch", "sacct", "scancel")
PACKAGES = "slurm-wlm slurmdbd munge mariadb-server"


class ClusterUnavailable(RuntimeError):
    """The cluster cannot run here; the message says why (and what to install)."""


@dataclasses.dataclass(frozen=True)
class Cluster:
    """A started cluster: its folder, its ``slurm.conf`` and the environment its clients need."""

    root: Path
    conf: Path
    node: str
    cpus: int

    @property
    def env(self) -> dict[str, str]:
        """The variables a client (a harness under test, a ``squeue``) needs to talk to this cluster."""
        return {"SLURM_CONF": str(self.conf)}

    def run(self, *argv: str, check: bool = True) -> str:
        """A Slurm client command against this cluster; its stdout."""
        done = subprocess.run(
            argv, env={**os.environ, **self.env}, capture_output=True, text=True, timeout=60, check=False
        )
        if check and done.returncode != 0:
            msg = f"{' '.join(argv)}: exit {done.returncode}: {done.stderr.strip()}"
            raise RuntimeError(msg)
        return done.stdout


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait(what: str, probe: callable, log: Path, seconds: float = 60) -> None:  # type: ignore[valid-type]
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if probe():
            return
        time.sleep(0.3)
    tail = log.read_text(errors="replace")[-1500:] if log.exists() else "(no log)"
    msg = f"{what} did not come up within {seconds:.0f} s; its log ends:\n{tail}"
    raise ClusterUnavailable(msg)


def _check_host() -> None:
    missing = [name for name in DAEMONS if shutil.which(name) is None and not Path("/usr/sbin", name).exists()]
    if missing:
        msg = f"no {', '.join(missing)} on this machine (apt-get install {PACKAGES})"
        raise ClusterUnavailable(msg)
    if os.geteuid() != 0:
        msg = "the one-node Slurm cluster is started as root (its daemons switch users); run the tests as root"
        raise ClusterUnavailable(msg)


def _which(name: str) -> str:
    return shutil.which(name) or str(Path("/usr/sbin", name))


def _slurm_conf(root: Path, node: str, cpus: int, memory: int, ports: dict[str, int]) -> str:
    socket_ = root / "munge" / "munge.socket"
    return f"""\
ClusterName=reprobisect-test
SlurmctldHost={node}(127.0.0.1)
SlurmctldPort={ports["ctld"]}
SlurmdPort={ports["d"]}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={socket_}
CredType=cred/munge
StateSaveLocation={root}/state
SlurmdSpoolDir={root}/spool/%n
SlurmctldPidFile={root}/slurmctld.pid
SlurmdPidFile={root}/slurmd.pid
SlurmctldLogFile={root}/slurmctld.log
SlurmdLogFile={root}/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
SwitchType=switch/none
ReturnToService=2
SchedulerType=sched/backfill
SchedulerParameters=sched_interval=1
MinJobAge=600
KillWait=5
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=127.0.0.1
AccountingStoragePort={ports["dbd"]}
AccountingStoragePass={socket_}
JobCompType=jobcomp/none
PlugStackConfig={root}/plugstack.conf
NodeName={node} NodeAddr=127.0.0.1 CPUs={cpus} RealMemory={memory} State=UNKNOWN
PartitionName=debug Nodes={node} Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
PartitionName=other Nodes={node} Default=NO MaxTime=INFINITE State=UP
"""


def _dbd_conf(root: Path, node: str, ports: dict[str, int]) -> str:
    return f"""\
AuthType=auth/munge
AuthInfo=socket={root}/munge/munge.socket
DbdHost={node}
DbdAddr=127.0.0.1
DbdPort={ports["dbd"]}
SlurmUser=root
PidFile={root}/slurmdbd.pid
LogFile={root}/slurmdbd.log
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort={ports["db"]}
StorageUser=root
StorageLoc=slurm_acct_db
"""


def _node() -> tuple[str, int, int]:
    done = subprocess.run([_which("slurmd"), "-C"], capture_output=True, text=True, timeout=30, check=False)
    fields = dict(item.split("=", 1) for item in done.stdout.split() if "=" in item)
    if "NodeName" not in fields:
        msg = f"slurmd -C described no node: {done.stderr.strip() or done.stdout.strip()}"
        raise ClusterUnavailable(msg)
    return fields["NodeName"], int(fields.get("CPUs", "1")), max(1, int(fields.get("RealMemory", "1000")) - 512)


def _start(argv: list[str], log: Path, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    with log.open("ab") as out:
        return subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)


def _stop(processes: list[subprocess.Popen[bytes]]) -> None:
    for process in reversed(processes):
        if process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
    for process in reversed(processes):
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)


@contextlib.contextmanager
def running_cluster(root: Path) -> Iterator[Cluster]:
    """Start the cluster under ``root``, yield it, stop every daemon it started (also on an error)."""
    _check_host()
    node, cpus, memory = _node()
    for sub in ("state", "spool", "munge", "db", "run"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    ports = {"ctld": _free_port(), "d": _free_port(), "dbd": _free_port(), "db": _free_port()}
    conf = root / "slurm.conf"
    conf.write_text(_slurm_conf(root, node, cpus, memory, ports))
    (root / "plugstack.conf").write_text("")
    dbd_conf = root / "slurmdbd.conf"
    dbd_conf.write_text(_dbd_conf(root, node, ports))
    dbd_conf.chmod(0o600)  # slurmdbd refuses a config others can read
    env = {**os.environ, "SLURM_CONF": str(conf)}
    processes: list[subprocess.Popen[bytes]] = []
    try:
        key = root / "munge" / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o400)
        munge_log = root / "munged.log"
        processes.append(
            _start(
                [
                    _which("munged"),
                    "--foreground",
                    "--force",
                    f"--socket={root / 'munge' / 'munge.socket'}",
                    f"--key-file={key}",
                    f"--pid-file={root / 'munge' / 'munged.pid'}",
                    f"--seed-file={root / 'munge' / 'munged.seed'}",
                    f"--log-file={munge_log}",
                ],
                munge_log,
            )
        )
        _wait("munged", lambda: (root / "munge" / "munge.socket").exists(), munge_log)
        db_log = root / "mariadb.log"
        install = subprocess.run(
            [
                _which("mariadb-install-db"),
                f"--datadir={root / 'db'}",
                "--user=root",
                "--auth-root-authentication-method=normal",
            ],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        if install.returncode != 0:
            msg = f"mariadb-install-db failed: {install.stderr.strip()[-800:]}"
            raise ClusterUnavailable(msg)
        processes.append(
            _start(
                [
                    _which("mariadbd"),
                    "--no-defaults",
                    f"--datadir={root / 'db'}",
                    "--user=root",
                    "--bind-address=127.0.0.1",
                    f"--port={ports['db']}",
                    f"--socket={root / 'run' / 'mysqld.sock'}",
                    f"--pid-file={root / 'run' / 'mysqld.pid'}",
                    "--innodb-buffer-pool-size=64M",
                    "--innodb-lock-wait-timeout=900",
                    "--skip-log-bin",
                ],
                db_log,
            )
        )
        _wait("mariadbd", lambda: (root / "run" / "mysqld.sock").exists(), db_log)
        dbd_log = root / "slurmdbd.log"
        processes.append(_start([_which("slurmdbd"), "-D"], dbd_log, {**env, "SLURM_CONF": str(conf)}))
        _wait("slurmdbd", lambda: _listening(ports["dbd"]), dbd_log)
        # the cluster must exist in the database before slurmctld registers with it
        subprocess.run(
            ["sacctmgr", "-i", "add", "cluster", "reprobisect-test"],
            env=env,
            capture_output=True,
            timeout=60,
            check=False,
        )
        ctld_log = root / "slurmctld.log"
        processes.append(_start([_which("slurmctld"), "-D", "-i"], ctld_log, env))
        _wait("slurmctld", lambda: _ping(env), ctld_log)
        slurmd_log = root / "slurmd.log"
        processes.append(_start([_which("slurmd"), "-D", "-N", node], slurmd_log, env))
        _wait("slurmd", lambda: _node_idle(env, node), slurmd_log)
        yield Cluster(root=root, conf=conf, node=node, cpus=cpus)
    finally:
        with contextlib.suppress(Exception):
            subprocess.run(["scancel", "--full", "-u", "root"], env=env, capture_output=True, timeout=30, check=False)
        _stop(processes)


def _listening(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def _ping(env: dict[str, str]) -> bool:
    done = subprocess.run(["scontrol", "ping"], env=env, capture_output=True, text=True, timeout=30, check=False)
    return "UP" in done.stdout


def _node_idle(env: dict[str, str], node: str) -> bool:
    done = subprocess.run(
        ["sinfo", "-h", "-n", node, "-o", "%t"], env=env, capture_output=True, text=True, timeout=30, check=False
    )
    return done.stdout.strip().startswith(("idle", "mix", "alloc"))
