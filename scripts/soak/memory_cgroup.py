"""A memory cgroup with a hard limit, for running a server as a container with `--memory` would:
the server is started inside it (`enter`, as the child's pre-exec step, so it sizes its KV pool
from the limit from its first instruction), and afterwards the cgroup tells the peak memory
charged and whether the kernel's OOM killer ran in it.

cgroup v2 where the memory controller is on the unified hierarchy, else v1's memory hierarchy
(the machines our CI runs on mount v1's). Needs root; `unavailable()` says why not otherwise.
"""

from __future__ import annotations

import os
from pathlib import Path


def _mounts() -> list[tuple[str, str, str]]:
    """(mount point, type, options) of every cgroup mount."""
    out = []
    for line in Path("/proc/mounts").read_text().splitlines():
        parts = line.split()
        if len(parts) >= 4 and parts[2] in ("cgroup", "cgroup2"):
            out.append((parts[1], parts[2], parts[3]))
    return out


def _find_hierarchy() -> tuple[int, Path] | None:
    """(version, root) of the hierarchy that holds the memory controller."""
    for point, kind, options in _mounts():
        root = Path(point)
        if kind == "cgroup2":
            controllers = root / "cgroup.controllers"
            if controllers.exists() and "memory" in controllers.read_text().split():
                return 2, root
        elif "memory" in options.split(","):
            return 1, root
    return None


def unavailable() -> str | None:
    """Why a memory cgroup cannot be made here, or None when it can."""
    if os.geteuid() != 0:
        return "not root"
    found = _find_hierarchy()
    if found is None:
        return "no cgroup hierarchy with the memory controller is mounted"
    if not os.access(found[1], os.W_OK):
        return f"{found[1]} is not writable"
    return None


class MemoryCgroup:
    def __init__(self, name: str, limit_bytes: int):
        found = _find_hierarchy()
        if found is None:
            raise RuntimeError("no memory cgroup hierarchy")
        self.version, root = found
        self.limit = limit_bytes
        self.path = root / name
        if self.version == 2:
            # Children get the memory controller only when their parent hands it down.
            (root / "cgroup.subtree_control").write_text("+memory")
        self.path.mkdir(exist_ok=True)
        if self.version == 2:
            (self.path / "memory.max").write_text(str(limit_bytes))
            swap = self.path / "memory.swap.max"
            if swap.exists():
                swap.write_text("0")
        else:
            (self.path / "memory.limit_in_bytes").write_text(str(limit_bytes))
            memsw = self.path / "memory.memsw.limit_in_bytes"
            if memsw.exists():  # memory + swap: no swapping out of the limit either
                memsw.write_text(str(limit_bytes))

    def enter(self) -> None:
        """Moves the calling process into the cgroup (a subprocess.Popen preexec_fn)."""
        (self.path / "cgroup.procs").write_text(str(os.getpid()))

    def _read(self, name: str) -> str:
        return (self.path / name).read_text()

    def _counter(self, name: str, key: str) -> int | None:
        for line in self._read(name).splitlines():
            k, _, v = line.partition(" ")
            if k == key:
                return int(v)
        return None

    def stats(self) -> dict:
        """The limit, the memory charged now and at its peak, how often the limit was hit and
        how many processes the OOM killer killed in the cgroup."""
        if self.version == 2:
            peak_file = self.path / "memory.peak"  # kernels >= 5.19
            return {
                "cgroup_version": 2,
                "limit_bytes": self.limit,
                "current_bytes": int(self._read("memory.current")),
                "peak_bytes": int(peak_file.read_text()) if peak_file.exists() else None,
                "limit_hits": self._counter("memory.events", "max"),
                "oom_kills": self._counter("memory.events", "oom_kill"),
            }
        return {
            "cgroup_version": 1,
            "limit_bytes": self.limit,
            "current_bytes": int(self._read("memory.usage_in_bytes")),
            "peak_bytes": int(self._read("memory.max_usage_in_bytes")),
            "limit_hits": int(self._read("memory.failcnt")),
            # "oom_kill N" since Linux 4.13; under_oom says whether it is out of memory now.
            "oom_kills": self._counter("memory.oom_control", "oom_kill"),
        }

    def remove(self) -> None:
        """Removes the cgroup once its processes have exited (what they charged moves up)."""
        try:
            self.path.rmdir()
        except OSError:
            pass
