"""Install the repository's top-level folders under the one ``slotune`` import namespace.

The folders stay at the top of the repository (``collector/``, ``tuner/``, ``ui/``,
``migrations/``); installed, they are ``slotune.collector``, ``slotune.tuner``, … so the
distribution owns no generic top-level name.
"""

from setuptools import find_namespace_packages, setup

LAYERS = ("collector", "tuner", "ui", "migrations")

packages = [
    f"slotune.{name}"
    for name in find_namespace_packages(
        include=[f"{layer}*" for layer in LAYERS], exclude=["*__pycache__"]
    )
]

setup(
    packages=packages,
    package_dir={f"slotune.{layer}": layer for layer in LAYERS},
)
