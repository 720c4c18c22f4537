"""The silicon half of ``sim_fidelity.py``: every modellable row of a silicon CSV simulated in a
closed loop, next to AIConfigurator's estimate of the same row, grouped and plotted.

Errors are ``predicted / measured - 1`` in per cent; a group prints the median and p90 of the
absolute error and the median signed error, for slotune and for AIC on the rows both
estimated.
"""

from __future__ import annotations

import csv
import statistics
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from _aic import AicEstimate, AicRow, aic_estimates, aic_unavailable

from slotune.collector.silicon import SiliconRow, read_silicon
from slotune.tuner.sim.silicon import SiliconCase, silicon_case, simulate_case

RESULTS = Path(__file__).parent / "results"
# Concurrency bands of the grouped table.
_BANDS = ((1, 8), (9, 32), (33, 128), (129, 1 << 30))


@dataclass(frozen=True, slots=True)
class Compared:
    """One modelled row: measured, slotune's and (where it estimated) AIC's means in ms."""

    row: SiliconRow
    sim_ttft_ms: float
    sim_tpot_ms: float
    aic: AicEstimate | None

    def error(self, metric: str, *, by_aic: bool = False) -> float | None:
        measured = self.row.ttft_ms if metric == "ttft" else self.row.tpot_ms
        if by_aic:
            if self.aic is None:
                return None
            predicted = self.aic.ttft_ms if metric == "ttft" else self.aic.tpot_ms
        else:
            predicted = self.sim_ttft_ms if metric == "ttft" else self.sim_tpot_ms
        return 100.0 * (predicted / measured - 1.0)


def compare(
    path: Path, *, aic_python: Path | None
) -> tuple[list[Compared], list[tuple[SiliconRow, str]]]:
    """Simulate every row slotune can model; the rest with the reason it cannot."""
    rows = read_silicon(path)
    cases: list[SiliconCase] = []
    skipped: list[tuple[SiliconRow, str]] = []
    for row in rows:
        case = silicon_case(row)
        if isinstance(case, str):
            skipped.append((row, case))
        else:
            cases.append(case)
    aic = _aic(cases, aic_python)
    out = []
    for case in cases:
        sim = simulate_case(case)
        estimate = aic.get(case.row.row_id)
        out.append(
            Compared(
                case.row,
                sim.ttft_ms,
                sim.tpot_ms,
                estimate if isinstance(estimate, AicEstimate) else None,
            )
        )
    return out, skipped


def _aic(cases: Sequence[SiliconCase], python: Path | None) -> dict[str, AicEstimate | str]:
    missing = aic_unavailable(python)
    if missing:
        print(missing)
        return {}
    rows = [
        AicRow(
            id=c.row.row_id,
            backend=c.row.engine,
            model_path=c.row.model_path,
            precision=c.row.precision,
            isl=c.row.input_tokens,
            osl=c.row.output_tokens,
            batch_size=c.row.concurrency,
            tp_size=c.row.tensor_parallel_size,
            system=c.row.system,
        )
        for c in cases
    ]
    return aic_estimates(rows, python)


def _stats(errors: Iterable[float | None]) -> str:
    values = [e for e in errors if e is not None]
    if not values:
        return f"{'-':>6} {'-':>6} {'-':>7}"
    absolute = sorted(abs(e) for e in values)
    p90 = absolute[min(len(absolute) - 1, int(0.9 * len(absolute)))]
    return f"{statistics.median(absolute):6.1f} {p90:6.1f} {statistics.median(values):+7.1f}"


def _band(concurrency: int) -> str:
    low, high = next(b for b in _BANDS if b[0] <= concurrency <= b[1])
    return f"{low}-{high}" if high < 1 << 30 else f"{low}+"


