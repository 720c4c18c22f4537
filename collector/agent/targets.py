"""What the agent scrapes: ``--scrape KIND=URL`` arguments and targets YAML files.

A URL without a path is a server's base URL and gets the kind's known paths (``/metrics``;
TensorRT-LLM: ``/metrics`` for the JSON iteration stats and ``/prometheus/metrics``); a URL
with a path is used as given. A YAML file lists many targets::

    interval: 5s            # default for its targets (else the command line's --interval)
    scrape_timeout: 4s      # default: --scrape-timeout, else 10 s or the interval if less
    labels: {pool: chat}    # default labels
    targets:
      - kind: vllm
        url: http://10.0.0.5:8000
        name: llama-a       # default: <kind>@<host:port>
        interval: 2s
        scrape_timeout: 1s  # at most the interval
        body_size_limit: 16MiB  # default 64 MiB
        labels: {node: gpu-1, model: llama-3.1-8b}
      - kind: dcgm
        url: http://10.0.0.5:9400
      - kind: nvml          # the local GPUs; url "fake" for the built-in fake NVML

Labels ``node``, ``pool`` and ``model`` also become columns of the store's target table; an
engine's ``model`` is discovered from ``/v1/models`` when not given. ``scrape_timeout`` and
``body_size_limit`` mean what they mean to Prometheus: the time one scrape may take (fetch
and parse), and the largest body read; a scrape past either fails, and the target is down.
A scrape timeout that is inherited (from the file or the command line) is cut to a shorter
interval; one given for the target itself must not exceed its interval.
"""

from __future__ import annotations

import math
import re
import socket
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from slotune.collector.agent.budget import DEFAULT_BODY_SIZE_LIMIT
from slotune.collector.durations import parse_duration_s
from slotune.collector.errors import ConfigError
from slotune.collector.redact import redact_url
from slotune.collector.textfile import read_text
from slotune.collector.vocabulary import SourceKind, choices
from slotune.collector.yamlfile import read_yaml

