"""CPU-quota cgroups for benchmarks/cluster_scaling.py: one cgroup a worker, so that N worker
processes behave like N small machines (each limited to ``quota`` of a core) on one box.

cgroup v1 (a ``cpu`` hierarchy with ``cpu.cfs_quota_us``, usage from the ``cpuacct``
hierarchy, co-mounted or not) or v2 (``cpu.max``, usage from ``cpu.stat``'s ``usage_usec``),
whichever this machine has with the cpu controller; v1 first, because a hybrid system's v2
mount often has no cpu controller (this machine's does not). Needs root (or a delegated
subtree). Each cgroup also gets a high CPU weight (v1 ``cpu.shares`` 10240, v2 ``cpu.weight``
1000), so that other load on the machine does not take a worker's quota away: the quota, not
the neighbours, is what limits it.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from pathlib import Path

PERIOD_US = 100_000


def _mounts() -> list[tuple[str, str, set[str]]]:
    out = []
    for line in Path("/proc/mounts").read_text().splitlines():
        parts = line.split()
        if len(parts) >= 4 and parts[2] in ("cgroup", "cgroup2"):
            out.append((parts[1], parts[2], set(parts[3].split(","))))
    return out


def _find() -> tuple[str, Path, Path]:
    """("v1", cpu root, cpuacct root) or ("v2", root, root); SystemExit when neither works."""
    mounts = _mounts()
    cpu = next((Path(m) for m, t, o in mounts if t == "cgroup" and "cpu" in o), None)
    acct = next((Path(m) for m, t, o in mounts if t == "cgroup" and "cpuacct" in o), None)
    if cpu and acct and (cpu / "cpu.cfs_quota_us").exists():
        return "v1", cpu, acct
    for m, t, _ in mounts:
        ctl = Path(m) / "cgroup.controllers"
        if t == "cgroup2" and ctl.exists() and "cpu" in ctl.read_text().split():
            return "v2", Path(m), Path(m)
    raise SystemExit(
        "cluster_scaling: no cgroup with the cpu controller (v1 cpu+cpuacct, or v2 cpu) "
        "is mounted: the per-worker CPU quota needs one"
    )


class CpuCgroups:
    """``n`` sibling cgroups ``NAME-0`` .. ``NAME-(n-1)``, each limited to ``quota`` cores."""

    def __init__(self, name: str, n: int, quota: float) -> None:
        self.kind, self.cpu_root, self.acct_root = _find()
        self.names = [f"{name}-{i}" for i in range(n)]
        quota_us = max(1000, round(quota * PERIOD_US))
        for g in self.names:
            cpu = self.cpu_root / g
            cpu.mkdir(exist_ok=True)
            if self.kind == "v1":
                (cpu / "cpu.cfs_period_us").write_text(str(PERIOD_US))
                (cpu / "cpu.cfs_quota_us").write_text(str(quota_us))
                (cpu / "cpu.shares").write_text("10240")
                (self.acct_root / g).mkdir(exist_ok=True)
            else:
                (cpu / "cpu.max").write_text(f"{quota_us} {PERIOD_US}")
                (cpu / "cpu.weight").write_text("1000")
        self.start = self.usage_s()

    @staticmethod
    def check() -> None:
        """SystemExit with the reason when cgroups cannot be made here."""
        kind, root, _ = _find()
        if kind == "v2":
            ctl = root / "cgroup.subtree_control"
            if "cpu" not in ctl.read_text().split():
                try:
                    ctl.write_text("+cpu")
                except OSError as e:
                    raise SystemExit(f"cluster_scaling: cannot enable cpu in {ctl}: {e}") from e
        if not os.access(root, os.W_OK):
            raise SystemExit(f"cluster_scaling: cannot create cgroups under {root} (run as root)")

    @staticmethod
    def describe() -> str:
        kind, root, acct = _find()
        if kind == "v1":
            return f"cgroup v1 {root}/*/cpu.cfs_quota_us, usage {acct}/*/cpuacct.usage"
        return f"cgroup v2 {root}/*/cpu.max, usage cpu.stat"

    def _procs_files(self, i: int) -> list[Path]:
        files = [self.cpu_root / self.names[i] / "cgroup.procs"]
        if self.kind == "v1" and self.acct_root != self.cpu_root:
            files.append(self.acct_root / self.names[i] / "cgroup.procs")
        return files

    def enter_fn(self, i: int) -> Callable[[], None]:
        """A ``preexec_fn``: a new session, then this (child) process into cgroup ``i``
        before it execs, so everything it runs is counted and limited."""
        files = [str(f) for f in self._procs_files(i)]

        def enter() -> None:
            os.setsid()
            pid = str(os.getpid())
            for f in files:
                with open(f, "w") as fh:
                    fh.write(pid)

        return enter

    def usage_s(self) -> list[float]:
        """Each cgroup's CPU seconds so far."""
        out = []
        for g in self.names:
            if self.kind == "v1":
                out.append(int((self.acct_root / g / "cpuacct.usage").read_text()) / 1e9)
            else:
                stat = (self.cpu_root / g / "cpu.stat").read_text().split()
                out.append(int(stat[stat.index("usage_usec") + 1]) / 1e6)
        return out

    def remove(self) -> None:
        """Kill what is left in the cgroups, then remove them."""
        roots = {self.cpu_root, self.acct_root}
        for g in self.names:
            for root in roots:
                path = root / g
                for _ in range(50):
                    try:
                        pids = [int(p) for p in (path / "cgroup.procs").read_text().split()]
                    except OSError:
                        break
                    if not pids:
                        break
                    for pid in pids:
                        try:
                            os.kill(pid, signal.SIGKILL)
                        except ProcessLookupError:
                            pass
                    time.sleep(0.05)
                try:
                    path.rmdir()
                except OSError:
                    pass
