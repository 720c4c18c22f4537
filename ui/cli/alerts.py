"""``slotune alerts``: threshold rules, evaluation, the evaluator loop, silences and acks."""

from __future__ import annotations

import logging
import signal
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape
from rich.table import Table

from slotune.ui.cli._common import (
    JsonOption,
    console,
    db_url,
    err_console,
    metrics_client,
    print_json,
)

if TYPE_CHECKING:
    from slotune.collector.alerts import DispatchReport, RuleStatus

# Library modules are imported inside the commands: building the CLI must not load the store.

alerts_app = typer.Typer(
    help="Alert on SLO burn rates and metric thresholds (see docs/alerts.md).",
    no_args_is_help=True,
)

AtOption = Annotated[
    str | None,
    typer.Option("--at", help="Evaluation time: epoch seconds or ISO 8601 (UTC unless given)."),
]
ScrapeOption = Annotated[
    str | None,
    typer.Option(
        "--scrape-interval",
        help="The agents' scrape interval: shorter SLO windows are refused (default: the one "
        "each SLO was applied with).",
    ),
]
NotifyOption = Annotated[
    list[str],
    typer.Option(
        "--notify", help="log, alertmanager=URL or slack=URL (Slack-compatible), repeatable."
    ),
]


def register(app: typer.Typer) -> None:
    app.add_typer(alerts_app, name="alerts")


def _parse_time(text: str | None) -> float | None:
    from datetime import UTC, datetime

    from slotune.collector.errors import ConfigError

    if text is None:
        return None
    try:
        return float(text)
    except ValueError:
        pass
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError as e:
        raise ConfigError(
            f"--at {text!r}: give epoch seconds or ISO 8601, e.g. 2026-12-01T10:00:00Z"
        ) from e
    return (parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)).timestamp()


def _seconds(text: str, flag: str) -> float:
    from slotune.collector.durations import parse_duration_s

    return parse_duration_s(text, field_name=flag)


def _optional_seconds(text: str | None, flag: str) -> float | None:
    return None if text is None else _seconds(text, flag)


@alerts_app.command("apply")
def apply_cmd(
    ctx: typer.Context,
    file: Annotated[Path, typer.Argument(help="Threshold-rule YAML (see examples/alerts.yaml).")],
    json: JsonOption = False,
) -> None:
    """Create or replace the threshold rules of a YAML file (all of them or none)."""
    from slotune.collector.alerts import load_rules_file
    from slotune.collector.store import open_store, save_alert_rule

    rules = load_rules_file(file)
    with open_store(db_url(ctx)) as store:
        for rule in rules:
            save_alert_rule(store, rule.to_info())
    if json:
        print_json([{"name": r.name, "expr": r.expr, "severity": r.severity} for r in rules])
    else:
        console.print(f"applied {len(rules)} rule(s): {', '.join(r.name for r in rules)}")


@alerts_app.command("add")
def add_cmd(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="Rule name, e.g. kv-full.")],
    expr: Annotated[str, typer.Argument(help="e.g. 'kv_usage > 0.9 for 5m' or 'up == 0'.")],
    severity: Annotated[str, typer.Option(help="page, ticket, warning ...")] = "warning",
) -> None:
    """Create or replace one threshold rule from the shorthand."""
    from slotune.collector.alerts import parse_rule
    from slotune.collector.store import open_store, save_alert_rule

    rule = parse_rule(expr, name=name, severity=severity)
    with open_store(db_url(ctx)) as store:
        save_alert_rule(store, rule.to_info())
    console.print(f"saved rule {name}: {rule.expr}", highlight=False)


@alerts_app.command("delete")
def delete_cmd(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="Threshold rule name (see `slotune alerts list`).")],
) -> None:
    """Delete a threshold rule and its events (an SLO's rules go with `slotune slo delete`)."""
    from slotune.collector.alerts import delete_threshold_rule
    from slotune.collector.store import open_store

    with open_store(db_url(ctx)) as store:
        delete_threshold_rule(store, name)
    console.print(f"deleted rule {name}", highlight=False)