DEFAULT_INTERVAL_S = 5.0
DEFAULT_SCRAPE_TIMEOUT_S = 10.0  # Prometheus' default
MAX_TARGET_NAME_CHARS = 200  # the store's target.name column
_KINDS = choices(SourceKind)


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
        scrape_timeout_s: seconds one scrape may take, fetch and parse (the agent cuts it to
            the interval).
        max_body_bytes: the largest body read from one URL.
    """

    name: str
    kind: SourceKind
    url: str
    metrics_urls: tuple[str, ...]
    labels: Mapping[str, str] = field(default_factory=dict)
    interval_s: float = DEFAULT_INTERVAL_S
    scrape_timeout_s: float = DEFAULT_SCRAPE_TIMEOUT_S
    max_body_bytes: int = DEFAULT_BODY_SIZE_LIMIT

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
    if not kind.needs_url:
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
    return tuple(base + p for p in kind.default_paths)


def default_name(kind: SourceKind, url: str, node: str) -> str:
    """``kind@host:port`` (``nvml@node`` for local GPUs)."""
    if not kind.needs_url:
        return f"{kind.value}@{node}"
    netloc = urlsplit(url).netloc
    return f"{kind.value}@{netloc.rpartition('@')[2]}"  # never the userinfo


def make_target(
    kind: SourceKind,
    url: str,
    *,
    name: str = "",
    labels: Mapping[str, str] | None = None,
    interval_s: float = DEFAULT_INTERVAL_S,
    scrape_timeout_s: float | None = None,
    max_body_bytes: int = DEFAULT_BODY_SIZE_LIMIT,
    node: str = "",
) -> TargetSpec:
    """Build a target, resolving its URLs and default name.

    Args:
        scrape_timeout_s: the target's own scrape timeout, at most ``interval_s``; None:
            10 s or the interval if that is less.
    """
    if not (math.isfinite(interval_s) and interval_s > 0):
        raise ConfigError(
            f"target {name or url!r}: interval must be a positive number of seconds, "
            f"got {interval_s}"
        )
    if scrape_timeout_s is None:
        scrape_timeout_s = min(DEFAULT_SCRAPE_TIMEOUT_S, interval_s)
    if not (math.isfinite(scrape_timeout_s) and 0 < scrape_timeout_s <= interval_s):
        raise ConfigError(
            f"target {name or url!r}: scrape_timeout {scrape_timeout_s:g} s must be more than "
            f"0 and at most the interval ({interval_s:g} s); shorten it or lengthen the interval"
        )
    if max_body_bytes <= 0:
        raise ConfigError(
            f"target {name or url!r}: body_size_limit must be a positive size, e.g. 16MiB"
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
        scrape_timeout_s=scrape_timeout_s,
        max_body_bytes=max_body_bytes,
    )


def parse_target_arg(
    text: str,
    *,
    interval_s: float = DEFAULT_INTERVAL_S,
    scrape_timeout_s: float | None = None,
    node: str = "",
) -> TargetSpec:
    """Parse ``KIND=URL`` (or bare ``nvml``) from the command line.

    ``scrape_timeout_s`` (``--scrape-timeout``) is cut to ``interval_s`` when longer.

    Raises:
        ConfigError: unknown kind or a URL that is not http(s)://host:port[/path].
    """
    kind_text, sep, url = text.partition("=")
    kind = _kind(kind_text, f"--scrape {text!r}")
    if not sep and kind.needs_url:
        raise ConfigError(f"--scrape {text!r}: write KIND=URL, e.g. vllm=http://127.0.0.1:8000")
    return make_target(
        kind,
        url.strip(),
        interval_s=interval_s,
        scrape_timeout_s=_inherited_timeout(scrape_timeout_s, interval_s),
        node=node,
    )


def _inherited_timeout(timeout_s: float | None, interval_s: float) -> float | None:
    """A default scrape timeout, cut to a shorter interval (as Prometheus does)."""
    return None if timeout_s is None else min(timeout_s, interval_s)


def load_targets_file(
    path: str | Path,
    *,
    node: str = "",
    interval_s: float = DEFAULT_INTERVAL_S,
    scrape_timeout_s: float | None = None,
) -> list[TargetSpec]:
    """Read a targets YAML file (format in the module docstring).

    Intervals: a target's own, else the file's ``interval``, else ``interval_s`` (the
    command line's ``--interval``); scrape timeouts likewise, else ``scrape_timeout_s``
    (``--scrape-timeout``), else 10 s or the interval if that is less.

    Raises:
        ConfigError: unreadable file, bad YAML, unknown fields' values, duplicate names.
    """
    text = read_text(path, "targets file", ConfigError)
    doc, _ = read_yaml(text, source=str(path), error=ConfigError)
    if not isinstance(doc, dict) or not isinstance(doc.get("targets"), list):
        raise ConfigError(f"targets file {str(path)!r} must be a mapping with a 'targets' list")
    defaults = _Defaults(
        interval_s=_interval(doc.get("interval"), f"{path}: interval", interval_s),
        scrape_timeout_s=_optional_duration(
            doc.get("scrape_timeout"), f"{path}: scrape_timeout", scrape_timeout_s
        ),
        max_body_bytes=_size_bytes(
            doc.get("body_size_limit"), f"{path}: body_size_limit", DEFAULT_BODY_SIZE_LIMIT
        ),
        labels=_labels(doc.get("labels"), f"{path}: labels"),
    )
    targets = [_entry(e, i, path, defaults, node) for i, e in enumerate(doc["targets"])]
    check_unique(targets)
    return targets


@dataclass(frozen=True, slots=True)
class _Defaults:
    """What a targets file gives every target that does not say otherwise."""

    interval_s: float
    scrape_timeout_s: float | None
    max_body_bytes: int
    labels: Mapping[str, str]


def _entry(entry: Any, index: int, path: str | Path, defaults: _Defaults, node: str) -> TargetSpec:
    where = f"{path}: targets[{index}]"
    if not isinstance(entry, dict) or "kind" not in entry:
        raise ConfigError(f"{where} must be a mapping with at least 'kind' (and 'url')")
    kind = _kind(str(entry["kind"]), where)
    url = str(entry.get("url", ""))
    if kind.needs_url and not url:
        raise ConfigError(f"{where}: 'url' is required for kind {kind.value}")
    entry_labels = {**defaults.labels, **_labels(entry.get("labels"), f"{where}.labels")}
    interval_s = _interval(entry.get("interval"), f"{where}.interval", defaults.interval_s)
    own_timeout_s = _optional_duration(entry.get("scrape_timeout"), f"{where}.scrape_timeout", None)
    return make_target(
        kind,
        url,
        name=str(entry.get("name", "")),
        labels=entry_labels,
        interval_s=interval_s,
        scrape_timeout_s=own_timeout_s
        if own_timeout_s is not None
        else _inherited_timeout(defaults.scrape_timeout_s, interval_s),
        max_body_bytes=_size_bytes(
            entry.get("body_size_limit"), f"{where}.body_size_limit", defaults.max_body_bytes
        ),
        node=entry_labels.get("node", node),
    )


def _interval(value: Any, where: str, default: float) -> float:
    if value is None:
        return default
    return parse_duration_s(value, field_name=where)


def _optional_duration(value: Any, where: str, default: float | None) -> float | None:
    if value is None:
        return default
    return parse_duration_s(value, field_name=where)


# Prometheus' sizes: B, KB, MB, GB counted in powers of 1024 (KiB, MiB, GiB also read)
_SIZE_RE = re.compile(r"\s*+(\d{1,12}(?:\.\d{1,6})?)\s*+([KMG]i?B|B)?\s*+")
_SIZE_SHIFT = {"B": 0, "KB": 10, "KiB": 10, "MB": 20, "MiB": 20, "GB": 30, "GiB": 30}


def _size_bytes(value: Any, where: str, default: int) -> int:
    if value is None:
        return default
    m = None if isinstance(value, bool) else _SIZE_RE.fullmatch(str(value))
    size = int(float(m[1]) * (1 << _SIZE_SHIFT[m[2] or "B"])) if m else 0
    if size <= 0:
        raise ConfigError(
            f"{where}: {str(value)[:40]!r} is not a size; write a positive number of bytes "
            "with a unit (B, KB, MB, GB), e.g. 16MB"
        )
    return size


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
