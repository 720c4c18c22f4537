"""What the agent scrapes: ``--target KIND=URL`` arguments and targets YAML files.

A URL without a path is a server's base URL and gets the kind's known paths (``/metrics``;
TensorRT-LLM: ``/metrics`` for the JSON iteration stats and ``/prometheus/metrics``); a URL
with a path is used as given. A YAML file lists many targets::

    interval: 5s            # default for its targets (else the command line's --interval)
    labels: {pool: chat}    # default labels
    targets:
      - kind: vllm
        url: http://10.0.0.5:8000
        name: llama-a       # default: <kind>@<host:port>
        interval: 2s
        labels: {node: gpu-1, model: llama-3.1-8b}
      - kind: dcgm
        url: http://10.0.0.5:9400
      - kind: nvml          # the local GPUs; url "fake" for the built-in fake NVML

Labels ``node``, ``pool`` and ``model`` also become columns of the store's target table; an
engine's ``model`` is discovered from ``/v1/models`` when not given.
"""

from __future__ import annotations

import math
import socket
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml

from slotune.collector.agent.base import SourceKind
from slotune.collector.errors import ConfigError
from slotune.collector.redact import redact_url
from slotune.collector.slo import parse_duration_s

DEFAULT_INTERVAL_S = 5.0
MAX_TARGET_NAME_CHARS = 200  # the store's target.name column
_KINDS = ", ".join(k.value for k in SourceKind)
_DEFAULT_PATHS: dict[SourceKind, tuple[str, ...]] = {
    SourceKind.VLLM: ("/metrics",),
    SourceKind.SGLANG: ("/metrics",),
    SourceKind.TRTLLM: ("/metrics", "/prometheus/metrics"),
    SourceKind.DCGM: ("/metrics",),
    SourceKind.NVML: (),
    SourceKind.PROMETHEUS: ("/federate",),
}


@dataclass(frozen=True, slots=True)
class TargetSpec:
    """One target as the agent scrapes it.

    Attributes:
        name: unique name (the store's target name).
        kind: what it is.
        url: the URL the user gave (base or explicit), empty for local NVML.
        metrics_urls: the URLs scraped each interval.
        labels: node / pool / model and any other labels.
        interval_s: seconds between scrapes.
    """

    name: str
    kind: SourceKind
    url: str
    metrics_urls: tuple[str, ...]
    labels: Mapping[str, str] = field(default_factory=dict)
    interval_s: float = DEFAULT_INTERVAL_S

    @property
    def base_url(self) -> str:
        """scheme://host:port of the URL (where ``/v1/models`` lives)."""
        parts = urlsplit(self.url)
        return f"{parts.scheme}://{parts.netloc}" if parts.netloc else ""

    def with_labels(self, extra: Mapping[str, str]) -> TargetSpec:
        """A copy with labels added (existing ones win)."""
        return replace(self, labels={**extra, **self.labels})


def _kind(text: str, where: str) -> SourceKind:
    try:
        return SourceKind(text.strip().lower())
    except ValueError:
        raise ConfigError(f"{where}: unknown target kind {text!r}; use one of {_KINDS}") from None


def metrics_urls(kind: SourceKind, url: str) -> tuple[str, ...]:
    """The URLs to scrape for a target URL (known paths for a base URL, else as given)."""
    if kind is SourceKind.NVML:
        return ()
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - parsing the port is the check
    except ValueError as e:
        raise ConfigError(
            f"target URL {redact_url(url)!r} is not a URL ({e}); write http://host:port[/path]"
        ) from e
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ConfigError(f"target URL {redact_url(url)!r} must look like http://host:port[/path]")
    if parts.path not in ("", "/"):
        return (url,)
    base = f"{parts.scheme}://{parts.netloc}"
    return tuple(base + p for p in _DEFAULT_PATHS[kind])


def default_name(kind: SourceKind, url: str, node: str) -> str:
    """``kind@host:port`` (``nvml@node`` for local GPUs)."""
    if kind is SourceKind.NVML:
        return f"nvml@{node}"
    netloc = urlsplit(url).netloc
    return f"{kind.value}@{netloc.rpartition('@')[2]}"  # never the userinfo


