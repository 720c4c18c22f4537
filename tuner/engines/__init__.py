"""Tunable engines: one adapter per engine (:mod:`.base` states the contract)."""
