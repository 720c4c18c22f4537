"""Process placement shared by the benchmarks that run a client and a server side by side."""

from __future__ import annotations

import os


def pin(pid: int, core: int) -> bool:
    """Keep the client and the engine off each other's core when there are two."""
    cores = os.sched_getaffinity(0)
    if len(cores) < 2 or core not in cores:
        return False
    os.sched_setaffinity(pid, {core})
    return True
