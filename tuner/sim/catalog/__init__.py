"""GPU and model catalogs of the simulator: bundled YAML data plus user files."""

from slotune.tuner.sim.catalog._loader import (
    CATALOG_ENV,
    get_gpu,
    get_model,
    gpu_entry,
    list_gpus,
    list_models,
    load_catalog_file,
)
from slotune.tuner.sim.catalog._types import (
    GPU,
    QUANTIZATIONS,
    Efficiency,
    ModelSpec,
    StepTerms,
)

__all__ = [
    "CATALOG_ENV",
    "GPU",
    "QUANTIZATIONS",
    "Efficiency",
    "ModelSpec",
    "StepTerms",
    "get_gpu",
    "get_model",
    "gpu_entry",
    "list_gpus",
    "list_models",
    "load_catalog_file",
]
