"""What a fleet command replays, read from its flags: pools, the workload, SLOs, outages.

``slotune fleet simulate``, ``plan capacity`` and ``plan autoscale`` share these flags; each
raises ConfigError naming the flag that is wrong.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from slotune.collector.slo import SLO, parse_slos
from slotune.collector.workload import Trace
from slotune.tuner.fleet.health import HealthSettings, Outage
from slotune.tuner.fleet.pools import PoolSpec, check_unique, parse_pool
from slotune.tuner.sim.replay import WorkloadChoice


@dataclass(frozen=True, slots=True)
class FleetInputs:
    """Pools (``NAME:REPLICAS:MODEL:GPU[:CONFIG]``), the workload and SLOs in shorthand."""

    pools: tuple[str, ...]
    workload: WorkloadChoice
    slos: tuple[str, ...] = ()
    engine: str = "vllm"

    def load(self) -> tuple[list[PoolSpec], Trace, list[SLO]]:
        """The parsed pools, the trace and the SLOs.

        Raises:
            ConfigError: a bad pool, workload or SLO, naming the flag.
        """
        pools = [parse_pool(p, engine=self.engine) for p in self.pools]
        if pools:
            check_unique(pools)
        trace = self.workload.load()
        return pools, trace, parse_slos(list(self.slos))


@dataclass(frozen=True, slots=True)
class HealthInputs:
    """Replica outages (``NAME:AT_S:DURATION_S[:down|hang]``) and the breakers facing them."""

    outages: tuple[str, ...] = ()
    route_config: Path | None = None
    circuit_breaker: bool = True

    def load(self) -> tuple[list[Outage], HealthSettings]:
        """The outages and the breaker settings (a route config's, or route's defaults).

        Raises:
            ConfigError: a bad outage or route config, naming the flag.
        """
        from slotune.tuner.fleet.route_config import load_route_config

        settings = (
            HealthSettings()
            if self.route_config is None
            else HealthSettings.from_route_config(load_route_config(self.route_config))
        )
        if not self.circuit_breaker:
            settings = replace(settings, breaker=None)
        return [Outage.parse(o) for o in self.outages], settings
