"""Resources: where the shipped data lives (inside the wheel, roofline/_data/..., or at the top of a source
checkout), and the memory the host has (:func:`host_memory`) with the process guard (:func:`memory_guard`) that
turns an allocation past it into an error instead of the kernel's OOM killer (docs/bench.md, "Memory")."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent


def data_dir(name: str) -> Path:
    """Directory of shipped data ``name`` ('hardware_specs' or 'workloads')."""
    for candidate in (_PACKAGE / "_data" / name, _PACKAGE.parent / name):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"roofline data directory {name!r} is missing from this installation")


# ------------------------------------------------------------------------------------------------ memory

#: the share of the free host memory the process guard lets one bench/analyze run take (the rest stays free)
GUARD_SHARE = 0.9
#: the guard never leaves less than this much room above what the process already uses
GUARD_FLOOR = 256 * 2**20


@dataclass(frozen=True)
class HostMemory:
    """What the host has for a new allocation: ``available`` bytes (the least of every limit read), ``total``
    bytes, and ``source``, which limit ``available`` comes from (for the one line that names it)."""

    available: int
    total: int
    source: str


def _meminfo(path: Path) -> dict[str, int]:
    """/proc/meminfo's fields in bytes (its kB are KiB)."""
    fields: dict[str, int] = {}
    try:
        text = path.read_text(encoding="ascii", errors="replace")
    except OSError:
        return fields
    for line in text.splitlines():
        name, _, rest = line.partition(":")
        parts = rest.split()
        if parts and parts[0].isdigit():
            fields[name.strip()] = int(parts[0]) * (1024 if parts[1:2] == ["kB"] else 1)
    return fields


def _read_int(path: Path) -> int | None:
    try:
        text = path.read_text(encoding="ascii", errors="replace").strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def _cgroup_room(proc_cgroup: Path, root: Path) -> tuple[int, int] | None:
    """(limit, usage) of this process's memory cgroup (v2 ``memory.max``/``memory.current``, v1
    ``memory.limit_in_bytes``/``memory.usage_in_bytes``); None when it has no limit or cannot be read."""
    try:
        lines = proc_cgroup.read_text(encoding="ascii", errors="replace").splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, where = [*line.split(":", 2), "", ""][:3]
        where = where.strip().lstrip("/")
        if controllers == "":  # v2: 0::/path
            limit, usage = _read_int(root / where / "memory.max"), _read_int(root / where / "memory.current")
        elif "memory" in controllers.split(","):
            base = root / "memory" / where
            limit, usage = _read_int(base / "memory.limit_in_bytes"), _read_int(base / "memory.usage_in_bytes")
        else:
            continue
        if limit is not None and usage is not None and limit < 2**60:  # v1 writes 2^63 - 4096 for no limit
            return limit, usage
    return None


def host_memory(
    meminfo: Path = Path("/proc/meminfo"),
    proc_cgroup: Path = Path("/proc/self/cgroup"),
    cgroup_root: Path = Path("/sys/fs/cgroup"),
) -> HostMemory | None:
    """The host memory free for a new allocation now: Linux's MemAvailable (/proc/meminfo), lowered to the room
    left in this process's memory cgroup when it has a limit (a container); elsewhere psutil when installed, else
    ``os.sysconf``'s free physical pages. None when nothing can be read (then nothing is checked)."""
    fields = _meminfo(meminfo)
    if "MemAvailable" in fields:
        memory = HostMemory(fields["MemAvailable"], fields.get("MemTotal", fields["MemAvailable"]), "MemAvailable")
        room = _cgroup_room(proc_cgroup, cgroup_root)
        if room is not None and room[0] - room[1] < memory.available:
            limit, usage = room
            memory = HostMemory(max(0, limit - usage), min(limit, memory.total), "the memory cgroup's limit")
        return memory
    try:
        import psutil  # type: ignore[import-untyped]

        vm = psutil.virtual_memory()
        return HostMemory(int(vm.available), int(vm.total), "psutil")
    except Exception:  # absent or failing: the next way
        pass
    import os

    try:
        page = os.sysconf("SC_PAGE_SIZE")
        return HostMemory(os.sysconf("SC_AVPHYS_PAGES") * page, os.sysconf("SC_PHYS_PAGES") * page, "sysconf")
    except (AttributeError, ValueError, OSError):
        return None


def process_data_bytes(status: Path = Path("/proc/self/status")) -> int | None:
    """This process's data segment now (VmData: what RLIMIT_DATA counts), or None off Linux."""
    return _meminfo(status).get("VmData")


def data_room(status: Path = Path("/proc/self/status")) -> int | None:
    """Bytes this process may still allocate under its soft RLIMIT_DATA (roofline's guard, or ``ulimit -d``); None
    when it has none or off Linux."""
    try:
        import resource
    except ImportError:
        return None
    soft, _ = resource.getrlimit(resource.RLIMIT_DATA)
    used = process_data_bytes(status)
    if soft == resource.RLIM_INFINITY or used is None:
        return None
    return max(0, soft - used)


@dataclass(frozen=True)
class Guard:
    """The process guard: RLIMIT_DATA's soft limit ``limit`` bytes, or None when none was set (``why`` says why)."""

    limit: int | None
    why: str = ""


@contextmanager
def memory_guard(share: float = GUARD_SHARE, memory: HostMemory | None = None) -> Iterator[Guard]:
    """A limit on this process's data (``resource.RLIMIT_DATA``, Linux) of what it uses now plus ``share`` of the free
    host memory, restored on exit: an allocation past it fails at once (torch: a RuntimeError 'can't allocate
    memory'; Python: MemoryError) instead of growing the process until the kernel's OOM killer ends it without a
    word. NB: RLIMIT_DATA, not RLIMIT_AS: the address-space limit also counts the thread stacks and malloc arenas
    that are reserved but never used, and under it libgomp (torch's CPU threads) fails to start threads. An
    existing soft limit that is lower is kept. Off Linux, or when the memory cannot be read, nothing is set."""
    try:
        import resource
    except ImportError:  # not a Unix
        yield Guard(None, "no resource module on this platform")
        return
    memory = memory if memory is not None else host_memory()
    used = process_data_bytes()
    if memory is None or used is None or not hasattr(resource, "RLIMIT_DATA"):
        yield Guard(None, "the process's memory cannot be read here (Linux only)")
        return
    limit = used + max(GUARD_FLOOR, int(share * memory.available))
    soft, hard = resource.getrlimit(resource.RLIMIT_DATA)
    if soft != resource.RLIM_INFINITY and soft <= limit:
        yield Guard(soft, "an existing limit (ulimit -d) is lower")
        return
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    try:
        resource.setrlimit(resource.RLIMIT_DATA, (limit, hard))
    except (ValueError, OSError) as exc:
        yield Guard(None, f"setrlimit failed: {exc}")
        return
    try:
        yield Guard(limit)
    finally:
        resource.setrlimit(resource.RLIMIT_DATA, (soft, hard))
