"""Fleet planning: request-aware routing policies, a fleet simulator, capacity and autoscaling
plans, and load shedding — the same policy objects drive the simulator and `slotune route`."""
