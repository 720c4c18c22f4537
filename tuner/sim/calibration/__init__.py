"""Fitting the cost model's coefficients to measured operator timings."""
