#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""python.weights: abc_weights (Python) and abc::Weights (C++) read each other's files bit for bit.

    test_weights.py REFERENCE_PROGRAM WORK_DIR

Python writes a file of awkward values (a NaN with a payload, -0, infinities, subnormals, every rank
from 0 to 3, an empty tensor, both dtypes, every metadata kind); the C++ program reads it with
abc::load_weights, prints every value's bit pattern (compared with Python's) and writes it back
(compared byte for byte). The C++ program also writes a file of its own, which Python reads and
compares value by value and writes back byte for byte. Then the errors: a damaged file is refused
with the message C++ gives for it."""
import os
import struct
import subprocess
import sys
import zlib

import numpy as np

import abc_weights


def bits(a):
    a = np.ascontiguousarray(a)
    view = a.view(np.uint32 if a.dtype == np.float32 else np.uint64).reshape(-1)
    return [format(int(b), "x") for b in view]


def python_file():
    rng = np.random.default_rng(5)
    nan = np.array([0x7FC01234], dtype=np.uint32).view(np.float32)[0]
    awkward = np.array([-0.0, np.inf, -np.inf, nan, 1e-45, np.finfo(np.float32).max, 1 / 3], dtype=np.float32)
    tensors = {
        "attn.w_phi": rng.standard_normal((4, 6)).astype(np.float32),
        "awkward": awkward,
        "head.bias": rng.standard_normal(5),                        # float64
        "rank3": rng.standard_normal((2, 3, 2)).astype(np.float32),
        "scalar": np.float64(2.5),
        "empty": np.zeros((0, 3), dtype=np.float32),
        "transposed": rng.standard_normal((3, 4)).T,               # not C-contiguous: written in C order
    }
    meta = {"control": "mlp", "slots": 8, "big": -(2**62) - 3, "tau": 0.1, "name": "π ≈ 3.14", "flag": True}
    return tensors, meta


def check_described(lines, tensors, meta):
    seen_t, seen_m = [], []
    for line in lines:
        words = line.split(" ")
        if words[0] == "tensor":
            name, dtype, rank = words[1], words[2], int(words[3])
            shape = tuple(int(w) for w in words[4:4 + rank])
            a = np.asarray(tensors[name])
            assert dtype == a.dtype.name and shape == a.shape, (line, a.dtype, a.shape)
            assert words[4 + rank:] == bits(a), f"C++ decoded tensor {name} differently"
            seen_t.append(name)
        elif words[0] == "meta":
            key, kind, value = words[1], words[2], words[3] if len(words) > 3 else ""
            expected = meta[key]
            if kind == "int":
                assert isinstance(expected, int) and int(value) == int(expected), line
            elif kind == "float":
                assert value == format(struct.unpack("<Q", struct.pack("<d", expected))[0], "x"), line
            else:
                assert bytes.fromhex(value).decode("utf-8") == expected, line
            seen_m.append(key)
    assert seen_t == list(tensors) and seen_m == list(meta), (seen_t, seen_m)


def expected_cpp_file():
    m = (np.arange(15) * 37 % 101 - 50).astype(np.float32).reshape(3, 5) / np.float32(64)
    b = np.array([-0.0, 1e-310, np.inf, -1.5])
    cube = (np.arange(24, dtype=np.float32) - np.float32(11.5)).reshape(2, 3, 4)
    tensors = {"proj.weight": m, "proj.bias": b, "cube": cube, "scalar": np.float64(0.1)}
    meta = {"control": "mlp", "slots": -9007199254740993, "tau": 8.25}
    return tensors, meta


def expect_error(data, message):
    try:
        abc_weights.from_bytes(data)
    except ValueError as e:
        assert str(e) == "abc_weights.from_bytes: " + message, str(e)
        return
    raise AssertionError(f"accepted a bad file; expected: {message}")


def main():
    program, work = sys.argv[1], sys.argv[2]
    os.makedirs(work, exist_ok=True)
    py_path, echo_path, cpp_path = (os.path.join(work, n) for n in ("python.abcw", "echo.abcw", "cpp.abcw"))

    # Python -> C++: every value's bits as C++ decoded them, and the file written back unchanged.
    tensors, meta = python_file()
    abc_weights.save_weights(py_path, tensors, meta)
    run = subprocess.run([program, "--weights", py_path, echo_path, cpp_path], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    check_described(run.stdout.splitlines(), tensors, {**meta, "flag": 1})
    with open(py_path, "rb") as a, open(echo_path, "rb") as b:
        assert a.read() == b.read(), "C++ wrote back other bytes than Python wrote"

    # C++ -> Python: the values C++ wrote, exactly, and the same bytes when Python writes them.
    got, got_meta = abc_weights.load_weights(cpp_path)
    want, want_meta = expected_cpp_file()
    assert list(got) == list(want) and got_meta == want_meta, (list(got), got_meta)
    for name in want:
        assert got[name].dtype == np.asarray(want[name]).dtype, name
        assert bits(got[name]) == bits(want[name]), name
    with open(cpp_path, "rb") as f:
        assert abc_weights.to_bytes(got, got_meta) == f.read(), "Python wrote back other bytes than C++ wrote"

    # Damaged files: the messages of abc::Weights::from_bytes (tests/test_error_messages.cpp).
    good = abc_weights.to_bytes({"w_phi": np.full((4, 5), 0.5, dtype=np.float32)}, {"slots": 4})
    assert len(good) == 158
    expect_error(b"\0" * 20, 'not a weights file (magic "ABCWGHTS" missing, 20 bytes)')
    expect_error(good[:8] + struct.pack("<I", 2) + good[12:], "version is 2, expected 1")
    flipped = bytearray(good)
    flipped[80] ^= 1
    expect_error(bytes(flipped), "checksum mismatch: the file is truncated or corrupt")
    cut = good[:-12]
    expect_error(cut + struct.pack("<I", zlib.crc32(cut)),
                 "truncated: the data of tensor 'w_phi' ([4 x 5] float32) needs 80 bytes at byte 74, "
                 "expected at most the 72 before the checksum")
    long = good[:-4] + b"\0\0\0"
    expect_error(long + struct.pack("<I", zlib.crc32(long)),
                 "length is 161 bytes, expected 158 (the checksum follows the last tensor)")
    dtype7 = bytearray(good[:-4])
    dtype7[50:54] = struct.pack("<I", 7)
    expect_error(bytes(dtype7) + struct.pack("<I", zlib.crc32(bytes(dtype7))),
                 "tensor 'w_phi' has dtype 7, expected 1 (float32) or 2 (float64)")
    # Shapes with a zero: the nonzero dimensions' product is bounded wherever the zero stands.
    def one_tensor(dims):
        body = (b"ABCWGHTS" + struct.pack("<III", 1, 0, 1) + struct.pack("<I", 1) + b"e"
                + struct.pack(f"<II{len(dims)}Q", 1, len(dims), *dims))
        return body + struct.pack("<I", zlib.crc32(body))
    empty = abc_weights.from_bytes(one_tensor((1 << 20, 0, 1 << 20)))[0]["e"]
    assert empty.shape == (1 << 20, 0, 1 << 20) and empty.dtype == np.float32
    for dims in ((1 << 40, 1 << 40, 0), (0, 1 << 40, 1 << 40)):
        expect_error(one_tensor(dims), f"tensor 'e' is [{' x '.join(map(str, dims))}], expected dimensions from 0 to "
                                       "2^40 and, zeros left out, at most 2^62 bytes")
    for bad, message in (({"w": np.zeros(2, dtype=np.int64)}, "tensor 'w' is int64, expected float32 or float64"),
                         ({"": np.zeros(2)}, "a tensor name is empty, expected at least one character")):
        try:
            abc_weights.to_bytes(bad)
            raise AssertionError("wrote a bad tensor")
        except ValueError as e:
            assert str(e) == "abc_weights: " + message, str(e)
    print(f"python.weights: ok ({len(tensors)} tensors Python -> C++, {len(want)} C++ -> Python, bit for bit)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
