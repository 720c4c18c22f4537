"""Fitting the cost model's coefficients to measured operator timings.

Names load on first use (PEP 562): the fit pulls in NumPy and the simulator, which a caller
that only names the request or report types need not pay for.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from slotune.tuner._lazy import lazy_names as _lazy_names

if TYPE_CHECKING:
    from slotune.tuner.sim.calibration.measured import CalibrationReport
    from slotune.tuner.sim.calibration.objective import Errors
    from slotune.tuner.sim.calibration.overlay import (
        CalibrationRequest,
        calibrate_for_study,
        calibrate_overlay,
    )
    from slotune.tuner.sim.calibration.silicon_fit import calibrate_silicon_file
    from slotune.tuner.sim.calibration.window_fit import (
        WindowCalibration,
        WindowErrors,
        calibrate_window,
    )

# module -> the names it gives this package on first use
_LAZY: dict[str, tuple[str, ...]] = {
    "slotune.tuner.sim.calibration.measured": ("CalibrationReport",),
    "slotune.tuner.sim.calibration.objective": ("Errors",),
    "slotune.tuner.sim.calibration.overlay": (
        "CalibrationRequest",
        "calibrate_for_study",
        "calibrate_overlay",
    ),
    "slotune.tuner.sim.calibration.silicon_fit": ("calibrate_silicon_file",),
    "slotune.tuner.sim.calibration.window_fit": (
        "WindowCalibration",
        "WindowErrors",
        "calibrate_window",
    ),
}

__all__ = [
    "CalibrationReport",
    "CalibrationRequest",
    "Errors",
    "WindowCalibration",
    "WindowErrors",
    "calibrate_for_study",
    "calibrate_overlay",
    "calibrate_silicon_file",
    "calibrate_window",
]

# type checkers see only the names imported above, so a misspelt one is an error
if not TYPE_CHECKING:
    __getattr__ = _lazy_names(__name__, _LAZY)
