"""Tuning: a study's spec and storage, its trials on a backend, objectives, sampler, search
space, report and export (the face is :mod:`tuner`, whose names load on first use)."""
