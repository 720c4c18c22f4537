"""Hand-built Kineto traces with known answers."""

from __future__ import annotations

import gzip
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# What the issue requires of "overall" and of every window, in every kind of diagnosis.
SPLIT_KEYS = {
    "total_ms",
    "busy_ms",
    "compute_ms",
    "exposed_memcpy_ms",
    "exposed_comm_ms",
    "idle_ms",
}


@dataclass
class TraceBuilder:
    """Events of one rank; ``write`` produces the Chrome-format file torch.profiler exports."""

    rank: int = 0
    world_size: int | None = None
    events: list[dict[str, Any]] = field(default_factory=list)
    next_corr: int = 1

    def launch(
        self,
        cpu_start: float,
        cpu_dur: float,
        gpu: list[tuple[float, float]],
        *,
        name: str = "cudaLaunchKernel",
        kernel: str = "ampere_bf16_s16816gemm_bf16_128x64",
        cat: str = "kernel",
        stream: int = 7,
        device: int = 0,
        nbytes: float | None = None,
    ) -> int:
        """One runtime call and the GPU operations it launched (one correlation id)."""
        corr = self.next_corr
        self.next_corr += 1
        self.events.append(
            {
                "ph": "X",
                "cat": "cuda_runtime",
                "name": name,
                "pid": 100,
                "tid": 100,
                "ts": cpu_start,
                "dur": cpu_dur,
                "args": {"correlation": corr},
            }
        )
        for start, dur in gpu:
            self.gpu(
                start,
                dur,
                kernel=kernel,
                cat=cat,
                stream=stream,
                corr=corr,
                device=device,
                nbytes=nbytes,
            )
        return corr

    def gpu(
        self,
        start: float,
        dur: float,
        *,
        kernel: str = "ampere_bf16_s16816gemm_bf16_128x64",
        cat: str = "kernel",
        stream: int = 7,
        corr: int | None = None,
        device: int = 0,
        nbytes: float | None = None,
    ) -> None:
        args: dict[str, Any] = {"device": device, "stream": stream}
        if corr is not None:
            args["correlation"] = corr
        if nbytes is not None:
            args["bytes"] = nbytes
        self.events.append(
            {
                "ph": "X",
                "cat": cat,
                "name": kernel,
                "pid": device,
                "tid": stream,
                "ts": start,
                "dur": dur,
                "args": args,
            }
        )

    def step(self, name: str, start: float, dur: float, *, gpu: bool) -> None:
        self.events.append(
            {
                "ph": "X",
                "cat": "gpu_user_annotation" if gpu else "user_annotation",
                "name": name,
                "pid": 0 if gpu else 100,
                "tid": 7 if gpu else 100,
                "ts": start,
                "dur": dur,
                "args": {},
            }
        )

    def document(self, schema_version: Any = 1) -> dict[str, Any]:
        dist: dict[str, Any] = {"rank": self.rank}
        if self.world_size is not None:
            dist["world_size"] = self.world_size
        doc: dict[str, Any] = {"distributedInfo": dist, "traceEvents": self.events}
        if schema_version is not None:
            doc["schemaVersion"] = schema_version
        return doc

    def write(self, path: Path, *, schema_version: Any = 1) -> Path:
        text = json.dumps(self.document(schema_version), indent=1)
        if path.name.endswith(".gz"):
            path.write_bytes(gzip.compress(text.encode()))
        else:
            path.write_text(text)
        return path
