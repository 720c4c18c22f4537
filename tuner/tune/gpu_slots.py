"""One tuner worker per GPU: exclusive lock files on GPU groups.

A launch-backend worker takes the first free group of ``gpus_per_worker`` GPUs of this node
and holds an ``flock`` on its lock file for its whole life (the kernel drops it when the
process dies, so a killed worker never leaves a stale lock). Engines it starts see only that
group through ``CUDA_VISIBLE_DEVICES``.

The node's GPUs are ``CUDA_VISIBLE_DEVICES`` when set, else the devices NVML reports. With
no GPU at all (emulated engines) every worker gets a slot of its own with no device.
"""

from __future__ import annotations

import fcntl
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from slotune.collector.errors import ConfigError

LOCK_DIR_ENV = "SLOTUNE_GPU_LOCK_DIR"


@dataclass(frozen=True, slots=True)
class GpuSlot:
    """The GPUs one worker owns (empty: no GPU, emulated engines)."""

    device_ids: tuple[str, ...]

    def env(self) -> dict[str, str]:
        """Environment for engines started by this worker."""
        return {"CUDA_VISIBLE_DEVICES": ",".join(self.device_ids)} if self.device_ids else {}


def node_gpu_ids() -> list[str]:
    """The GPUs of this node as CUDA device ids."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        return [v.strip() for v in visible.split(",") if v.strip()]
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            return [str(i) for i in range(pynvml.nvmlDeviceGetCount())]
        finally:
            pynvml.nvmlShutdown()
    except Exception:  # no driver / no library: this node has no usable GPU
        return []


def lock_dir() -> Path:
    d = Path(os.environ.get(LOCK_DIR_ENV) or Path(tempfile.gettempdir()) / "slotune-gpu-locks")
    d.mkdir(parents=True, exist_ok=True)
    return d


@contextmanager
def acquire_slot(gpus_per_worker: int = 1) -> Iterator[GpuSlot]:
    """Hold the first free GPU group of this node for the duration of the block.

    Raises:
        ConfigError: every GPU group is held by another worker.
    """
    ids = node_gpu_ids()
    if not ids:
        yield GpuSlot(())
        return
    groups = [
        tuple(ids[i : i + gpus_per_worker])
        for i in range(0, len(ids) - gpus_per_worker + 1, gpus_per_worker)
    ]
    for group in groups:
        path = lock_dir() / f"gpu-{'-'.join(group)}.lock"
        fd = os.open(path, os.O_CREAT | os.O_RDWR, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue
        try:
            os.write(fd, f"{os.getpid()}\n".encode())
            yield GpuSlot(group)
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)
        return
    raise ConfigError(
        f"all {len(groups)} GPU group(s) of this node ({','.join(ids)}) are held "
        "by other tuner workers; run fewer --workers (one per GPU) or wait"
    )
