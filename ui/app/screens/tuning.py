"""Tuning: start a study from a form (it runs in its own worker process), follow its trials
live, Optuna's history / importance / Pareto / parallel-coordinate / slice figures, best vs
default, the launch command."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import streamlit as st
from sqlalchemy.engine import make_url

from slotune.collector.store import Store, WorkerInfo, default_db_url, list_workers
from slotune.collector.workload import NAMED_WORKLOADS
from slotune.tuner import StudyListing, new_study_spec
from slotune.tuner.engines.registry import adapter_for, engines
from slotune.tuner.tune.dashboard import (
    StudyFigures,
    axis_name,
    study_figures,
    study_state,
    trial_rows,
)
from slotune.tuner.tune.worker import (
    WorkerView,
    cancel_worker,
    save_trace_upload,
    start_worker,
    worker_view,
)
from slotune.ui.app._common import (
    LIVE_S,
    code,
    db_url,
    explain,
    guarded,
    is_read_only,
    md,
    query_choice,
    set_query,
    show_error,
    store,
    when,
)

UPLOAD = "(upload a trace)"


@st.cache_data(ttl=LIVE_S, show_spinner=False)
def _studies(url: str | None) -> list[StudyListing]:
    from slotune.tuner import list_studies_report

    return list_studies_report(url)


@st.cache_data(ttl=LIVE_S, show_spinner=False)
def _workers(_store: Store, url: str | None) -> list[WorkerInfo]:
    return list_workers(_store)


@st.cache_data(ttl=LIVE_S, show_spinner=False)
def _report(url: str | None, name: str) -> dict[str, Any]:
    from slotune.tuner import show_study

    return show_study(name, url).to_dict()


@st.cache_data(ttl=LIVE_S, show_spinner=False)
def _figures(
    url: str | None, name: str, value_names: tuple[str, ...], num_trials: int
) -> StudyFigures:
    return study_figures(name, url, value_names)


@st.cache_data(ttl=60, show_spinner=False)
def _export(url: str | None, name: str, fmt: str) -> str:
    from slotune.tuner import export_study

    return export_study(name, url, fmt)


def _catalog() -> tuple[list[str], list[str]]:
    from slotune.tuner.sim.catalog import list_gpus, list_models

    return [m.id for m in list_models()], [g.id for g in list_gpus()]


def _uploads_dir() -> Path:
    """Uploaded traces live next to a SQLite store, else in the working directory."""
    url = make_url(db_url() or default_db_url())
    if url.get_backend_name() == "sqlite" and url.database:
        return Path(url.database).parent / "uploads"
    return Path.cwd() / "uploads"


def _start_form() -> None:
    models, gpus = _catalog()
    with st.form("study_form"):
        c1, c2, c3, c4 = st.columns(4)
        name = c1.text_input(key="study_name", label="study name", placeholder="chat-h100")
        backend = c2.selectbox("backend", ["sim", "launch", "attach"])
        engine = c3.selectbox("engine", [e.value for e in engines()])
        objective = c4.selectbox("objective", ["capacity", "goodput", "throughput", "pareto"])
        c5, c6, c7 = st.columns(3)
        model = c5.selectbox(
            "model", models, index=models.index("llama-3.1-8b") if "llama-3.1-8b" in models else 0
        )
        gpu = c6.selectbox("GPU", gpus, index=gpus.index("h100-sxm") if "h100-sxm" in gpus else 0)
        workload = c7.selectbox(
            key="study_workload", label="workload", options=[*NAMED_WORKLOADS, UPLOAD]
        )
        upload = st.file_uploader(
            key="study_trace",
            label="trace (JSONL, Azure CSV or Mooncake JSONL)",
            type=["jsonl", "csv", "json"],
        )
        slos = st.text_area(
            key="study_slos", label="SLOs, one per line", value="ttft:p99<=500ms\nitl:p99<=50ms"
        )
        c8, c9, c10, c11, c12 = st.columns(5)
        trials = c8.number_input(
            key="study_trials", label="trials", min_value=1, max_value=1000, value=20
        )
        rate = c9.text_input("rate (req/s)", help="empty: the trace's own timestamps")
        num_requests = c10.number_input(
            key="study_requests", label="requests per trial (0: all)", min_value=0, value=300
        )
        seed = c11.number_input("seed", min_value=0, value=0)
        recheck = c12.number_input(
            key="study_recheck", label="re-check best K", min_value=0, value=3
        )
        command = st.text_input(
            "launch command (launch backend)",
            placeholder="vllm serve {hf_model} --port {port} {engine_args}",
        )
        endpoint = st.text_input("endpoint (attach backend)", placeholder="http://127.0.0.1:8000")
        if not st.form_submit_button("Start study"):
            return
        try:
            trace_file = None
            if workload == UPLOAD:
                if upload is None:
                    raise ValueError("choose a trace file to upload, or pick a named workload")
                trace_file = str(save_trace_upload(upload.name, upload.getvalue(), _uploads_dir()))
            try:
                rate_value = float(rate) if rate.strip() else None
            except ValueError:
                raise ValueError(f"rate {rate!r} is not a number of requests per second") from None
            spec = new_study_spec(
                name=name.strip(),
                backend=backend,
                engine=engine,
                model=model,
                gpu=gpu,
                workload=None if trace_file else workload,
                trace_file=trace_file,
                slos=tuple(x.strip() for x in slos.splitlines() if x.strip()),
                objective=objective,
                trials=int(trials),
                rate=rate_value,
                num_requests=int(num_requests) or None,
                seed=int(seed),
                recheck_k=int(recheck),
                command=command.strip() or None,
                endpoint=endpoint.strip() or None,
            )
            start_worker(spec, db_url())
        except ValueError as e:
            show_error(str(e))
            return
        except Exception as e:
            show_error(explain(e))
            return
        _studies.clear()
        _workers.clear()
        set_query("study", spec.name)
        st.success(
            f"study {md(spec.name)} started in a worker process; it keeps running if you close this page"
        )


def _attainment(report: dict[str, Any], number: int | None) -> list[dict[str, Any]]:
    if number is None:
        return []
    t = next((t for t in report["trial_details"] if t["number"] == number), None)
    return list(((t or {}).get("measurement") or {}).get("slo_attainment") or [])


def _best_vs_default(report: dict[str, Any]) -> None:
    best, default = report["best"], report["default"]
    unit = report["value_names"][0]
    c1, c2, c3 = st.columns(3)
    c1.metric(f"default ({md(unit)})", "-" if not default else f"{default['value'] or 0:.3g}")
    if default and not default["feasible"]:
        c1.caption("the default breaks an SLO")
    c2.metric(f"best ({md(unit)})", "-" if not best else f"{best['value']:.3g}")
    c3.metric("gain over default", "-" if report["gain"] is None else f"{report['gain']:.2f}×")
    if report["gain_note"]:
        c3.caption(md(report["gain_note"]))
    rows = []
    for label, entry in (("default", default), ("best", best)):
        for a in _attainment(report, entry["number"] if entry else None):
            rows.append(
                {
                    "config": label,
                    "SLO": a.get("spec"),
                    "attainment %": (a.get("attainment") or 0) * 100,
                    "objective %": (a.get("objective") or 0) * 100,
                    "met": a.get("met"),
                }
            )
    if rows:
        st.dataframe(rows, hide_index=True, placeholder="–")
    if best:
        st.markdown("**Best configuration**")
        st.json(best["params"], expanded=True)


def _trials(report: dict[str, Any]) -> None:
    rows = trial_rows(report)
    cc = st.column_config
    config: dict[str, Any] = {
        "value": cc.NumberColumn(axis_name(report["value_names"][0]), format="%.3g"),
        "feasible": cc.CheckboxColumn("meets every SLO"),
        "duration (s)": cc.NumberColumn(format="%.2f"),
    }
    for col in dict.fromkeys(c for r in rows for c in r):
        if col.endswith("(measured, ms)"):
            config[col] = cc.NumberColumn(format="%.1f")
    st.dataframe(rows, hide_index=True, column_config=config, placeholder="")


def _worker_line(view: WorkerView | None) -> None:
    if view is None:
        return
    info = view.info
    if view.state == "died":
        st.error(
            f"Stopped: the worker of this study (pid {info.pid} on {md(info.host)}) died "
            f"without finishing (last heartbeat {when(info.heartbeat_at)}). Continue it with "
            f"{code(f'slotune tune resume {info.study_name}')}."
        )
    elif view.state == "failed":
        show_error(f"The study failed: {info.error}")
    elif view.state == "cancelled":
        st.warning(
            f"Cancelled at {when(info.ended_at)}; {code(f'slotune tune resume {info.study_name}')} "
            "continues it."
        )
    elif view.is_alive:
        st.info(
            f"Running in worker pid {info.pid} on {md(info.host)} since {when(info.started_at)}."
        )


def _study(name: str, views: dict[str, WorkerView]) -> None:
    first = views.get(name)

    @st.fragment(run_every=LIVE_S if first is not None and first.is_alive else None)
    def live() -> None:
        with guarded():
            report = _report(db_url(), name)
            # read again on every refresh: the banner must follow the worker as it ends
            view = next(
                (worker_view(w) for w in _workers(store(), db_url()) if w.study_name == name), None
            )
        stored = next((s.status for s in _studies(db_url()) if s.name == name), "?")
        state = study_state(stored, view)
        status = state.status + (f" ({state.reason})" if state.reason else "")
        st.caption(
            md(
                f"{report['engine']} {report['model']} on {report['gpu']} "
                f"({report['backend']} backend), workload {report['workload']}, "
                f"SLOs {', '.join(report['slos'])}, objective {report['objective']}: "
                f"{report['trials']} / {report['target_trials']} trials, {report['feasible']} "
                f"meet every SLO, {report['failed']} failed to run; status {status}"
            )
        )
        _worker_line(view)
        _trials(report)
        st.subheader("Best vs default")
        _best_vs_default(report)
        with guarded():
            figs = _figures(db_url(), name, tuple(report["value_names"]), report["trials"])
        c1, c2 = st.columns(2)
        c1.plotly_chart(figs.history, width="stretch")
        if figs.importance is not None:
            c2.plotly_chart(figs.importance, width="stretch")
        else:
            c2.caption("Parameter importance needs a few completed trials with different values.")
        for fig in (figs.pareto, figs.parallel, figs.slices):
            if fig is not None:
                st.plotly_chart(fig, width="stretch")
        if report["best"]:
            st.subheader("Launch command")
            fmt = report["engine"]
            with guarded():
                language = adapter_for(fmt).export_language
                st.code(_export(db_url(), name, fmt), language=language)

    live()
    can_cancel = first is not None and first.is_alive and not is_read_only()
    if can_cancel and st.button("Cancel study", type="secondary"):
        try:
            cancel_worker(db_url(), name)
        except Exception as e:
            show_error(explain(e))
        else:
            _workers.clear()
            st.warning(f"cancelling {md(name)}…")


st.title("Tuning")
with guarded():
    s = store()
    studies = _studies(db_url())
    views = {w.study_name: worker_view(w) for w in _workers(s, db_url())}

if not is_read_only():
    with st.expander("Start a study", expanded=not studies):
        _start_form()

if not studies:
    st.info(
        "No study stored yet"
        + ("." if is_read_only() else ": start one above, or run `slotune tune`.")
    )
    st.stop()

st.dataframe(
    [
        {
            "name": x.name,
            "status": study_state(x.status, views.get(x.name)).status,
            "worker": views[x.name].state if x.name in views else "",
            "backend": x.backend,
            "engine": x.engine,
            "model": x.model,
            "gpu": x.gpu,
            "objective": x.objective,
            "trials": x.trials,
            "best": x.best_value,
            "gain": x.gain,
            "created": when(x.created_at),
        }
        for x in studies
    ],
    hide_index=True,
    placeholder="",
    column_config={"gain": st.column_config.NumberColumn("gain over default", format="%.2f×")},
)
names = [x.name for x in studies]
name = query_choice("study", names, names[0])
name = st.selectbox("Study", names, index=names.index(name))
set_query("study", name)
_study(name, views)
