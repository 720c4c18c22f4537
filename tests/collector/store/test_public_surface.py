import collector.store


def test_public_surface_is_deliberate() -> None:
    assert sorted(collector.store.__all__) == collector.store.__all__
    assert all(hasattr(collector.store, name) for name in collector.store.__all__)
    assert {"open_store", "write_samples", "histogram_quantile", "SampleIn", "Store",
            "save_slos", "save_bench_run", "save_study", "prune", "rollup", "upgrade"} <= set(
        collector.store.__all__)
    public = {n for n in dir(collector.store) if not n.startswith("_")}
    assert public - set(collector.store.__all__) == set()
