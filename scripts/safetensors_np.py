# SPDX-License-Identifier: MIT OR Apache-2.0
"""Writes numpy arrays as a .safetensors file (a JSON header, then raw little-endian bytes), for the
reference-data scripts. Bool is stored as U8 and int32 as I64, the dtypes the tests read."""
import json
import os
import struct

import numpy as np

_DT = {np.dtype("float32"): "F32", np.dtype("float64"): "F64", np.dtype("int64"): "I64", np.dtype("uint8"): "U8"}


def save_arrays(path, arrays):
    """Writes {name: array} to path (folders created), names in sorted order."""
    header, blobs, off = {}, [], 0
    for k in sorted(arrays):
        a = np.ascontiguousarray(arrays[k])
        if a.dtype == np.bool_:
            a = a.astype(np.uint8)
        if a.dtype == np.int32:
            a = a.astype(np.int64)
        b = a.tobytes()
        header[k] = {"dtype": _DT[a.dtype], "shape": list(a.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))
