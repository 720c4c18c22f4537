import slotune.collector.store


def test_public_surface_is_deliberate() -> None:
    assert sorted(slotune.collector.store.__all__) == slotune.collector.store.__all__
    assert all(hasattr(slotune.collector.store, name) for name in slotune.collector.store.__all__)
    assert {
        "open_store",
        "write_samples",
        "histogram_quantile",
        "SampleIn",
        "Store",
        "save_slos",
        "save_bench_run",
        "save_study",
        "prune",
        "rollup",
        "upgrade",
    } <= set(slotune.collector.store.__all__)
    public = {n for n in dir(slotune.collector.store) if not n.startswith("_")}
    assert public - set(slotune.collector.store.__all__) == set()
