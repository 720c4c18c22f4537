"""Notifications: Alertmanager v2, Slack-compatible webhooks and the log.

A notifier gets each state change once (``firing`` / ``resolved``); a firing alert that is
neither silenced nor acknowledged is sent again every ``renotify_s``. Delivery retries with
exponential backoff; a receiver that keeps failing is logged and skipped, never stops the
evaluator. URLs are shown with their secret parts (path tokens, query, user info) replaced
by ``***``: Slack and most webhook URLs carry their token in the path.
"""

from __future__ import annotations

import json
import logging
import time
import urllib.error
import urllib.request
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence, Set
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit

from slotune.collector.alerts.evaluator import InstanceKey, RuleState, RuleStatus, instance_key
from slotune.collector.errors import ConfigError, SlotuneError

log = logging.getLogger(__name__)


class NotifyError(SlotuneError):
    """A receiver did not accept a notification after every retry."""


def redact(url: str) -> str:
    """A URL safe to print: scheme, host and port only, the rest as ``***``."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    port = f":{parts.port}" if parts.port else ""
    rest = "/***" if parts.path.strip("/") or parts.query else ""
    return f"{parts.scheme}://{host}{port}{rest}"


def _rfc3339(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).isoformat().replace("+00:00", "Z")


class Notifier(ABC):
    """Delivers alert state changes somewhere. ``send`` raises :class:`NotifyError`."""

    name: str

    @abstractmethod
    def send(self, statuses: Sequence[RuleStatus]) -> None: ...


class LogNotifier(Notifier):
    name = "log"

    def send(self, statuses: Sequence[RuleStatus]) -> None:
        for s in statuses:
            what = "FIRING" if s.state is RuleState.FIRING else "RESOLVED"
            log.warning("[%s] %s %s: %s", s.severity, what, s.rule, s.message)


@dataclass
class WebhookNotifier(Notifier):
    """POSTs JSON to a URL with retries (``attempts`` tries, backoff doubling from
    ``backoff_s``); an answer other than 2xx or no answer within ``timeout_s`` is a failure."""

    url: str
    headers: Mapping[str, str] = field(default_factory=dict)
    timeout_s: float = 5.0
    attempts: int = 3
    backoff_s: float = 0.5
    sleep: Callable[[float], None] = time.sleep
    name: str = "webhook"

    def payload(self, statuses: Sequence[RuleStatus]) -> Any:
        raise NotImplementedError

    def send(self, statuses: Sequence[RuleStatus]) -> None:
        body = json.dumps(self.payload(statuses)).encode()
        problem = ""
        for attempt in range(self.attempts):
            request = urllib.request.Request(
                self.url,
                data=body,
                method="POST",
                headers={"Content-Type": "application/json", **self.headers},
            )
            try:
                with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                    response.read()
                return
            except urllib.error.HTTPError as e:
                e.close()
                problem = f"answered HTTP {e.code}"
            except (urllib.error.URLError, TimeoutError, OSError) as e:
                reason = getattr(e, "reason", e)
                problem = "timed out" if isinstance(reason, TimeoutError) else "unreachable"
            if attempt + 1 < self.attempts:
                self.sleep(self.backoff_s * 2**attempt)
        raise NotifyError(
            f"{self.name} receiver {redact(self.url)} {problem} after {self.attempts} attempts; "
            "check the URL and that the receiver is up"
        )


@dataclass
class AlertmanagerNotifier(WebhookNotifier):
    """Alertmanager's ``POST /api/v2/alerts`` (give the Alertmanager base URL)."""

    name: str = "alertmanager"

    def __post_init__(self) -> None:
        if not self.url.rstrip("/").endswith("/api/v2/alerts"):
            self.url = self.url.rstrip("/") + "/api/v2/alerts"

    def payload(self, statuses: Sequence[RuleStatus]) -> list[dict[str, Any]]:
        out = []
        for s in statuses:
            alert: dict[str, Any] = {
                "labels": {"alertname": s.rule, **s.labels},
                "annotations": {
                    "summary": s.message,
                    "value": f"{s.value:g}" if s.value is not None else "",
                },
                "startsAt": _rfc3339(s.at_ts),
                "generatorURL": "slotune://alerts/" + s.rule,
            }
            if s.state is not RuleState.FIRING:
                alert["endsAt"] = _rfc3339(s.at_ts)
            out.append(alert)
        return out


