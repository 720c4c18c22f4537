"""Every page on a seeded store (SQLite and PostgreSQL): what it shows, not only that it runs."""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest
from ui_pages import PAGES, RunPage, assert_clean, texts


def test_overview_counts_targets_slos_and_alerts(seeded_url: str, run_page: RunPage) -> None:
    at = run_page("overview", seeded_url)
    assert_clean(at)
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Targets up"] == "3 / 3"
    assert metrics["SLOs met"] == "1 / 2"
    assert metrics["Alerts firing"] == "1"
    assert metrics["Latest study"] == "none"
    slos = at.dataframe[0].value
    assert list(slos["name"]) == ["chat-ttft", "code-e2e"]
    assert list(slos["state"]) == ["met", "breached"]
    assert abs(slos["attainment"][0] - 99.5) < 1e-6
    assert abs(slos["budget_left"][0] - 50.0) < 1e-6
    assert slos["budget_left"][1] == 0.0  # overspent shows as an empty bar
    assert list(at.dataframe[1].value["rule"]) == ["code-e2e:ticket"]


def test_fleet_groups_targets_into_pools_and_drills_down(
    seeded_url: str, run_page: RunPage
) -> None:
    at = run_page("fleet", seeded_url, query={"range": "5m"})
    assert_clean(at)
    pools = at.dataframe[0].value.set_index("pool")
    assert list(pools.index) == ["chat", "code"]
    assert pools.loc["chat", "targets"] == 2
    # 2 targets x 10 requests per 5 s scrape
    assert abs(pools.loc["chat", "req_s"] - 4.0) < 0.01
    # chat: 99.5 % within 0.5 s, interpolated in the (0.1, 0.25] bucket for p50
    assert 100 < pools.loc["chat", "ttft_p50"] < 250
    assert pools.loc["code", "ttft_p99"] > 0.5  # past a second: the column is in seconds
    assert pools.loc["chat", "gpu"] == "H100-SXM"
    targets = at.dataframe[1].value
    assert list(targets["name"]) == ["node-1/vllm", "node-2/vllm", "node-3/vllm"]
    assert set(targets["status"]) == {"up"}
    assert abs(targets["kv_usage"][0] - 60.0) < 1e-6
    assert abs(targets["vram_gib"][0] - 70.0) < 1e-6
    assert "All targets, last 5m" in texts(at)
    assert len(at.get("vega_lite_chart")) == 12

    # a range longer than the data: targets first scraped inside it count from then on
    at = run_page("fleet", seeded_url, query={"range": "1h"})
    assert_clean(at)
    pools = at.dataframe[0].value.set_index("pool")
    assert 100 < pools.loc["chat", "ttft_p50"] < 250
    assert abs(pools.loc["chat", "req_s"] - 4.0 / 6) < 0.01  # 10 minutes of data in an hour

    at = run_page(
        "fleet", seeded_url, query={"range": "5m", "pool": "code", "target": "node-3/vllm"}
    )
    assert_clean(at)
    assert list(at.dataframe[1].value["name"]) == ["node-3/vllm"]
    assert "Target node-3/vllm, last 5m" in texts(at)


def test_slos_page_shows_budget_and_burn_rates(seeded_url: str, run_page: RunPage) -> None:
    at = run_page("slos", seeded_url)
    assert_clean(at)
    table = at.dataframe[0].value.set_index("name")
    # 85 % good against 90 % required: 1.5x the budget, over both windows of each pair
    pairs = [c for c in table.columns if c.startswith("burn ")]
    assert "burn page 1h/5m >14.4×" in pairs
    assert table.loc["code-e2e", "burn ticket 3d/6h >1×"] == "1.50× · 1.50×"
    assert not any("None" in str(v) for v in table[pairs].to_numpy().ravel())
    assert table.loc["code-e2e", "budget_left"] == 0.0  # overspent: clamped, as on the chart
    assert table.loc["code-e2e", "state"] == "breached"
    assert table.loc["code-e2e", "firing"] == "ticket"  # the 3d/6h x1 condition holds
    assert table.loc["chat-ttft", "firing"] == ""
    # the budget of every SLO, then the chosen one's burn-down, SLI and burn-rate pairs
    assert len(at.get("plotly_chart")) == 4
    assert at.form  # forms are shown unless read-only


def test_alerts_page_shows_every_rule_state_and_history(seeded_url: str, run_page: RunPage) -> None:
    at = run_page("alerts", seeded_url)
    assert_clean(at)
    now, history = (d.value for d in at.dataframe)
    states = dict(zip(now["rule"], now["state"], strict=True))
    assert states == {
        "code-e2e:ticket": "firing",
        "chat-ttft:page": "ok",
        "chat-ttft:ticket": "ok",
        "code-e2e:page": "ok",
        "kv-full": "ok",
    }
    assert now["rule"][0] == "code-e2e:ticket"  # firing first
    assert now["severity"][0] == "🟧 ticket"  # coloured by severity
    assert list(now["rule"][1:3]) == ["chat-ttft:page", "code-e2e:page"]  # pages lead the rest
    assert "ticket: 1 firing" in texts(at)
    assert list(history["rule"]) == ["code-e2e:ticket", "chat-ttft:page"]
    assert list(history["state"]) == ["firing", "firing"]
    # only the alert firing now can be acknowledged, not the page that has since resolved
    assert at.selectbox(key="ack_event").options == [f"#2 code-e2e:ticket ({history['time'][0]})"]


def test_benchmarks_page_shows_runs_distributions_and_rate_curves(
    seeded_url: str, run_page: RunPage
) -> None:
    at = run_page("benchmarks", seeded_url, query={"run": "1"})
    assert_clean(at)
    runs = at.dataframe[0].value
    assert list(runs["name"]).count("llama poisson (max-rate)") == 3
    assert "baseline" in list(runs["name"])
    charts = at.get("plotly_chart")
    assert len(charts) == 4 + 1  # TTFT/ITL/TPOT/E2E CDFs + one rate curve
    assert "Rate → latency and goodput" in texts(at)


def test_diagnosis_page_lists_stored_diagnoses(seeded_url: str, run_page: RunPage) -> None:
    at = run_page("diagnosis", seeded_url)
    assert_clean(at)
    assert list(at.dataframe[0].value["kind"]) == ["prefix-cache"]
    assert "41 % of prompt tokens repeat" in str(at.json[0].value)


def test_read_only_hides_every_writing_control(seeded_url: str, run_page: RunPage) -> None:
    for page in ("slos", "alerts", "tuning"):
        at = run_page(page, seeded_url, read_only=True)
        assert_clean(at)
        assert not at.form, page
        assert not at.button, page


def test_an_auth_section_in_secrets_asks_for_login_first(
    seeded_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SLOTUNE_DB", seeded_url)
    main = str(PAGES.parent / "main.py")
    at = AppTest.from_file(main, default_timeout=120).run()
    assert_clean(at)
    assert [t.value for t in at.title] == ["Overview"]
    at = AppTest.from_file(main, default_timeout=120)
    at.secrets["auth"] = {
        "redirect_uri": "http://127.0.0.1:8501/oauth2callback",
        "cookie_secret": "a-long-random-string",
        "client_id": "slotune",
        "client_secret": "from-the-identity-provider",
        "server_metadata_url": "https://idp.example/.well-known/openid-configuration",
    }
    at.run()
    assert_clean(at)
    assert [b.label for b in at.button] == ["Log in"]
    assert not at.dataframe  # nothing of the store before login
