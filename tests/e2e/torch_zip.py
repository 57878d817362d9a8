"""torch.save's zip format written without torch (the e2e venv has none): for test checkpoints too
large to check in. The pickle is the one torch writes for a state dict of contiguous float32
tensors -- an OrderedDict of torch._utils._rebuild_tensor_v2 calls on persistent storages -- and
each storage is the stored (uncompressed) entry archive/data/<key>."""

import struct
import zipfile
from pathlib import Path

import numpy as np


def _unicode(s: str) -> bytes:
    b = s.encode()
    return b"X" + struct.pack("<I", len(b)) + b


def _int(n: int) -> bytes:
    return b"J" + struct.pack("<i", n)


def _tuple(items) -> bytes:
    return b"(" + b"".join(items) + b"t"


def _state_dict_pickle(shapes: dict) -> bytes:
    ordered_dict = b"ccollections\nOrderedDict\n)R"
    out = b"\x80\x02" + ordered_dict + b"("
    for key, (name, shape) in enumerate(shapes.items()):
        numel = int(np.prod(shape, dtype=np.int64))
        strides = [int(np.prod(shape[k + 1:], dtype=np.int64)) for k in range(len(shape))]
        storage = _tuple([_unicode("storage"), b"ctorch\nFloatStorage\n", _unicode(str(key)),
                          _unicode("cpu"), _int(numel)]) + b"Q"  # fmt: skip
        args = _tuple([storage, _int(0), _tuple(map(_int, shape)), _tuple(map(_int, strides)),
                       b"\x89", ordered_dict])  # fmt: skip
        out += _unicode(name) + b"ctorch._utils\n_rebuild_tensor_v2\n" + args + b"R"
    return out + b"u."


def write_torch_bin(path: Path, tensors: dict) -> None:
    """{name: float32 ndarray} -> a torch.save checkpoint at `path`."""
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_STORED) as z:
        z.writestr("archive/data.pkl", _state_dict_pickle({n: t.shape for n, t in tensors.items()}))
        z.writestr("archive/byteorder", "little")
        for key, t in enumerate(tensors.values()):
            z.writestr(f"archive/data/{key}", np.ascontiguousarray(t, dtype="<f4").tobytes())
        z.writestr("archive/version", "3\n")
