"""The configuration a running vLLM server really has, as far as it can be read.

vLLM 0.32 does not expose its scheduler settings over HTTP. What it does expose:

- ``GET /version``: the release;
- ``GET /v1/models``: ``max_model_len`` and the model path (``root``);
- ``/metrics``: ``vllm:cache_config_info``, a gauge whose labels are the cache settings
  (``block_size``, ``gpu_memory_utilization``, ``enable_prefix_caching``, ``cache_dtype``,
  ``num_gpu_blocks``, ``kv_cache_memory_bytes``...).

``max_num_seqs``, ``max_num_batched_tokens``, ``enable_chunked_prefill`` and the other
scheduler flags are only in the server's command line: they are read from it when the server
runs on this machine (the process that listens on the endpoint's port, found through
``/proc``), and otherwise listed as unknown. A flag not on that command line has vLLM's own
default for the device, which slotune does not guess.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
from prometheus_client.parser import text_string_to_metric_families

# cache_config_info label -> the tuner's parameter name.
_CACHE_LABELS = {
    "block_size": "block_size",
    "gpu_memory_utilization": "gpu_memory_utilization",
    "enable_prefix_caching": "enable_prefix_caching",
    "cache_dtype": "kv_cache_dtype",
}
# Figures of the cache worth showing though they are no flag.
_CACHE_FIGURES = ("num_gpu_blocks", "kv_cache_memory_bytes", "kv_cache_max_concurrency")
_LOOPBACK = {"127.0.0.1", "localhost", "::1"}
# Where a trial's engine figures keep the server's configuration.
SERVER_CONFIG_KEY = "server_config"


@dataclass(frozen=True, slots=True)
class ServerConfig:
    """What a server runs.

    Attributes:
        values: parameter -> value, for those that could be read.
        sources: parameter -> where it was read (``/v1/models``, ``cache_config_info``,
            ``command line``).
        unknown: parameters of the study's space that could not be read.
        figures: cache figures that are no flag (``num_gpu_blocks``...).
        version: the server's release, when it says.
    """

    values: dict[str, Any] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict)
    unknown: tuple[str, ...] = ()
    figures: dict[str, Any] = field(default_factory=dict)
    version: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "values": self.values,
            "sources": self.sources,
            "unknown": list(self.unknown),
            "figures": self.figures,
            "version": self.version,
        }


def read_server_config(url: str, params: Sequence[str], timeout_s: float = 10.0) -> ServerConfig:
    """Read what the vLLM server at ``url`` runs; ``params`` are the names to look for."""
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    figures: dict[str, Any] = {}
    version = None
    with httpx.Client(timeout=timeout_s) as client:
        version = _get_json(client, url + "/version").get("version")
        models = _get_json(client, url + "/v1/models").get("data") or []
        if models and isinstance(models[0], dict) and "max_model_len" in models[0]:
            values["max_model_len"] = models[0]["max_model_len"]
            sources["max_model_len"] = "/v1/models"
        try:
            metrics = client.get(url + "/metrics").text
        except httpx.HTTPError:
            metrics = ""
    labels = cache_config_labels(metrics)
    for label, param in _CACHE_LABELS.items():
        if label in labels:
            values[param] = _typed(labels[label])
            sources[param] = "cache_config_info"
    figures.update({k: _typed(labels[k]) for k in _CACHE_FIGURES if k in labels})
    argv = listening_process_argv(url)
    if argv is not None:
        # What the server answers itself wins over what it was asked for.
        for param, value in command_line_values(argv, params).items():
            if param not in values:
                values[param] = value
                sources[param] = "command line"
    unknown = tuple(p for p in params if p not in values)
    return ServerConfig(values, sources, unknown, figures, version)


def _get_json(client: httpx.Client, url: str) -> dict[str, Any]:
    try:
        body = client.get(url).json()
    except (httpx.HTTPError, ValueError):
        return {}
    return body if isinstance(body, dict) else {}


def cache_config_labels(metrics_text: str) -> dict[str, str]:
    """The labels of ``vllm:cache_config_info`` in a ``/metrics`` text ({} when absent)."""
    for family in text_string_to_metric_families(metrics_text):
        if family.name == "vllm:cache_config_info":
            for sample in family.samples:
                return dict(sample.labels)
    return {}


def _typed(text: str) -> Any:
    if text in ("True", "False"):
        return text == "True"
    if text == "None":
        return None
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    return text


def command_line_values(argv: Sequence[str], params: Sequence[str]) -> dict[str, Any]:
    """The values of ``params`` given on a vLLM command line (``--max-num-seqs 16``,
    ``--max_num_seqs=16``, ``--enable-x`` / ``--no-enable-x``); flags absent stay absent."""
    out: dict[str, Any] = {}
    args = list(argv)
    for i, arg in enumerate(args):
        if not arg.startswith("--"):
            continue
        key, eq, inline = arg[2:].partition("=")
        name = key.replace("-", "_")
        if name.startswith("no_") and name[3:] in params:
            out[name[3:]] = False
        elif name in params:
            nxt = args[i + 1] if i + 1 < len(args) else None
            if eq:
                out[name] = _typed(inline)
            elif nxt is None or nxt.startswith("--"):
                out[name] = True
            else:
                out[name] = _typed(nxt)
    return out


def listening_process_argv(url: str) -> list[str] | None:
    """The command line of the process on this machine that listens on ``url``'s port, or
    None (a remote host, no such process visible, or not Linux)."""
    parts = urlsplit(url)
    if parts.hostname not in _LOOPBACK or parts.port is None:
        return None
    inodes = _listening_inodes(parts.port)
    if not inodes:
        return None
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            fds = os.listdir(proc / "fd")
        except OSError:
            continue
        for fd in fds:
            try:
                target = os.readlink(proc / "fd" / fd)
            except OSError:
                continue
            m = re.fullmatch(r"socket:\[(\d+)\]", target)
            if m and m.group(1) in inodes:
                try:
                    raw = (proc / "cmdline").read_bytes()
                except OSError:
                    return None
                return [a.decode(errors="replace") for a in raw.split(b"\0") if a]
    return None


def _listening_inodes(port: int) -> set[str]:
    listen_state = "0A"
    out = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            rows = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            cols = row.split()
            if len(cols) > 9 and cols[3] == listen_state and _port_of(cols[1]) == port:
                out.add(cols[9])
    return out


def _port_of(address: str) -> int:
    return int(address.rsplit(":", 1)[1], 16)
