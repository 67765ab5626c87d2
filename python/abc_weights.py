# SPDX-License-Identifier: MIT
"""abc_weights: a layer's named tensors and configuration in abc's weights file format
(docs/weights.md), which C++ reads with abc::load_weights (abc/weights.hpp). Pure numpy; needs
neither torch nor the compiled module.

    save_weights("layer.abcw", {"w_phi": layer.w_phi, "w_q": q_proj.weight}, {"slots": 32, "control": "mlp"})
    tensors, meta = load_weights("layer.abcw")      # {name: numpy array}, {key: int | float | str}

Tensors are float32 or float64 numpy arrays (or torch tensors: they are detached and copied to the
CPU), of rank 0 to 8, written in C order; an nn.Linear weight is [out, in] and stays so. Metadata
values are int (int64), float (float64) or str (UTF-8). Both dicts keep their order in the file, and
a file that loads writes back byte for byte.
"""
import struct
import zlib

import numpy as np

__all__ = ["save_weights", "load_weights", "to_bytes", "from_bytes", "FORMAT_VERSION"]

MAGIC = b"ABCWGHTS"
FORMAT_VERSION = 1
MAX_RANK = 8
_DTYPES = {1: np.dtype("<f4"), 2: np.dtype("<f8")}
_CODES = {np.dtype("float32"): 1, np.dtype("float64"): 2}
_INTEGER, _FLOAT, _STRING = 1, 2, 3
_MAX_DIM, _MAX_BYTES = 1 << 40, 1 << 62


def _array(name, value):
    if hasattr(value, "detach"):  # a torch tensor, without importing torch
        value = value.detach().cpu().numpy()
    a = np.asarray(value)
    if a.dtype not in _CODES:
        raise ValueError(f"abc_weights: tensor '{name}' is {a.dtype}, expected float32 or float64")
    if a.ndim > MAX_RANK:
        raise ValueError(f"abc_weights: tensor '{name}' has rank {a.ndim}, expected at most {MAX_RANK}")
    return a


def _text(s):
    b = s.encode("utf-8")
    return struct.pack("<I", len(b)) + b


def to_bytes(tensors, meta=None):
    """The file's bytes for `tensors` ({name: array}) and `meta` ({key: int | float | str})."""
    parts = [MAGIC, struct.pack("<II", FORMAT_VERSION, len(meta or {}))]
    for key, value in (meta or {}).items():
        if not key:
            raise ValueError("abc_weights: a metadata key is empty, expected at least one character")
        parts.append(_text(key))
        if isinstance(value, (bool, int, np.integer)):
            if not -(1 << 63) <= int(value) < (1 << 63):
                raise ValueError(f"abc_weights: metadata '{key}' is {value}, expected a value that fits int64")
            parts.append(struct.pack("<Iq", _INTEGER, int(value)))
        elif isinstance(value, (float, np.floating)):
            parts.append(struct.pack("<Id", _FLOAT, float(value)))
        elif isinstance(value, str):
            parts.append(struct.pack("<I", _STRING) + _text(value))
        else:
            raise ValueError(f"abc_weights: metadata '{key}' is {type(value).__name__}, expected int, float or str")
    parts.append(struct.pack("<I", len(tensors)))
    for name, value in tensors.items():
        if not name:
            raise ValueError("abc_weights: a tensor name is empty, expected at least one character")
        a = _array(name, value)
        parts.append(_text(name) + struct.pack("<II", _CODES[a.dtype], a.ndim))
        parts.append(struct.pack(f"<{a.ndim}Q", *a.shape))
        parts.append(np.ascontiguousarray(a, dtype=a.dtype.newbyteorder("<")).tobytes())
    body = b"".join(parts)
    return body + struct.pack("<I", zlib.crc32(body))


def save_weights(path, tensors, meta=None):
    """Writes `tensors` ({name: numpy array or torch tensor}) and `meta` to the file at `path`."""
    data = to_bytes(tensors, meta)
    with open(path, "wb") as f:
        f.write(data)


