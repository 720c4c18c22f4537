"""One incident, shared by the Alertmanager and Prometheus tests: a vLLM TTFT histogram
scraped every minute, two hours at 0.5 % slow requests, then every request slow.

With the page condition 1h & 5m over 14.4x of a 1 % budget, the 1-hour window crosses 14.4 %
slow in the ninth slow minute (8 slow minutes: 13.8 %, 9: 15.4 %).
"""

from __future__ import annotations

from slotune.collector.slo import parse_slo_yaml

STEP_S = 60.0
GOOD_MINUTES = 120
PER_MINUTE = 100.0
SLOW_SHARE_BEFORE = 0.005
FAMILY = "vllm:time_to_first_token_seconds_bucket"
SLOS_YAML = """slos:
  - name: chat-ttft
    spec: ttft:p99<=500ms
    window: 30d
    alerting:
      windows:
        - {severity: page, long: 1h, short: 5m, factor: 14.4}
"""
SLO = parse_slo_yaml(SLOS_YAML)[0]


def cumulative(slow_minutes: int) -> list[tuple[float, float, float]]:
    """(seconds from the start, requests under 500 ms, all requests), once a minute."""
    out = [(0.0, 0.0, 0.0)]
    for minute in range(GOOD_MINUTES + slow_minutes):
        t, good, total = out[-1]
        slow = SLOW_SHARE_BEFORE if minute < GOOD_MINUTES else 1.0
        out.append((t + STEP_S, good + PER_MINUTE * (1 - slow), total + PER_MINUTE))
    return out
