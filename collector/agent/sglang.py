"""SGLang's ``/metrics`` (``sglang:`` names, old and new).

Labels such as ``model_name``, ``tp_rank``, ``engine_type`` (and ``name`` on the oldest
releases) are kept. Older releases export ``sglang:time_per_output_token_seconds`` only and
observe it once per output token (its count follows ``generation_tokens``): that is ITL.
Newer ones add ``sglang:inter_token_latency_seconds`` for ITL and observe
``time_per_output_token`` once per request: that is TPOT; from 0.5 that per-request histogram
is ``sglang:request_time_per_output_token_seconds``. ``sglang:token_usage`` is the KV
pool usage (0..1), ``sglang:cache_hit_rate`` the radix-cache hit rate (0..1), and
``sglang:num_retracted_requests_total`` (newer) counts the requests SGLang retracted under
memory pressure, its form of preemption. ``sglang:cached_tokens_total`` counts the prompt
tokens served from the radix cache and ``sglang:prompt_tokens_total`` all prompt tokens: they
are prefix-cache hits and queries in tokens, as vLLM counts them. SGLang creates the cached
counter's series at the first cached token, so a server that never hit has queries and no
hits (no hit rate, rather than a rate read as 0).

SGLang labels no request with why it ended. It counts the requests that reached their end in
``sglang:num_requests_total`` and, apart, the requests aborted on request (a client that went
away, ``/abort_request``) in ``sglang:num_aborted_requests_total``; both counters appear with
their first increment. They become ``requests_finished`` with ``finished_reason="finished"``
and ``"abort"``, so the error-rate SLI reads SGLang like vLLM: aborted over finished plus
aborted. SGLang may count a request aborted while running in both counters, so the ratio can
read a little low; a release without the aborted counter reads as no errors.
"""

from __future__ import annotations

from slotune.collector.agent.base import Family, SourceKind
from slotune.collector.agent.canonical import RequestOutcomes, Rule, outcome_family
from slotune.collector.agent.promsource import PromTextSource

SGLANG_RULES: tuple[Rule, ...] = (
    Rule("sglang:time_to_first_token_seconds", "ttft"),
    Rule("sglang:inter_token_latency_seconds", "itl"),
    Rule("sglang:e2e_request_latency_seconds", "e2e"),
    Rule("sglang:queue_time_seconds", "queue_time"),
    Rule("sglang:num_running_reqs", "requests_running"),
    Rule("sglang:num_queue_reqs", "requests_waiting"),
    Rule("sglang:token_usage", "kv_usage"),
    Rule("sglang:cache_hit_rate", "prefix_hit_rate"),
    Rule("sglang:num_retracted_requests_total", "preemptions"),
    Rule("sglang:prompt_tokens_total", "prompt_tokens"),
    Rule("sglang:prompt_tokens_total", "prefix_queries"),
    Rule("sglang:cached_tokens_total", "prefix_hits"),
    Rule("sglang:generation_tokens_total", "generation_tokens"),
)
# The per-request TPOT of releases from 0.5 on, which no longer export time_per_output_token.
_REQUEST_TPOT = "sglang:request_time_per_output_token_seconds"
SGLANG_OUTCOMES = RequestOutcomes("sglang:num_requests_total", "sglang:num_aborted_requests_total")


class SglangSource(PromTextSource):
    """SGLang's Prometheus endpoint (``--enable-metrics``)."""

    kind = SourceKind.SGLANG
    rules = SGLANG_RULES
    outcomes = SGLANG_OUTCOMES

    @classmethod
    def export_rules(cls) -> tuple[Rule, ...]:
        # A rule file serves the releases that export inter_token_latency (ITL), whose
        # time_per_output_token is per request: TPOT.
        return (*cls.rules, Rule("sglang:time_per_output_token_seconds", "tpot"))

    def derive(self, families: tuple[Family, ...]) -> tuple[Family, ...]:
        return outcome_family(families, SGLANG_OUTCOMES)

    def rules_for(self, families: tuple[Family, ...]) -> tuple[Rule, ...]:
        names = {f.name for f in families}
        if _REQUEST_TPOT in names:
            return (*self.rules, Rule(_REQUEST_TPOT, "tpot"))
        per_token = "sglang:inter_token_latency_seconds" in names
        tpot_target = "tpot" if per_token else "itl"
        return (*self.rules, Rule("sglang:time_per_output_token_seconds", tpot_target))