def make_target(
    kind: SourceKind,
    url: str,
    *,
    name: str = "",
    labels: Mapping[str, str] | None = None,
    interval_s: float = DEFAULT_INTERVAL_S,
    node: str = "",
) -> TargetSpec:
    """Build a target, resolving its URLs and default name."""
    if not (math.isfinite(interval_s) and interval_s > 0):
        raise ConfigError(
            f"target {name or url!r}: interval must be a positive number of seconds, "
            f"got {interval_s}"
        )
    if len(name) > MAX_TARGET_NAME_CHARS:
        raise ConfigError(
            f"target name {name[:40]!r}...: {len(name)} characters; at most {MAX_TARGET_NAME_CHARS}"
        )
    node = node or socket.gethostname()
    all_labels = {"node": node, **{str(k): str(v) for k, v in (labels or {}).items()}}
    urls = metrics_urls(kind, url)  # first: it refuses what is not a URL
    return TargetSpec(
        name=name or default_name(kind, url, all_labels["node"]),
        kind=kind,
        url=url,
        metrics_urls=urls,
        labels=all_labels,
        interval_s=interval_s,
    )


def parse_target_arg(
    text: str, *, interval_s: float = DEFAULT_INTERVAL_S, node: str = ""
) -> TargetSpec:
    """Parse ``KIND=URL`` (or bare ``nvml``) from the command line.

    Raises:
        ConfigError: unknown kind or a URL that is not http(s)://host:port[/path].
    """
    kind_text, sep, url = text.partition("=")
    kind = _kind(kind_text, f"--target {text!r}")
    if not sep and kind is not SourceKind.NVML:
        raise ConfigError(f"--target {text!r}: write KIND=URL, e.g. vllm=http://127.0.0.1:8000")
    return make_target(kind, url.strip(), interval_s=interval_s, node=node)


def load_targets_file(
    path: str | Path, *, node: str = "", interval_s: float = DEFAULT_INTERVAL_S
) -> list[TargetSpec]:
    """Read a targets YAML file (format in the module docstring).

    Intervals: a target's own, else the file's ``interval``, else ``interval_s`` (the
    command line's ``--interval``).

    Raises:
        ConfigError: unreadable file, bad YAML, unknown fields' values, duplicate names.
    """
    try:
        doc = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as e:
        raise ConfigError(f"targets file {str(path)!r} cannot be read: {e}") from None
    except UnicodeDecodeError as e:
        raise ConfigError(
            f"targets file {str(path)!r} is not UTF-8 text ({e.reason} at byte {e.start})"
        ) from None
    except RecursionError:
        raise ConfigError(
            f"targets file {str(path)!r} nests deeper than YAML can be read; a targets file "
            "is a mapping with a 'targets' list"
        ) from None
    if not isinstance(doc, dict) or not isinstance(doc.get("targets"), list):
        raise ConfigError(f"targets file {str(path)!r} must be a mapping with a 'targets' list")
    default_interval = _interval(doc.get("interval"), f"{path}: interval", interval_s)
    default_labels = _labels(doc.get("labels"), f"{path}: labels")
    targets = [
        _entry(e, i, path, default_interval, default_labels, node)
        for i, e in enumerate(doc["targets"])
    ]
    check_unique(targets)
    return targets


def _entry(
    entry: Any,
    index: int,
    path: str | Path,
    interval_s: float,
    labels: Mapping[str, str],
    node: str,
) -> TargetSpec:
    where = f"{path}: targets[{index}]"
    if not isinstance(entry, dict) or "kind" not in entry:
        raise ConfigError(f"{where} must be a mapping with at least 'kind' (and 'url')")
    kind = _kind(str(entry["kind"]), where)
    url = str(entry.get("url", ""))
    if kind is not SourceKind.NVML and not url:
        raise ConfigError(f"{where}: 'url' is required for kind {kind.value}")
    entry_labels = {**labels, **_labels(entry.get("labels"), f"{where}.labels")}
    return make_target(
        kind,
        url,
        name=str(entry.get("name", "")),
        labels=entry_labels,
        interval_s=_interval(entry.get("interval"), f"{where}.interval", interval_s),
        node=entry_labels.get("node", node),
    )


def _interval(value: Any, where: str, default: float) -> float:
    if value is None:
        return default
    return parse_duration_s(value, field_name=where)


def _labels(value: Any, where: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ConfigError(f"{where} must be a mapping of label names to values")
    return {str(k): str(v) for k, v in value.items()}


def check_unique(targets: Sequence[TargetSpec]) -> None:
    """Raise ConfigError when two targets share a name."""
    seen: set[str] = set()
    for t in targets:
        if t.name in seen:
            raise ConfigError(f"two targets are named {t.name!r}; give each a distinct 'name'")
        seen.add(t.name)
