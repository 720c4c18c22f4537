"""The configuration a running server really has, as far as it can be read.

Each engine exposes a different part of it; everything the server answers is read, and what
it does not answer stays absent, so no engine is named here:

- SGLang: ``GET /server_info`` (``/get_server_info`` before SGLang deprecated that path)
  returns every server argument as the server resolved it at start (``max_running_requests``,
  ``chunked_prefill_size``, ``mem_fraction_static``, ``schedule_policy``...), the scheduler's
  ``max_total_num_tokens`` and ``max_req_input_len``, and one internal state per data-parallel
  rank (``effective_max_running_requests_per_dp``, ``memory_usage``); ``/model_info``
  (``/get_model_info``) names the model. Only the study's parameters and a few figures are
  kept: the response also holds ``api_key`` and TLS settings, which are never stored.
- vLLM 0.32 does not expose its scheduler settings over HTTP. ``GET /version`` gives the
  release and ``/metrics`` has ``vllm:cache_config_info``, a gauge whose labels are the cache
  settings (``block_size``, ``gpu_memory_utilization``, ``enable_prefix_caching``,
  ``cache_dtype``, ``num_gpu_blocks``...). ``max_num_seqs``, ``max_num_batched_tokens`` and
  the other scheduler flags are only on the server's command line.
- Any OpenAI-compatible server: ``GET /v1/models`` gives ``max_model_len`` and the model.

The command line is read when the server runs on this machine (the process that listens on the
endpoint's port, found through ``/proc``). What the server answers itself wins over what it
was asked for; a parameter found nowhere is listed as unknown, and has the engine's own default
for the device, which slotune does not guess.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
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
# SGLang's routes, newest first: 0.5 deprecated the ``get_`` forms and still serves them.
SERVER_INFO_PATHS = ("/server_info", "/get_server_info")
MODEL_INFO_PATHS = ("/model_info", "/get_model_info")
# What SGLang's scheduler decided at start, beside the server arguments.
_SERVER_INFO_FIGURES = ("max_total_num_tokens", "max_req_input_len")
_INTERNAL_STATE_FIGURES = ("effective_max_running_requests_per_dp", "memory_usage")
# Where a trial's engine figures keep the server's configuration.
SERVER_CONFIG_KEY = "server_config"


@dataclass(frozen=True, slots=True)
class ServerConfig:
    """What a server runs.

    Attributes:
        values: parameter -> value, for those that could be read.
        sources: parameter -> where it was read (``/server_info``, ``/v1/models``,
            ``cache_config_info``, ``command line``).
        unknown: parameters of the study's space that could not be read.
        figures: figures that are no flag (``num_gpu_blocks``, ``max_total_num_tokens``...).
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
    """Read what the server at ``url`` runs; ``params`` are the names to look for (the
    engine's own argument names, as the study's space spells them)."""
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    figures: dict[str, Any] = {}

    def found(param: str, value: Any, source: str) -> None:
        if param not in values:
            values[param] = value
            sources[param] = source

    with httpx.Client(timeout=timeout_s) as client:
        info_path, info = _first_json(client, url, SERVER_INFO_PATHS)
        _, model_info = _first_json(client, url, MODEL_INFO_PATHS)
        version = info.get("version") or _get_json(client, url + "/version").get("version")
        models = _get_json(client, url + "/v1/models").get("data") or []
        try:
            metrics = client.get(url + "/metrics").text
        except httpx.HTTPError:
            metrics = ""
    # Only the study's parameters of SGLang's answer: it holds every server argument.
    for param in params:
        if param in info:
            found(param, info[param], info_path)
    figures.update(server_info_figures(info, model_info))
    labels = cache_config_labels(metrics)
    for label, param in _CACHE_LABELS.items():
        if label in labels:
            found(param, _typed(labels[label]), "cache_config_info")
    figures.update({k: _typed(labels[k]) for k in _CACHE_FIGURES if k in labels})
    if models and isinstance(models[0], dict) and "max_model_len" in models[0]:
        found("max_model_len", models[0]["max_model_len"], "/v1/models")
    argv = listening_process_argv(url)
    if argv is not None:
        for param, value in command_line_values(argv, params).items():
            found(param, value, "command line")
    unknown = tuple(p for p in params if p not in values)
    return ServerConfig(values, sources, unknown, figures, version if version else None)


def server_info_figures(info: Mapping[str, Any], model_info: Mapping[str, Any]) -> dict[str, Any]:
    """The figures of SGLang's ``/server_info`` and ``/model_info`` worth showing beside the
    configuration: the KV pool in tokens, the running cap it left per data-parallel rank and
    the memory split (GB). Nothing else of the response is kept."""
    out = {k: info[k] for k in _SERVER_INFO_FIGURES if k in info}
    states = [s for s in info.get("internal_states") or () if isinstance(s, dict)]
    if states:
        out["num_dp_ranks"] = len(states)
        for key in _INTERNAL_STATE_FIGURES:
            if key in states[0]:
                out[key] = states[0][key]
    if "model_path" in model_info:
        out["model_path"] = model_info["model_path"]
    return out


def _first_json(client: httpx.Client, url: str, paths: Sequence[str]) -> tuple[str, dict[str, Any]]:
    """The first of ``paths`` that answers 200 with a JSON object, and that object."""
    for path in paths:
        try:
            response = client.get(url + path)
        except httpx.HTTPError:
            continue
        if response.status_code != 200:
            continue
        try:
            body = response.json()
        except ValueError:
            continue
        if isinstance(body, dict):
            return path, body
    return "", {}


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
