"""A real single-node SLURM cluster for tests and CI, started and stopped from Python.

The Snakemake workflow is meant to run through the SLURM executor plugin; mocking
sbatch would not show that it does. So tests marked `slurm` start Debian's real
slurmctld + slurmd (and munged, which SLURM uses to authenticate) on this machine,
with every file the cluster writes under one temporary folder, and stop them again.
Facts this relies on were measured on this machine kind: shared/notes/local-slurm.md.
The packages come from tests/install_slurm.sh (CI runs it before pytest).

Usage:

    with LocalSlurmCluster(tmp_path / "slurm") as cluster:
        subprocess.run(["sbatch", "--wrap", "hostname"], check=True)  # finds the cluster
        ...
        assert submitted_job_ids(cluster)

Snakemake against this cluster (the plugin is snakemake-executor-plugin-slurm 2.8.0):

    snakemake --executor slurm --jobs 1 \
        --slurm-status-command squeue --slurm-init-seconds-before-status-checks 2

or, in a profile's config.yaml, the same flags without the leading dashes:

    executor: slurm
    jobs: 1
    slurm-status-command: squeue
    slurm-init-seconds-before-status-checks: 2

Why those two settings: accounting is off here (no slurmdbd/MariaDB to run), so
`sacct` exits with "Slurm accounting storage is disabled"; the plugin uses sacct
whenever the program exists (slurm-client installs it) and then waits forever.
`squeue` only sees jobs slurmctld still remembers, i.e. for MinJobAge seconds
after they end: the plugin itself switches back to sacct when MinJobAge is below
3 x init-seconds, and its polling interval grows by 10 s per idle check up to
180 s, so MinJobAge is 300 s here (Slurm's default), well above both.
Without the init-seconds setting each level of dependent jobs waits >= 40 s;
with it, a short job is seen finished about 14 s after submission (checks at
2 s, then +12 s), so a chain of N dependent jobs takes about N x 14 s.

Two things a caller must know:
- Start subprocesses (snakemake, sbatch) with an environment copied from
  os.environ *after* start(): that is where SLURM_CONF is set.
- While the cluster runs, /run/slurm/conf links to its workdir (see
  _link_run_conf); one such cluster per machine at a time.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

# Binaries the harness needs; the daemons live in /usr/sbin, which is not on
# every PATH, so it is searched too.
_BINARIES = ("slurmctld", "slurmd", "munged", "sbatch", "squeue", "sinfo", "scontrol")
_SBIN = "/usr/sbin"

# How long slurmctld remembers a finished job (see module docstring).
MIN_JOB_AGE_S = 300

# Where SLURM programs look for slurm.conf when $SLURM_CONF is unset, in order
# (libslurm 22.05): the compiled-in default, then the folder a "configless"
# slurmd would link to its cached config, then DNS SRV records.
_ETC_CONF = Path("/etc/slurm/slurm.conf")
_RUN_CONF_DIR = Path("/run/slurm/conf")


def _which(name: str) -> str | None:
    return shutil.which(name) or shutil.which(name, path=_SBIN)


def slurm_available() -> str | None:
    """None when a cluster can be started here, else a one-line reason to skip."""
    missing = [b for b in _BINARIES if _which(b) is None]
    if missing:
        return f"SLURM not installed (missing {', '.join(missing)}); run tests/install_slurm.sh"
    # The daemons run as root (SlurmUser=root) and munged must be started as
    # the munge user, which needs root.
    if os.geteuid() != 0:
        return "starting a local SLURM cluster needs root"
    return None


def _free_port() -> int:
    # Own ports rather than 6817/6818, so a cluster left over from an earlier,
    # killed run (or a second one) cannot answer in place of ours.
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _alive(pid: int) -> bool:
    # PID 1 on these machines is not a real init and reaps the daemons it
    # inherits only late: a zombie counts as exited.
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False
    return state != "Z"


def _tail(path: Path, lines: int = 20) -> str:
    try:
        text = path.read_text(errors="replace").splitlines()[-lines:]
    except FileNotFoundError:
        return f"--- {path}: (no file)"
    return f"--- {path} (last {len(text)} lines):\n" + "\n".join(text)


def _munge_works() -> bool:
    # `munge -n` encodes an empty credential through the running munged; it
    # fails at once when no munged listens on the default socket.
    r = subprocess.run(["munge", "-n"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return r.returncode == 0


class LocalSlurmCluster:
    """slurmctld + slurmd (+ munged if none runs) for one node, all state under workdir."""

    MUNGE_PIDFILE = Path("/run/munge/munged.pid")  # munged's default

    def __init__(self, workdir: Path, start_timeout_s: float = 60.0):
        self.workdir = Path(workdir).resolve()
        self.start_timeout_s = start_timeout_s
        self.conf = self.workdir / "slurm.conf"
        self.ctld_log = self.workdir / "log" / "slurmctld.log"
        self.slurmd_log = self.workdir / "log" / "slurmd.log"
        self.ctld_pidfile = self.workdir / "run" / "slurmctld.pid"
        self.slurmd_pidfile = self.workdir / "run" / "slurmd.pid"
        self.started_munged = False
        self._started: list[tuple[str, Path]] = []  # (name, pid file), in start order
        self._saved_env: str | None = None
        self._env_set = False
        self._linked_run_conf = False

    # -- configuration -------------------------------------------------------

    def _node_line(self) -> str:
        # RealMemory must not exceed what slurmd finds itself, or the node is
        # drained as invalid: take it from `slurmd -C`.
        out = subprocess.run([_which("slurmd"), "-C"], capture_output=True, text=True, check=True).stdout
        mem = re.search(r"RealMemory=(\d+)", out)
        if mem is None:
            raise RuntimeError(f"cannot read RealMemory from `slurmd -C`:\n{out}")
        self.node = socket.gethostname().split(".")[0]  # what slurmd calls itself (hostname -s)
        # NodeAddr: slurmctld reaches slurmd over loopback whatever DNS says.
        # CPUs: what nproc says (the CPUs this process may use).
        return (f"NodeName={self.node} NodeAddr=127.0.0.1 CPUs={len(os.sched_getaffinity(0))} "
                f"RealMemory={mem.group(1)} State=UNKNOWN")

    def write_config(self) -> Path:
        for sub in ("state", "spool", "run", "log"):
            (self.workdir / sub).mkdir(parents=True, exist_ok=True)
        w = self.workdir
        conf = f"""\