def table(compared: Sequence[Compared]) -> list[str]:
    """The grouped error table, one line a group, then per engine x model and overall."""
    head = (
        f"{'group':44} {'rows':>4} | {'slotune TTFT med p90 signed':>22} | "
        f"{'TPOT med p90 signed':>22} | {'AIC TTFT med p90 signed':>22} | {'AIC TPOT':>22}"
    )
    lines = [head, "-" * len(head)]

    def line(label: str, items: Sequence[Compared]) -> str:
        cols = [
            _stats(c.error(m, by_aic=a) for c in items)
            for a, m in ((False, "ttft"), (False, "tpot"), (True, "ttft"), (True, "tpot"))
        ]
        return f"{label:44} {len(items):4} | " + " | ".join(f"{c:>22}" for c in cols)

    for keyer in (
        lambda c: (
            f"{c.row.engine} {_model(c)} {c.row.precision} TP{c.row.tensor_parallel_size} "
            f"C{_band(c.row.concurrency)}"
        ),
        lambda c: f"{c.row.engine} {_model(c)} {c.row.precision}",
        lambda c: c.row.engine,
    ):
        groups: dict[str, list[Compared]] = defaultdict(list)
        for c in compared:
            groups[keyer(c)].append(c)
        lines += [line(k, v) for k, v in sorted(groups.items())]
        lines.append("")
    lines.append(line("all modelled rows", compared))
    both = [c for c in compared if c.aic is not None]
    lines.append(line("rows AIC also estimated", both))
    return lines


def _model(c: Compared) -> str:
    return c.row.model_path.rsplit("/", 1)[-1]


def write_rows(
    compared: Sequence[Compared], skipped: Sequence[tuple[SiliconRow, str]], path: Path
) -> None:
    """Every row of the file: its figures, or why it was not modelled."""
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(
            [
                "id", "engine", "model", "precision", "tp", "isl", "osl", "concurrency",
                "ttft_ms", "tpot_ms", "sim_ttft_ms", "sim_tpot_ms", "aic_ttft_ms", "aic_tpot_ms",
                "not_modelled",
            ]
        )  # fmt: skip
        for c in compared:
            r = c.row
            w.writerow(
                [
                    r.row_id, r.engine, r.model_path, r.precision, r.tensor_parallel_size,
                    r.input_tokens, r.output_tokens, r.concurrency,
                    f"{r.ttft_ms:.2f}", f"{r.tpot_ms:.3f}", f"{c.sim_ttft_ms:.2f}",
                    f"{c.sim_tpot_ms:.3f}",
                    "" if c.aic is None else f"{c.aic.ttft_ms:.2f}",
                    "" if c.aic is None else f"{c.aic.tpot_ms:.3f}",
                    "",
                ]
            )  # fmt: skip
        for r, reason in skipped:
            w.writerow([r.row_id, r.engine, r.model_path, r.precision, r.tensor_parallel_size,
                        r.input_tokens, r.output_tokens, r.concurrency,
                        f"{r.ttft_ms:.2f}", f"{r.tpot_ms:.3f}", "", "", "", "", reason])  # fmt: skip


def plot(compared: Sequence[Compared], path: Path) -> bool:
    """Predicted against measured TTFT and TPOT, one colour per engine; False without
    matplotlib (``pip install 'slotune[bench]'``)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    fig, axes = plt.subplots(1, 2, figsize=(12, 5.5))
    colours = {"vllm": "tab:blue", "sglang": "tab:orange", "trtllm": "tab:green"}
    for ax, metric, label in ((axes[0], "ttft", "TTFT (ms)"), (axes[1], "tpot", "TPOT (ms)")):
        for engine, colour in colours.items():
            rows = [c for c in compared if c.row.engine == engine]
            measured = [c.row.ttft_ms if metric == "ttft" else c.row.tpot_ms for c in rows]
            sim = [c.sim_ttft_ms if metric == "ttft" else c.sim_tpot_ms for c in rows]
            ax.scatter(measured, sim, s=10, c=colour, label=f"slotune, {engine}", alpha=0.7)
            aic = [(m, c.aic.ttft_ms if metric == "ttft" else c.aic.tpot_ms)
                   for m, c in zip(measured, rows, strict=True) if c.aic is not None]  # fmt: skip
            if aic:
                ax.scatter(*zip(*aic, strict=True), s=10, marker="x", c=colour, alpha=0.35,
                           label=f"AIC, {engine}")  # fmt: skip
        low, high = ax.get_xlim()
        ax.plot([low, high], [low, high], "k--", lw=0.8)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel(f"measured {label}")
        ax.set_ylabel(f"predicted {label}")
        ax.set_title(f"{label}: predicted vs measured, closed loop")
    axes[1].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True
