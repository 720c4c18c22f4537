import pytest
import yaml

from slotune.collector.errors import ConfigError
from slotune.tuner.tune.export import export_config
from slotune.tuner.tune.gpu_slots import LOCK_DIR_ENV, acquire_slot


def test_two_workers_never_share_a_gpu(monkeypatch, tmp_path):
    monkeypatch.setenv(LOCK_DIR_ENV, str(tmp_path))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    with acquire_slot() as a, acquire_slot() as b:
        assert {a.device_ids, b.device_ids} == {("0",), ("1",)}
        assert a.env() == {"CUDA_VISIBLE_DEVICES": ",".join(a.device_ids)}
        with pytest.raises(ConfigError, match="fewer --workers"), acquire_slot():
            pass
    with acquire_slot() as again:  # released on exit
        assert again.device_ids == ("0",)


def test_tensor_parallel_workers_take_gpu_groups(monkeypatch, tmp_path):
    monkeypatch.setenv(LOCK_DIR_ENV, str(tmp_path))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1,2,3")
    with acquire_slot(2) as a, acquire_slot(2) as b:
        assert {a.device_ids, b.device_ids} == {("0", "1"), ("2", "3")}


def test_no_gpu_means_no_lock(monkeypatch, tmp_path):
    monkeypatch.setenv(LOCK_DIR_ENV, str(tmp_path))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    with acquire_slot() as a, acquire_slot() as b:
        assert a.device_ids == b.device_ids == ()


def test_export_vllm_command_line():
    text = export_config(
        {
            "max_num_seqs": 256,
            "max_num_batched_tokens": 16384,
            "enable_chunked_prefill": False,
            "max_model_len": 16384,
            "gpu_memory_utilization": 0.92,
        },
        engine="vllm",
        model="llama-3.1-8b",
        gpu="h100-sxm",
        fmt="vllm",
    )
    assert text == (
        "vllm serve meta-llama/Llama-3.1-8B-Instruct --max-model-len 16384 "
        "--gpu-memory-utilization 0.92 --max-num-batched-tokens 16384 "
        "--max-num-seqs 256 --no-enable-chunked-prefill\n"
    )


def test_export_trtllm_yaml_and_command():
    text = export_config(
        {
            "max_batch_size": 256,
            "kv_cache_config.enable_block_reuse": False,
            "scheduler_config.capacity_scheduler_policy": "MAX_UTILIZATION",
            "enable_chunked_prefill": True,
        },
        engine="trtllm",
        model="llama-3.1-8b",
        gpu="h100-sxm",
        fmt="trtllm",
    )
    options = yaml.safe_load(text.split("---")[0])
    assert options == {
        "enable_chunked_prefill": True,
        "kv_cache_config": {"enable_block_reuse": False},
        "scheduler_config": {"capacity_scheduler_policy": "MAX_UTILIZATION"},
    }
    assert "# trtllm-serve meta-llama/Llama-3.1-8B-Instruct --max_batch_size 256" in text
    with pytest.raises(ConfigError, match="--format trtllm"):
        export_config({}, engine="trtllm", model="llama-3.1-8b", gpu="h100-sxm", fmt="vllm")
