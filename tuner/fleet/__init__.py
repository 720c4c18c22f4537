"""Fleet planning: request-aware routing policies, a fleet simulator, capacity and autoscaling
plans, and load shedding — the same policy objects drive the simulator and `slotune route`."""

from slotune.tuner.fleet.estimator import OutputLengthEstimator
from slotune.tuner.fleet.policy import Decision, ReplicaState, RequestInfo, RoutingPolicy
from slotune.tuner.fleet.registry import POLICY_NAMES, PolicyContext, policy_from_name

__all__ = [
    "POLICY_NAMES",
    "Decision",
    "OutputLengthEstimator",
    "PolicyContext",
    "ReplicaState",
    "RequestInfo",
    "RoutingPolicy",
    "policy_from_name",
]
