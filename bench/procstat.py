"""CPU and memory accounting from /proc: who used the two cores during a measurement."""

from __future__ import annotations

import contextlib
import os
import resource
from typing import Any

_TICK = os.sysconf("SC_CLK_TCK")
_PAGE = os.sysconf("SC_PAGE_SIZE")


def _stat(pid: int) -> tuple[str, int, float] | None:
    """(comm, ppid, cpu seconds) of a process, or None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            raw = f.read().decode(errors="replace")
    except OSError:
        return None
    lp, rp = raw.index("("), raw.rindex(")")
    comm = raw[lp + 1 : rp]
    fields = raw[rp + 2 :].split()
    ppid = int(fields[1])
    cpu = (int(fields[11]) + int(fields[12])) / _TICK
    return comm, ppid, cpu


def _all_pids() -> list[int]:
    return [int(p) for p in os.listdir("/proc") if p.isdigit()]


def process_tree(root: int) -> list[int]:
    """root and all its descendants."""
    parents: dict[int, int] = {}
    for pid in _all_pids():
        st = _stat(pid)
        if st is not None:
            parents[pid] = st[1]
    tree = {root}
    changed = True
    while changed:
        changed = False
        for pid, ppid in parents.items():
            if ppid in tree and pid not in tree:
                tree.add(pid)
                changed = True
    return sorted(p for p in tree if p in parents or p == root)


def uid_of(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("Uid:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def postgres_pids(uid: int | None) -> list[int]:
    """The processes of the PostgreSQL cluster under test (all run as its OS user; other
    clusters on the machine, e.g. embedded ones of a test suite, run as other users)."""
    if uid is None:
        return []
    out = []
    for pid in _all_pids():
        st = _stat(pid)
        if st is not None and st[0].startswith("postgres") and uid_of(pid) == uid:
            out.append(pid)
    return out


def cpu_seconds(pids: list[int]) -> float:
    total = 0.0
    for pid in pids:
        st = _stat(pid)
        if st is not None:
            total += st[2]
    return total


def per_pid_cpu(pids: list[int]) -> dict[int, float]:
    out = {}
    for pid in pids:
        st = _stat(pid)
        if st is not None:
            out[pid] = st[2]
    return out


def rss_bytes(pids: list[int]) -> int:
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/statm") as f:
                total += int(f.read().split()[1]) * _PAGE
        except OSError:
            pass
    return total


def machine_busy_seconds() -> tuple[float, float]:
    """(busy, total) CPU seconds across all cores since boot."""
    with open("/proc/stat") as f:
        parts = [int(x) for x in f.readline().split()[1:]]
    idle = parts[3] + parts[4]
    total = sum(parts[:8])
    return (total - idle) / _TICK, total / _TICK


def keep_freed_memory() -> None:
    """Have glibc's malloc keep what this process frees instead of giving it back to the
    kernel. A full answer to a large push is read into fresh buffers that glibc would map for
    it and unmap after, costing page faults and system CPU for every answer. The
    client shares the cores with the server and PostgreSQL, so its waste was theirs. Not glibc
    (no mallopt): nothing happens."""
    import ctypes
    import ctypes.util

    try:
        mallopt = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").mallopt
    except (OSError, AttributeError):
        return
    m_trim_threshold, m_mmap_threshold = -1, -3
    mallopt(m_mmap_threshold, 32 * 1024 * 1024)  # glibc's largest: allocate from the heap
    mallopt(m_trim_threshold, 1024 * 1024 * 1024)  # and keep its top, up to 1 GiB


def own_cpu_seconds() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


class CpuMeter:
    """CPU seconds used by the client (this process), the server tree and PostgreSQL between
    start() and stop()."""

    def __init__(self, server_root: int | None, pg_uid: int | None) -> None:
        self.server_root = server_root
        self.pg_uid = pg_uid

    def _sample(self) -> dict[str, Any]:
        server = process_tree(self.server_root) if self.server_root else []
        busy, total = machine_busy_seconds()
        return {
            "client": own_cpu_seconds(),
            "server": per_pid_cpu(server),
            "postgres": per_pid_cpu(postgres_pids(self.pg_uid)),
            "machine_busy": busy,
            "machine_total": total,
        }

    def start(self) -> None:
        self._t0 = self._sample()
        # The client's own clock starts after, and stops before, the /proc scans that find the
        # server's and PostgreSQL's processes, so the scans are not counted as the client's.
        self._t0["client"] = own_cpu_seconds()

    def stop(self, elapsed: float) -> dict[str, float]:
        client = own_cpu_seconds()
        t1 = self._sample()
        t1["client"] = client
        d: dict[str, float] = {}
        for k in t1:
            if isinstance(t1[k], dict):
                # per process: a process that started meanwhile counts in full; one that exited
                # meanwhile (an autovacuum worker, a closed connection) drops out (undercount)
                d[k] = sum(max(0.0, v - self._t0[k].get(pid, 0.0)) for pid, v in t1[k].items())
            else:
                d[k] = t1[k] - self._t0[k]
        out = {k: round(d[k], 3) for k in ("client", "server", "postgres")}
        # as a share of one core (100 % = one core busy for the whole run)
        for k in ("client", "server", "postgres"):
            out[f"{k}_pct"] = round(100 * d[k] / elapsed, 1) if elapsed > 0 else 0.0
        ncpu = os.cpu_count() or 1
        out["machine_busy_pct"] = (  # of all cores: 200 % = both of two cores busy
            round(100 * ncpu * d["machine_busy"] / d["machine_total"], 1)
            if d["machine_total"]
            else 0.0
        )
        # what else ran meanwhile (other programs on a shared machine): a noise indicator
        out["other_pct"] = round(
            out["machine_busy_pct"] - out["client_pct"] - out["server_pct"] - out["postgres_pct"], 1
        )
        return out


def renice(pids: list[int], value: int) -> dict[int, int]:
    """Set the nice value of ``pids``; returns their previous values (for restore())."""
    before: dict[int, int] = {}
    for pid in pids:
        try:
            before[pid] = os.getpriority(os.PRIO_PROCESS, pid)
            os.setpriority(os.PRIO_PROCESS, pid, value)
        except OSError:
            pass
    return before


def restore(before: dict[int, int]) -> None:
    for pid, value in before.items():
        with contextlib.suppress(OSError):
            os.setpriority(os.PRIO_PROCESS, pid, value)


def cpu_probe(rounds: int = 7) -> dict[str, float]:
    """Milliseconds this machine takes for a fixed pure-Python loop (1,000,000 iterations), best
    and median of ``rounds``. On a shared VM the same code's CPU per job swings by half from hour
    to hour (the host's other tenants are invisible: no steal time is reported); this number,
    taken at the start and the end of a run, says how fast the cores were meanwhile."""
    import time

    times = []
    for _ in range(rounds):
        started = time.perf_counter()
        total = 0
        for i in range(1_000_000):
            total += i & 7
        times.append(time.perf_counter() - started)
    times.sort()
    return {"best_ms": round(1e3 * times[0], 1), "median_ms": round(1e3 * times[rounds // 2], 1)}


def fsync_probe(directory: str, seconds: float = 1.0) -> dict[str, float] | None:
    """How fast this disk makes an 8 kB write durable (write + fdatasync in a loop, as a WAL
    flush does). With synchronous_commit on, every commit waits for one such flush (shared by
    the commits that group behind it), so this bounds single-job throughput."""
    path = os.path.join(directory, f".werk-bench-fsync-{os.getpid()}")
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    except OSError:
        return None
    import time

    block = b"\0" * 8192
    lat: list[float] = []
    try:
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            t = time.perf_counter()
            os.pwrite(fd, block, 0)
            os.fdatasync(fd)
            lat.append(time.perf_counter() - t)
    finally:
        os.close(fd)
        os.unlink(path)
    lat.sort()
    return {
        "directory": directory,
        "flushes_per_s": round(len(lat) / seconds, 1),
        "p50_ms": round(1e3 * lat[len(lat) // 2], 3),
        "p99_ms": round(1e3 * lat[min(len(lat) - 1, int(len(lat) * 0.99))], 3),
    }
