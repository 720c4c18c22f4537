"""AIConfigurator's estimates beside slotune's, from AIConfigurator's own virtual environment.

AIConfigurator (NVIDIA, Apache-2.0) pins dependencies of its own, so it is installed in a
virtual environment apart from slotune's, and ``_aic_estimate.py`` runs there, once for all
the rows of a benchmark:

    python3 -m venv .venv-aic && .venv-aic/bin/pip install aiconfigurator

That environment's Python is the ``python`` argument, else ``$SLOTUNE_AIC_PYTHON``, else
``.venv-aic/bin/python`` in the repository root. Without it every row's answer is the reason,
which says how to install it.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

SCRIPT = Path(__file__).with_name("_aic_estimate.py")
DEFAULT_PYTHON = Path(__file__).resolve().parents[1] / ".venv-aic" / "bin" / "python"
INSTALL = "python3 -m venv .venv-aic && .venv-aic/bin/pip install aiconfigurator"


@dataclass(frozen=True)
class AicRow:
    """One configuration to estimate: engine, model, precision, tensor parallelism and load."""

    id: str
    backend: str
    model_path: str
    precision: str
    isl: int
    osl: int
    batch_size: int
    tp_size: int
    system: str = "h100_sxm"

    @classmethod
    def from_silicon(cls, row: Mapping[str, str]) -> AicRow:
        """An ``agg`` row of AIConfigurator's silicon measurements (its CSV's columns)."""
        return cls(
            id=row["id"],
            backend=row["backend"],
            model_path=row["model_path"],
            precision=row["precision"] or "bf16",
            isl=int(row["isl"]),
            osl=int(row["osl"]),
            batch_size=int(row["batch_size"]),
            tp_size=int(row["tp_size"]),
            system=row["system"],
        )


@dataclass(frozen=True)
class AicEstimate:
    """AIConfigurator's mean TTFT and TPOT for one row, and what it based them on."""

    ttft_ms: float
    tpot_ms: float
    backend_version: str  # the version of AIConfigurator's kernel database for the engine
    model_path: str  # the checkpoint whose architecture it modelled
    warning: str | None  # its warning that the batch exceeds its KV-cache estimate


def aic_python(python: Path | None = None) -> Path:
    """The Python of AIConfigurator's virtual environment (see the module's docstring)."""
    return python or Path(os.environ.get("SLOTUNE_AIC_PYTHON") or DEFAULT_PYTHON)


def aic_unavailable(python: Path | None = None) -> str | None:
    """Why AIConfigurator cannot run, with how to install it; None when it can."""
    path = aic_python(python)
    if path.is_file():
        return None
    return f"AIC not installed: no {path}; {INSTALL}, or set SLOTUNE_AIC_PYTHON"


def aic_estimates(
    rows: Iterable[AicRow], python: Path | None = None, timeout_s: float = 900.0
) -> dict[str, AicEstimate | str]:
    """AIConfigurator's estimate of each row by id, or the reason it has none."""
    rows = list(rows)
    reason = aic_unavailable(python)
    if reason is not None:
        return dict.fromkeys((row.id for row in rows), reason)
    try:
        done = subprocess.run(
            [str(aic_python(python)), str(SCRIPT)],
            input="".join(json.dumps(asdict(row)) + "\n" for row in rows),
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return dict.fromkeys((row.id for row in rows), f"AIC timed out after {timeout_s:g} s")
    # Only the JSON lines: a library's native code may write to stdout past its redirection.
    answers = {
        answer["id"]: _answer(answer)
        for answer in (json.loads(line) for line in done.stdout.splitlines() if line[:1] == "{")
    }
    last_log = next(iter(reversed(done.stderr.strip().splitlines())), "")
    missing = f"AIC gave no estimate (exit {done.returncode}): {last_log}"
    return {row.id: answers.get(row.id, missing) for row in rows}


def _answer(answer: dict[str, Any]) -> AicEstimate | str:
    if "error" in answer:
        return f"AIC: {answer['error']}"
    return AicEstimate(
        ttft_ms=float(answer["aic_ttft_ms"]),
        tpot_ms=float(answer["aic_tpot_ms"]),
        backend_version=str(answer["aic_backend_version"]),
        model_path=str(answer["aic_model_path"]),
        warning=answer["aic_warning"],
    )
