"""A small bounded Nelder-Mead minimiser (numpy only)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np


def minimize(
    objective: Callable[[np.ndarray], float],
    start: Sequence[float],
    lower: Sequence[float],
    upper: Sequence[float],
    *,
    steps: Sequence[float],
    max_evals: int = 3000,
    tolerance: float = 1e-7,
) -> tuple[np.ndarray, float]:
    """Minimises ``objective`` inside the box ``[lower, upper]``.

    Points outside the box are clipped onto it before evaluation, so the search stays
    feasible. Restarts once from the best point to escape a collapsed simplex.

    Returns:
        The best point and its objective value.
    """
    lo, hi = np.asarray(lower, float), np.asarray(upper, float)

    def f(x: np.ndarray) -> float:
        return objective(np.clip(x, lo, hi))

    best = np.clip(np.asarray(start, float), lo, hi)
    best_value = f(best)
    evals = 0
    for _ in range(2):
        simplex = [best] + [best + np.eye(len(best))[i] * steps[i] for i in range(len(best))]
        values = [f(x) for x in simplex]
        while evals < max_evals // 2:
            order = np.argsort(values)
            simplex = [simplex[i] for i in order]
            values = [values[i] for i in order]
            if values[-1] - values[0] < tolerance:
                break
            centroid = np.mean(simplex[:-1], axis=0)
            reflected = centroid + (centroid - simplex[-1])
            r = f(reflected)
            evals += 1
            if r < values[0]:
                expanded = centroid + 2.0 * (centroid - simplex[-1])
                e = f(expanded)
                evals += 1
                simplex[-1], values[-1] = (expanded, e) if e < r else (reflected, r)
            elif r < values[-2]:
                simplex[-1], values[-1] = reflected, r
            else:
                contracted = centroid + 0.5 * (simplex[-1] - centroid)
                c = f(contracted)
                evals += 1
                if c < values[-1]:
                    simplex[-1], values[-1] = contracted, c
                else:
                    simplex = [simplex[0] + 0.5 * (x - simplex[0]) for x in simplex]
                    values = [f(x) for x in simplex]
                    evals += len(simplex)
        i = int(np.argmin(values))
        if values[i] < best_value:
            best, best_value = np.clip(simplex[i], lo, hi), values[i]
        evals = 0
    return best, best_value