def from_bytes(data, who="abc_weights.from_bytes"):
    """(tensors, meta) from a file's bytes, checked as abc::Weights::from_bytes checks them; a
    ValueError names what is wrong."""
    data = bytes(data)

    def fail(what):
        raise ValueError(f"{who}: {what}")

    if len(data) < 16 or data[:8] != MAGIC:
        fail(f'not a weights file (magic "ABCWGHTS" missing, {len(data)} bytes)')
    (version,) = struct.unpack_from("<I", data, 8)
    if version != FORMAT_VERSION:
        fail(f"version is {version}, expected {FORMAT_VERSION}")
    end = len(data) - 4
    if zlib.crc32(data[:end]) != struct.unpack_from("<I", data, end)[0]:
        fail("checksum mismatch: the file is truncated or corrupt")
    at = 12

    def take(n, what):
        nonlocal at
        if end - at < n:
            fail(f"truncated: {what} needs {n} bytes at byte {at}, expected at most the {end - at} before the checksum")
        at += n
        return data[at - n:at]

    def text(what):
        (n,) = struct.unpack("<I", take(4, f"the length of {what}"))
        return take(n, what).decode("utf-8")

    def new_name(what, e, held):
        """Entry e's name: not empty, not one of `held`'s."""
        name = text(f"{what} {e}")
        if not name:
            fail(f"{what} {e} is empty, expected at least one character")
        if name in held:
            kind, plural = what.split(" ")[0], "keys" if what.endswith("key") else "names"
            fail(f"{kind} '{name}' appears twice, expected unique {plural}")
        return name

    meta, tensors = {}, {}
    (count,) = struct.unpack("<I", take(4, "the metadata count"))
    for e in range(count):
        key = new_name("metadata key", e, meta)
        (kind,) = struct.unpack("<I", take(4, f"the kind of metadata '{key}'"))
        if kind == _INTEGER:
            (meta[key],) = struct.unpack("<q", take(8, f"metadata '{key}'"))
        elif kind == _FLOAT:
            (meta[key],) = struct.unpack("<d", take(8, f"metadata '{key}'"))
        elif kind == _STRING:
            meta[key] = text(f"metadata '{key}'")
        else:
            fail(f"metadata '{key}' has kind {kind}, expected 1 (integer), 2 (float) or 3 (string)")
    (count,) = struct.unpack("<I", take(4, "the tensor count"))
    for e in range(count):
        name = new_name("tensor name", e, tensors)
        code, rank = struct.unpack("<II", take(8, f"the dtype and rank of tensor '{name}'"))
        if code not in _DTYPES:
            fail(f"tensor '{name}' has dtype {code}, expected 1 (float32) or 2 (float64)")
        if rank > MAX_RANK:
            fail(f"tensor '{name}' has rank {rank}, expected at most {MAX_RANK}")
        shape = struct.unpack(f"<{rank}Q", take(8 * rank, f"the shape of tensor '{name}'"))
        dtype = _DTYPES[code]
        dims = " x ".join(str(d) for d in shape)
        # As abc::Weights: the zeros left out, so that the rule does not depend on their place.
        nonzero = dtype.itemsize * int(np.prod([d for d in shape if d], dtype=object))
        if any(d > _MAX_DIM for d in shape) or nonzero > _MAX_BYTES:
            fail(f"tensor '{name}' is [{dims}], expected dimensions from 0 to 2^40 and, zeros left out, at most "
                 "2^62 bytes")
        nbytes = nonzero if all(shape) else 0
        raw = take(nbytes, f"the data of tensor '{name}' ([{dims}] {dtype.name})")
        tensors[name] = np.frombuffer(raw, dtype=dtype).reshape(shape).astype(dtype.newbyteorder("="))
    if at != end:
        fail(f"length is {len(data)} bytes, expected {at + 4} (the checksum follows the last tensor)")
    return tensors, meta


def load_weights(path):
    """(tensors, meta) from the file at `path`: {name: numpy array}, {key: int | float | str}."""
    with open(path, "rb") as f:
        data = f.read()
    return from_bytes(data, who=f"abc_weights.load_weights: {path}")
