"""Write a ``.safetensors`` file with NumPy alone (no torch, no safetensors package).

The format is an 8-byte little-endian header length, a JSON header naming each tensor's dtype,
shape and byte range, then the raw little-endian tensor bytes in that order. The header is
padded with spaces to a multiple of 8 so the data starts aligned, as the reference writer does.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from slotune.collector.textfile import open_output

_DTYPES = {np.dtype("<f4"): "F32", np.dtype("<f2"): "F16"}


def write_safetensors(path: Path, tensors: Mapping[str, np.ndarray]) -> None:
    """Write ``tensors`` (name -> float32/float16 array) to ``path``, in the mapping's order."""
    header: dict[str, object] = {"__metadata__": {"format": "pt"}}
    offset = 0
    blobs: list[bytes] = []
    for name, array in tensors.items():
        dtype = array.dtype.newbyteorder("<")
        blob = np.ascontiguousarray(array, dtype=dtype).tobytes()
        header[name] = {
            "dtype": _DTYPES[dtype],
            "shape": list(array.shape),
            "data_offsets": [offset, offset + len(blob)],
        }
        blobs.append(blob)
        offset += len(blob)
    encoded = json.dumps(header, separators=(",", ":")).encode()
    encoded += b" " * (-len(encoded) % 8)
    with open_output(path, "model weights") as out:
        out.write(struct.pack("<Q", len(encoded)))
        out.write(encoded)
        for blob in blobs:
            out.write(blob)