@alerts_app.command("list")
def list_cmd(ctx: typer.Context, json: JsonOption = False) -> None:
    """List the alert rules (SLO burn-rate rules and threshold rules)."""
    import time

    from slotune.collector.store import active_silences, list_alert_rules, open_store

    with open_store(db_url(ctx)) as store:
        rules = list_alert_rules(store)
        silences = active_silences(store, time.time())
    if json:
        print_json(
            [
                {
                    "name": r.name,
                    "kind": r.kind,
                    "slo": r.slo_name,
                    "metric": r.metric,
                    "op": r.op,
                    "threshold": r.threshold,
                    "for_s": r.for_s,
                    "severity": r.severity,
                    "labels": dict(r.labels),
                    "enabled": r.enabled,
                    "silenced_until": s.until_ts if (s := silences.get(r.name)) else None,
                }
                for r in rules
            ]
        )
        return
    table = Table("name", "kind", "condition", "severity", "enabled", "silenced")
    for r in rules:
        cond = f"SLO {r.slo_name}" if r.slo_name else f"{r.metric} {r.op} {r.threshold:g}"
        if r.for_s:
            cond += f" for {r.for_s:g}s"
        silenced = "yes" if r.name in silences else ""
        table.add_row(r.name, r.kind, cond, r.severity, "yes" if r.enabled else "no", silenced)
    console.print(table)


def _print_statuses(statuses: list[RuleStatus]) -> None:
    table = Table("rule", "instance", "state", "value", "message")
    for s in statuses:
        instance = s.labels.get("target") or s.labels.get("slo", "")
        value = "-" if s.value is None else f"{s.value:.4g}"
        table.add_row(s.rule, instance, s.state.label, value, s.message)
    console.print(table)


@alerts_app.command("evaluate")
def evaluate_cmd(
    ctx: typer.Context,
    once: Annotated[bool, typer.Option("--once", help="Evaluate once (the default).")] = True,
    at: AtOption = None,
    record: Annotated[
        bool, typer.Option("--record", help="Store the state changes as alert events.")
    ] = False,
    scrape_interval: ScrapeOption = None,
    json: JsonOption = False,
) -> None:
    """The state of every rule at a time: firing / pending / ok / error, value, burn rates."""
    from slotune.collector.alerts import evaluate_all
    from slotune.collector.store import open_store

    at_ts = _parse_time(at)
    min_window_s = _optional_seconds(scrape_interval, "--scrape-interval")
    with open_store(db_url(ctx)) as store:
        statuses = evaluate_all(
            store, at_ts, record=record, min_window_s=min_window_s, metrics=metrics_client(ctx)
        )
    if json:
        print_json([s.to_dict() for s in statuses])
    else:
        _print_statuses(statuses)


def _print_round(statuses: list[RuleStatus], report: DispatchReport) -> None:
    """One line per evaluation round: instances by state, changes, notifications sent."""
    import time
    from collections import Counter

    from slotune.collector.alerts import RuleState

    states = Counter(s.state for s in statuses)
    order = (RuleState.FIRING, RuleState.PENDING, RuleState.NO_DATA, RuleState.ERROR, RuleState.OK)
    styles = {RuleState.FIRING: "bold red", RuleState.ERROR: "red", RuleState.NO_DATA: "yellow"}
    parts = [
        f"[{styles.get(st, 'default')}]{states[st]} {st.label}[/]" for st in order if states[st]
    ]
    changes = sum(1 for s in statuses if s.changed is not None)
    at = max((s.at_ts for s in statuses), default=time.time())
    line = (
        f"{time.strftime('%H:%M:%S', time.localtime(at))} evaluated {len(statuses)} "
        f"instance(s): {', '.join(parts) or 'no rule'}; {changes} change(s); "
        f"sent {report.num_sent}"
    )
    if report.failures:
        line += f", [red]{len(report.failures)} receiver(s) failed[/] (kept pending)"
    console.print(line, highlight=False, soft_wrap=True)


@alerts_app.command("run")
def run_cmd(
    ctx: typer.Context,
    interval: Annotated[str, typer.Option(help="Time between evaluations.")] = "30s",
    notify: NotifyOption = ["log"],  # noqa: B006 - Typer reads the default, never mutates it
    resend: Annotated[
        str,
        typer.Option(help="Send firing alerts to Alertmanager again this often (as Prometheus)."),
    ] = "1m",
    renotify: Annotated[
        str,
        typer.Option(help="Send a still-firing alert to people again after this long (0s: never)."),
    ] = "4h",
    scrape_interval: ScrapeOption = None,
    max_rounds: Annotated[
        int | None, typer.Option(help="Stop after this many evaluations (default: never).")
    ] = None,
) -> None:
    """Evaluate every rule in a loop, store state changes, notify; never stops on a failure."""
    from slotune.collector.alerts import Dispatcher, make_notifier, open_when_reachable, run_loop

    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(message)s")
    notifiers = [make_notifier(spec) for spec in notify]
    interval_s = _seconds(interval, "--interval")
    resend_s = _seconds(resend, "--resend")
    renotify_s = _seconds(renotify, "--renotify")
    # SIGTERM (docker stop, systemd) stops like the agent: the round in progress finishes
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda _sig, _frame: stop.set())
    log = logging.getLogger("slotune.alerts")

    def wait_for_store(seconds: float) -> None:
        if stop.wait(seconds):
            log.warning("stopped on SIGTERM before the store could be reached")
            raise typer.Exit(0)

    with open_when_reachable(db_url(ctx), retry_s=interval_s, sleep=wait_for_store) as store:
        dispatcher = Dispatcher(store, notifiers, interval_s, resend_s, renotify_s)
        rounds = run_loop(
            store,
            interval_s=interval_s,
            min_window_s=_optional_seconds(scrape_interval, "--scrape-interval"),
            receivers=dispatcher.receivers,
            metrics=metrics_client(ctx),
            on_round=lambda statuses: _print_round(statuses, dispatcher.dispatch(statuses)),
            max_rounds=max_rounds,
            stop=stop,
        )
    if stop.is_set():
        log.warning("stopped on SIGTERM after %d rounds", rounds)


