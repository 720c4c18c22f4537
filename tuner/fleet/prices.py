"""GPU prices per hour: the bundled catalog (``gpu_prices.yaml``, dated) and overrides."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib.resources import files

import yaml

from slotune.collector.errors import ConfigError


@dataclass(frozen=True, slots=True)
class GpuPrices:
    """USD per GPU-hour by catalog GPU id; ``as_of`` dates the bundled defaults."""

    per_hour: Mapping[str, float]
    as_of: str

    def of(self, gpu: str) -> float:
        price = self.per_hour.get(gpu)
        if price is None:
            raise ConfigError(f"no price for GPU {gpu!r}: pass --gpu-price {gpu}=USD_PER_HOUR")
        return price


def gpu_prices(overrides: Sequence[str] = ()) -> GpuPrices:
    """The catalog prices with ``ID=USD`` overrides (``--gpu-price h100-sxm=2.5``).

    Raises:
        ConfigError: an override that is not ``ID=number`` with a number >= 0.
    """
    data = yaml.safe_load(files("slotune.tuner.fleet").joinpath("gpu_prices.yaml").read_text())
    prices = {str(k): float(v) for k, v in data["prices"].items()}
    for item in overrides:
        gpu, sep, text = item.partition("=")
        try:
            value = float(text)
        except ValueError:
            value = -1.0
        if not sep or not gpu or value < 0:
            raise ConfigError(f"--gpu-price {item!r}: use ID=USD_PER_HOUR, e.g. h100-sxm=2.5")
        prices[gpu] = value
    return GpuPrices(prices, str(data["as_of"]))
