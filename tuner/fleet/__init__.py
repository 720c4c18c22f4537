"""Fleet planning: request-aware routing policies, a fleet simulator, capacity and autoscaling
plans, and load shedding — the same policy objects drive the simulator and `slotune route`.

The policies load with the package; the planners, the simulator's results and the router
load on first use (PEP 562), so a process that only routes in the simulator does not pay for
the store, the plans and the HTTP server.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from slotune.tuner._lazy import lazy_names as _lazy_names
from slotune.tuner.fleet.estimator import OutputLengthEstimator
from slotune.tuner.fleet.policy import Decision, ReplicaState, RequestInfo, RoutingPolicy
from slotune.tuner.fleet.registry import POLICY_NAMES, PolicyContext, policy_from_name

if TYPE_CHECKING:
    from slotune.tuner.fleet.autoscale_run import AutoscaleRequest, run_autoscale_plan
    from slotune.tuner.fleet.capacity_run import CapacityRequest, run_capacity_plan
    from slotune.tuner.fleet.inputs import FleetInputs, HealthInputs
    from slotune.tuner.fleet.policies_run import run_policy_comparison
    from slotune.tuner.fleet.route_server import serve
    from slotune.tuner.fleet.simulator import FleetResult, ReplayProgress

# module -> the names it gives this package on first use
_LAZY: dict[str, tuple[str, ...]] = {
    "slotune.tuner.fleet.autoscale_run": ("AutoscaleRequest", "run_autoscale_plan"),
    "slotune.tuner.fleet.capacity_run": ("CapacityRequest", "run_capacity_plan"),
    "slotune.tuner.fleet.inputs": ("FleetInputs", "HealthInputs"),
    "slotune.tuner.fleet.policies_run": ("run_policy_comparison",),
    "slotune.tuner.fleet.route_server": ("serve",),
    "slotune.tuner.fleet.simulator": ("FleetResult", "ReplayProgress"),
}

__all__ = [
    "POLICY_NAMES",
    "AutoscaleRequest",
    "CapacityRequest",
    "Decision",
    "FleetInputs",
    "FleetResult",
    "HealthInputs",
    "OutputLengthEstimator",
    "PolicyContext",
    "ReplayProgress",
    "ReplicaState",
    "RequestInfo",
    "RoutingPolicy",
    "policy_from_name",
    "run_autoscale_plan",
    "run_capacity_plan",
    "run_policy_comparison",
    "serve",
]

# type checkers see only the names imported above, so a misspelt one is an error
if not TYPE_CHECKING:
    __getattr__ = _lazy_names(__name__, _LAZY)