@dataclass
class SlackNotifier(WebhookNotifier):
    """A Slack-compatible incoming webhook (``{"text": ...}``)."""

    name: str = "slack"

    def payload(self, statuses: Sequence[RuleStatus]) -> dict[str, str]:
        lines = []
        for s in statuses:
            icon = ":rotating_light:" if s.state is RuleState.FIRING else ":white_check_mark:"
            what = "FIRING" if s.state is RuleState.FIRING else "RESOLVED"
            lines.append(f"{icon} *{what}* [{s.severity}] {s.rule}: {s.message}")
        return {"text": "\n".join(lines)}


def make_notifier(spec: str) -> Notifier:
    """``log``, ``alertmanager=URL`` or ``slack=URL`` (also ``webhook=URL``: Slack format).

    Raises:
        ConfigError: an unknown kind or a URL that is not http(s).
    """
    if spec == "log":
        return LogNotifier()
    kind, _, url = spec.partition("=")
    if urlsplit(url).scheme not in ("http", "https"):
        raise ConfigError(
            f"--notify {kind}=…: give an http(s) URL, e.g. alertmanager=http://alertmanager:9093"
        )
    if kind == "alertmanager":
        return AlertmanagerNotifier(url)
    if kind in ("slack", "webhook"):
        return SlackNotifier(url)
    raise ConfigError(f"--notify {kind!r} is unknown; use log, alertmanager=URL or slack=URL")


@dataclass
class Dispatcher:
    """Sends each round's state changes (and re-notifications) to every notifier.

    Attributes:
        notifiers: where to send.
        renotify_s: a still-firing alert is sent again after this long (0: never).
    """

    notifiers: Sequence[Notifier]
    renotify_s: float = 4 * 3600.0
    _sent_at: dict[InstanceKey, float] = field(default_factory=dict)

    def due(
        self, statuses: Sequence[RuleStatus], acked: Set[InstanceKey] = frozenset()
    ) -> list[RuleStatus]:
        """The statuses to send now: changes, and firing alerts due again — neither silenced
        nor, for re-notifications, acknowledged (``acked``: instance keys)."""
        out = []
        for s in statuses:
            key = instance_key(s.rule, s.labels)
            if s.silenced_until is not None:
                continue
            if s.changed is not None:
                out.append(s)
            elif s.state is RuleState.FIRING and self.renotify_s > 0 and key not in acked:
                sent = self._sent_at.get(key)
                if sent is not None and s.at_ts - sent >= self.renotify_s:
                    out.append(s)
        return out

    def dispatch(
        self, statuses: Sequence[RuleStatus], acked: Set[InstanceKey] = frozenset()
    ) -> list[str]:
        """Send what is due; returns one line per receiver that failed (already logged)."""
        due = self.due(statuses, acked)
        failures = []
        if due:
            for n in self.notifiers:
                try:
                    n.send(due)
                except NotifyError as e:
                    log.warning("%s", e)
                    failures.append(str(e))
            for s in due:
                self._sent_at[instance_key(s.rule, s.labels)] = s.at_ts
        return failures


def test_alerts(notifier: Notifier) -> list[str]:
    """Send a test alert, firing then resolved; returns the failures (empty: delivered)."""
    now = time.time()
    base = RuleStatus(
        rule="slotune-test",
        kind="test",
        severity="info",
        state=RuleState.FIRING,
        value=None,
        labels={"severity": "info"},
        at_ts=now,
        message="a test notification from slotune alerts test-notify",
    )
    failures = []
    for status in (base, replace(base, state=RuleState.OK, at_ts=time.time())):
        try:
            notifier.send([status])
        except NotifyError as e:
            failures.append(str(e))
    return failures