# Written by tests/slurm_cluster.py: single-node test cluster, all state under {w}
ClusterName=testcluster
SlurmctldHost={socket.gethostname().split('.')[0]}(127.0.0.1)
SlurmctldPort={_free_port()}
SlurmdPort={_free_port()}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
MpiDefault=none
# No cgroups in this VM: track processes via /proc, and no task binding.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
# Without a default memory per CPU every job asks for the whole node's memory
# and jobs run one at a time.
DefMemPerCPU=500
# A node that was down comes back by itself once slurmd registers.
ReturnToService=2
MailProg=/bin/true
# Accounting off: see the module docstring (the profile needs slurm-status-command: squeue).
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
MinJobAge={MIN_JOB_AGE_S}
StateSaveLocation={w}/state
SlurmdSpoolDir={w}/spool
SlurmctldPidFile={self.ctld_pidfile}
SlurmdPidFile={self.slurmd_pidfile}
SlurmctldLogFile={self.ctld_log}
SlurmdLogFile={self.slurmd_log}
SlurmctldDebug=info
SlurmdDebug=info
{self._node_line()}
PartitionName=debug Nodes={self.node} Default=YES MaxTime=INFINITE State=UP
"""
        self.conf.write_text(conf)
        return self.conf

    # -- start / stop -------------------------------------------------------

    def start(self) -> "LocalSlurmCluster":
        reason = slurm_available()
        if reason:
            raise RuntimeError(reason)
        self.write_config()
        # Every SLURM program (daemons, sbatch/squeue/sinfo, and the ones the
        # Snakemake plugin and slurmstepd run) reads $SLURM_CONF before
        # /etc/slurm/slurm.conf, so nothing is written to /etc. Set in
        # os.environ so subprocesses started by the test find this cluster
        # (copy os.environ for a subprocess *after* start()). One exception
        # needs a default-path link: see _link_run_conf.
        self._saved_env = os.environ.get("SLURM_CONF")
        os.environ["SLURM_CONF"] = str(self.conf)
        self._env_set = True
        try:
            self._link_run_conf()
            self._start_munged()
            # -c: ignore any saved state (there is none in a fresh workdir).
            self._start_daemon("slurmctld", [_which("slurmctld"), "-c"], self.ctld_pidfile, self.ctld_log)
            self._start_daemon("slurmd", [_which("slurmd")], self.slurmd_pidfile, self.slurmd_log)
            self._wait_idle()
        except BaseException:
            self.stop()
            raise
        return self

    def _link_run_conf(self) -> None:
        # $SLURM_CONF is not enough for one program: inside each Snakemake job,
        # snakemake-executor-plugin-slurm-jobstep (0.6.1) runs the rule with a
        # nested `srun`, after deleting every SLURM_* variable except the job's
        # identity ones -- SLURM_CONF included. That srun then finds no config
        # ("fetch_config: DNS SRV lookup failed") and the job FAILS. The least
        # intrusive default location is /run/slurm/conf (runtime folder, gone
        # after a reboot, and /etc untouched): link it to our workdir for the
        # cluster's lifetime. It is only read when /etc/slurm/slurm.conf is
        # absent, as on a CI machine with nothing but the Debian packages.
        if _ETC_CONF.exists():
            raise RuntimeError(
                f"{_ETC_CONF} exists: jobs started by Snakemake would use that cluster's "
                "config, not this test cluster's (the jobstep plugin drops SLURM_CONF)")
        if _RUN_CONF_DIR.is_symlink() or _RUN_CONF_DIR.exists():
            target = Path(os.readlink(_RUN_CONF_DIR)) if _RUN_CONF_DIR.is_symlink() else None
            pid = self._pid(target / "run" / "slurmctld.pid") if target else None
            if target is None or (pid is not None and _alive(pid)):
                raise RuntimeError(
                    f"{_RUN_CONF_DIR} is in use ({target or 'not a link'}): "
                    "another SLURM cluster runs on this machine")
            _RUN_CONF_DIR.unlink()  # left by a test cluster that was killed, not stopped
        _RUN_CONF_DIR.parent.mkdir(parents=True, exist_ok=True)
        _RUN_CONF_DIR.symlink_to(self.workdir, target_is_directory=True)
        self._linked_run_conf = True

    def _start_munged(self) -> None:
        if _munge_works():
            return  # someone else's munged: use it, leave it running at stop()
        # The package creates the key but starts nothing (no systemd here).
        # munged refuses to run as root, hence runuser; it daemonizes itself.
        run = Path("/run/munge")
        run.mkdir(parents=True, exist_ok=True)
        shutil.chown(run, "munge", "munge")
        subprocess.run(["runuser", "-u", "munge", "--", _which("munged")], check=True,
                       stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.started_munged = True
        self._started.append(("munged", self.MUNGE_PIDFILE))
        self._wait(lambda: _munge_works(), "munged to answer", [Path("/var/log/munge/munged.log")])

    def _start_daemon(self, name: str, cmd: list[str], pidfile: Path, log: Path) -> None:
        # The daemons fork into the background and write their pid file. Their
        # stdio goes to the log, never to a pipe of ours: a daemon holding a
        # captured pipe open would hang whoever reads it (pytest, subprocess.run).
        with open(log, "ab") as out:
            r = subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=out)
        self._started.append((name, pidfile))
        if r.returncode != 0:
            raise RuntimeError(f"{name} exited with {r.returncode}\n{_tail(log)}")
        self._wait(lambda: pidfile.exists() and pidfile.read_text().strip() != "",
                   f"{name} to write {pidfile}", [log])

    def _wait_idle(self) -> None:
        def idle() -> bool:
            r = subprocess.run(["sinfo", "-h", "-N", "-o", "%T"], capture_output=True, text=True)
            return r.returncode == 0 and r.stdout.split() == ["idle"]
        self._wait(idle, f"sinfo to show node {self.node} idle", [self.ctld_log, self.slurmd_log])

    def _wait(self, ok, what: str, logs: list[Path]) -> None:
        deadline = time.monotonic() + self.start_timeout_s
        while not ok():
            for name, pidfile in self._started:
                pid = self._pid(pidfile)
                if name != "munged" and pid is not None and not _alive(pid):
                    raise RuntimeError(f"{name} (pid {pid}) died while waiting for {what}\n"
                                       + "\n".join(_tail(p) for p in logs))
            if time.monotonic() > deadline:
                sinfo = subprocess.run(["sinfo", "-N", "-l"], capture_output=True, text=True)
                raise TimeoutError(
                    f"local SLURM cluster: waited {self.start_timeout_s:.0f} s for {what}\n"
                    f"sinfo: {sinfo.stdout.strip()} {sinfo.stderr.strip()}\n"
                    + "\n".join(_tail(p) for p in logs))
            time.sleep(0.25)

    @staticmethod
    def _pid(pidfile: Path) -> int | None:
        try:
            return int(pidfile.read_text().split()[0])
        except (FileNotFoundError, ValueError, IndexError):
            return None

    def stop(self, timeout_s: float = 30.0) -> None:
        """Stop what start() started (and nothing else), newest first; undo the
        /run/slurm/conf link and SLURM_CONF."""
        errors = []
        self._cancel_jobs()
        for name, pidfile in reversed(self._started):
            pid = self._pid(pidfile)
            if pid is None or not _alive(pid):
                continue
            os.kill(pid, signal.SIGTERM)
            deadline = time.monotonic() + timeout_s
            while _alive(pid) and time.monotonic() < deadline:
                time.sleep(0.1)
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
                errors.append(f"{name} (pid {pid}) ignored SIGTERM for {timeout_s:.0f} s; killed")
        self._started.clear()
        self.started_munged = False
        if self._linked_run_conf:
            if _RUN_CONF_DIR.is_symlink() and Path(os.readlink(_RUN_CONF_DIR)) == self.workdir:
                _RUN_CONF_DIR.unlink()
            self._linked_run_conf = False
        if self._env_set:
            if self._saved_env is None:
                os.environ.pop("SLURM_CONF", None)
            else:
                os.environ["SLURM_CONF"] = self._saved_env
            self._env_set = False
        if errors:
            raise RuntimeError("; ".join(errors))

    def _cancel_jobs(self, timeout_s: float = 15.0) -> None:
        # slurmd leaves running jobs alone when it exits (by design, so that it
        # can be restarted): cancel this cluster's jobs first, or a test that
        # failed half-way would leave job processes behind.
        if not self._started or not self._env_set:
            return
        subprocess.run(["scancel", "--quiet", "--user", str(os.geteuid())],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=30)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            r = subprocess.run(["squeue", "-h", "-o", "%i", "--states=PENDING,RUNNING,COMPLETING"],
                               capture_output=True, text=True)
            if r.returncode != 0 or not r.stdout.strip():
                return
            time.sleep(0.25)

    def __enter__(self) -> "LocalSlurmCluster":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


# slurmctld logs one such line (at SlurmctldDebug=info) per accepted sbatch.
_SUBMIT_RE = re.compile(r"_slurm_rpc_submit_batch_job: JobId=(\d+)")


def submitted_job_ids(cluster: LocalSlurmCluster) -> list[int]:
    """Ids of the batch jobs slurmctld accepted (i.e. that went through sbatch), in order."""
    try:
        text = cluster.ctld_log.read_text(errors="replace")
    except FileNotFoundError:
        return []
    return [int(m) for m in _SUBMIT_RE.findall(text)]
