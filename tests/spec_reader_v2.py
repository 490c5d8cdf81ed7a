"""An independent reader of rumi spec 0.2 files, written from the reference's format notes.

Like ``spec_reader.py`` for 0.1.0 it imports nothing from rumimm and uses ``struct``
and plain Python integers, so a bug shared by rumimm's 0.2 reader and writer still
fails a test.  ``parse_file(path)`` returns every field of the file header, the 13-tag
IFD, the frame table and the trailer, asserting each layout rule on the way
(``SpecViolation`` names the first one broken); ``blob_of(parsed)`` builds the canonical
32-byte header blob from them.
"""

from __future__ import annotations

import struct

__all__ = ["TAGS", "SpecViolation", "blob_of", "frame_index", "parse_blob", "parse_file"]

#: (tag, type) of the fixed IFD in file order; type 3 SHORT, 4 LONG, 12 DOUBLE, 16 LONG8.
TAGS = [(256, 4), (257, 4), (258, 3), (277, 3), (322, 3), (323, 3), (324, 16), (325, 4), (339, 3),
        (34264, 12), (34735, 3), (65000, 3), (65001, 4)]
_SIZE = {3: 2, 4: 4, 12: 8, 16: 8}
_CODE = {3: "H", 4: "I", 12: "d", 16: "Q"}


class SpecViolation(ValueError):
    pass


def _need(cond, msg):
    if not cond:
        raise SpecViolation(msg)


def _bits(buf: bytes, n: int, bits: int) -> list[int]:
    """n values of ``bits`` bits, LSB first, one bit at a time."""
    out = []
    for i in range(n):
        v = 0
        for j in range(bits):
            k = i * bits + j
            v |= ((buf[k // 8] >> (k % 8)) & 1) << j
        out.append(v)
    return out


def frame_index(unit: int, across: int, bands: int, times: int, row: int, col: int, band: int, step: int) -> int:
    s = row * across + col
    if unit == 0:
        return (s * bands + band) * times + step
    if unit == 9:
        return (s * times + step) * bands + band
    return s


def parse_file(path) -> dict:
    with open(path, "rb") as fh:
        d = fh.read()
    _need(d[:4] == b"RUMI", "magic is not RUMI")
    version, reserved, ifd = struct.unpack_from("<HHQ", d, 4)
    _need((version, reserved, ifd) == (1, 0, 16), "file header version/reserved/ifd offset")
    (count,) = struct.unpack_from("<Q", d, 16)
    _need(count == 13, f"IFD has {count} entries")
    pos = 292
    vals = {}
    for i, (tag, typ) in enumerate(TAGS):
        t, ty, cnt = struct.unpack_from("<HHQ", d, 24 + 20 * i)
        raw = d[24 + 20 * i + 12:24 + 20 * i + 20]
        _need((t, ty) == (tag, typ), f"entry {i} is tag {t} type {ty}")
        nbytes = _SIZE[ty] * cnt
        if nbytes <= 8:
            _need(raw[nbytes:] == b"\0" * (8 - nbytes), f"tag {tag} spare bytes")
            data = raw[:nbytes]
        else:
            (off,) = struct.unpack("<Q", raw)
            _need(off == pos, f"tag {tag} value at {off}, expected {pos}")
            data = d[off:off + nbytes]
            pos += nbytes
        vals[tag] = struct.unpack(f"<{cnt}{_CODE[ty]}", data)
    _need(struct.unpack_from("<Q", d, 284)[0] == 0, "next IFD")
    (width,), (length,), (bands,), (tw,), (tl,) = vals[256], vals[257], vals[277], vals[322], vals[323]
    (unit,), (times,) = vals[65000], vals[65001]
    across, down = -(-width // tw), -(-length // tl)
    n = across * down * (bands * times if unit in (0, 9) else 1)
    offsets, counts = vals[324], vals[325]
    _need(len(offsets) == n == len(counts), "frame count")
    _need(offsets[0] == pos, "frames start right after the external values")
    for i in range(n - 1):
        _need(offsets[i + 1] == offsets[i] + counts[i], f"frame {i + 1} offset")
    end = offsets[-1] + counts[-1]
    tr = d[end:]
    _need(tr[:4] == b"TAIL" and struct.unpack_from("<H", tr, 4)[0] == 1, "trailer magic/version")
    p = 6
    texts = []
    for _ in range(bands):
        (k,) = struct.unpack_from("<H", tr, p)
        texts.append(tr[p + 2:p + 2 + k].decode("utf-8"))
        p += 2 + k
    kind, bits, epoch, step, scale = struct.unpack_from("<BBqqI", tr, p)
    p += 22
    c = times * (2 if kind == 1 else 1)
    _need(len(tr) == p + -(-c * bits // 8), "trailer size")
    zig = _bits(tr[p:], c, bits)
    seconds = [(epoch + i * step + ((z >> 1) if z % 2 == 0 else -((z >> 1) + 1))) * scale
               for i, z in enumerate(zig)]
    return {"width": width, "length": length, "bands": bands, "times": times, "tile": (tl, tw), "unit": unit,
            "bits_per_sample": vals[258], "sample_format": vals[339], "offsets": offsets, "counts": counts,
            "matrix": vals[34264], "geokeys": vals[34735], "texts": texts, "time_kind": kind,
            "time_fields": (bits, epoch, step, scale), "seconds": seconds, "across": across, "down": down,
            "frames": n, "data": d}


def parse_blob(blob: bytes) -> dict:
    f = struct.unpack_from("<IHIIIHHHBBBIB", blob)
    names = ("magic", "version", "width", "length", "times", "tile_width", "tile_length", "bands",
             "bits_per_sample", "sample_format", "unit", "count_min", "count_bits")
    out = dict(zip(names, f, strict=True))
    across = -(-out["width"] // out["tile_width"])
    down = -(-out["length"] // out["tile_length"])
    n = across * down * (out["bands"] * out["times"] if out["unit"] in (0, 9) else 1)
    _need(len(blob) == 32 + -(-n * out["count_bits"] // 8), "blob size")
    out["counts"] = [out["count_min"] + r for r in _bits(blob[32:], n, out["count_bits"])]
    return out


def blob_of(p: dict) -> bytes:
    counts = p["counts"]
    cmin = min(counts)
    bits = (max(counts) - cmin).bit_length()
    head = struct.pack("<IHIIIHHHBBBIB", 0x45564F4C, 1, p["width"], p["length"], p["times"], p["tile"][1],
                       p["tile"][0], p["bands"], p["bits_per_sample"][0], p["sample_format"][0], p["unit"], cmin, bits)
    acc = 0
    for i, c in enumerate(counts):
        acc |= (c - cmin) << (i * bits)
    return head + acc.to_bytes(-(-len(counts) * bits // 8), "little")