@alerts_app.command("history")
def history_cmd(
    ctx: typer.Context,
    rule: Annotated[str | None, typer.Option(help="One rule's events.")] = None,
    since: Annotated[str | None, typer.Option(help="Events from this time on.")] = None,
    json: JsonOption = False,
) -> None:
    """Stored alert events (firing / resolved), oldest first, with ids for `alerts ack`."""
    from slotune.collector.store import alert_history, open_store

    since_ts = _parse_time(since)
    with open_store(db_url(ctx)) as store:
        entries = alert_history(store, rule=rule, since_ts=since_ts)
    if json:
        print_json(
            [
                {
                    "id": h.id,
                    "rule": h.event.rule,
                    "state": h.event.state.value,
                    "ts": h.event.ts,
                    "value": h.event.value,
                    "labels": dict(h.event.labels),
                    "message": h.event.message,
                    "acked_at": h.acked_at,
                    "ack_comment": h.ack_comment,
                }
                for h in entries
            ]
        )
        return
    from datetime import UTC, datetime

    table = Table("id", "time (UTC)", "rule", "state", "value", "acked", "message")
    for h in entries:
        when = datetime.fromtimestamp(h.event.ts, UTC).strftime("%Y-%m-%d %H:%M:%S")
        value = "-" if h.event.value is None else f"{h.event.value:.4g}"
        acked = h.ack_comment or ("yes" if h.acked_at else "")
        table.add_row(
            str(h.id), when, h.event.rule, h.event.state.value, value, acked, h.event.message
        )
    console.print(table)


@alerts_app.command("silence")
def silence_cmd(
    ctx: typer.Context,
    rule: Annotated[str, typer.Argument(help="Rule name (see `slotune alerts list`).")],
    for_: Annotated[str, typer.Option("--for", help="How long, e.g. 2h.")] = "1h",
    comment: Annotated[str, typer.Option(help="Why (kept with the silence).")] = "",
) -> None:
    """Hold back a rule's notifications for a while (it is still evaluated and recorded)."""
    import time

    from slotune.collector.store import open_store, silence_rule

    until = time.time() + _seconds(for_, "--for")
    with open_store(db_url(ctx)) as store:
        silence_rule(store, rule, until, comment)
    console.print(f"silenced {rule} for {for_}", highlight=False)


@alerts_app.command("ack")
def ack_cmd(
    ctx: typer.Context,
    event: Annotated[int, typer.Argument(help="Event id (see `slotune alerts history`).")],
    comment: Annotated[str, typer.Option(help="Who is on it, what is done.")] = "",
) -> None:
    """Acknowledge a firing event: it is not re-notified."""
    from slotune.collector.store import ack_event, open_store

    with open_store(db_url(ctx)) as store:
        ack_event(store, event, comment)
    console.print(f"acknowledged event {event}", highlight=False)


@alerts_app.command("test-notify")
def test_notify_cmd(notify: NotifyOption = ["log"]) -> None:  # noqa: B006
    """Send a test alert (firing, then resolved) to each receiver."""
    from slotune.collector.alerts import make_notifier, test_alerts

    failures = 0
    for spec in notify:
        notifier = make_notifier(spec)
        for problem in test_alerts(notifier):
            failures += 1
            err_console.print(
                f"[bold red]error:[/] {escape(problem)}", highlight=False, soft_wrap=True
            )
    if failures:
        raise typer.Exit(code=1)
    console.print(f"sent a test alert and its resolve to {len(notify)} receiver(s)")
