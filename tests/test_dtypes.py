"""The single dtype table against the spec's Sample encodings table."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
import spec_reader

from rumimm.errors import FormatError, RumiError
from rumimm.format import dtypes

# The spec's table of valid pairs, as the independent struct-based reader holds it.
SPEC_PAIRS = sorted(spec_reader.VALID_PAIRS)

VALID_BITS = {1, 2, 4, 6, 8, 16, 32, 64, 128}


def test_the_table_holds_exactly_the_28_pairs_of_the_spec():
    assert len(SPEC_PAIRS) == 28
    assert sorted(dtypes.ENCODINGS) == sorted(SPEC_PAIRS)
    assert all(bps in VALID_BITS for _, bps in dtypes.ENCODINGS)


def test_every_encoding_knows_its_own_pair():
    for key, enc in dtypes.ENCODINGS.items():
        assert enc.key == key == (enc.sample_format, enc.bits_per_sample)


def test_names_are_unique_and_dtypes_map_back_to_their_names():
    names = [e.name for e in dtypes.ENCODINGS.values()]
    assert len(set(names)) == 28
    assert set(dtypes.DTYPES) == set(names)
    for enc in dtypes.ENCODINGS.values():
        assert dtypes.DTYPES[enc.name] == enc.dtype


@pytest.mark.parametrize("key", SPEC_PAIRS)
def test_itemsize_holds_the_sample_and_sub_byte_samples_take_one_byte(key):
    enc = dtypes.ENCODINGS[key]
    _, bps = key
    assert enc.itemsize == max(1, bps // 8)
    assert enc.subbyte == (bps < 8)
    if enc.itemsize == 16:
        assert enc.storage_dtype == np.dtype("V16")
    else:
        assert enc.storage_dtype == np.dtype(f"<u{enc.itemsize}")
    assert enc.storage_dtype.itemsize == enc.itemsize


@pytest.mark.parametrize(
    ("key", "expected"),
    [
        ((1, 1), np.dtype(bool)),
        ((1, 2), np.dtype(ml_dtypes.uint2)),
        ((1, 4), np.dtype(ml_dtypes.uint4)),
        ((1, 8), np.dtype("<u1")),
        ((1, 16), np.dtype("<u2")),
        ((1, 32), np.dtype("<u4")),
        ((1, 64), np.dtype("<u8")),
        ((2, 2), np.dtype(ml_dtypes.int2)),
        ((2, 4), np.dtype(ml_dtypes.int4)),
        ((2, 8), np.dtype("<i1")),
        ((2, 16), np.dtype("<i2")),
        ((2, 32), np.dtype("<i4")),
        ((2, 64), np.dtype("<i8")),
        ((3, 16), np.dtype("<f2")),
        ((3, 32), np.dtype("<f4")),
        ((3, 64), np.dtype("<f8")),
        ((5, 32), np.dtype([("real", "<i2"), ("imag", "<i2")])),
        ((5, 64), np.dtype([("real", "<i4"), ("imag", "<i4")])),
        ((6, 32), np.dtype([("real", "<f2"), ("imag", "<f2")])),
        ((6, 64), np.dtype("<c8")),
        ((6, 128), np.dtype("<c16")),
        ((100, 8), np.dtype(ml_dtypes.float8_e4m3fn)),
        ((101, 8), np.dtype(ml_dtypes.float8_e5m2)),
        ((102, 16), np.dtype(ml_dtypes.bfloat16)),
        ((103, 8), np.dtype(ml_dtypes.float8_e8m0fnu)),
        ((104, 6), np.dtype(ml_dtypes.float6_e2m3fn)),
        ((105, 6), np.dtype(ml_dtypes.float6_e3m2fn)),
        ((106, 4), np.dtype(ml_dtypes.float4_e2m1fn)),
    ],
)
def test_each_pair_maps_to_the_numpy_dtype_of_its_meaning(key, expected):
    assert dtypes.encoding(*key).dtype == expected


@pytest.mark.slow
def test_every_pair_outside_the_table_is_rejected_with_format_error():
    valid = set(SPEC_PAIRS)
    rejected = 0
    for sf in range(256):
        for bps in range(256):
            if (sf, bps) in valid:
                assert dtypes.encoding(sf, bps).key == (sf, bps)
            else:
                with pytest.raises(FormatError):
                    dtypes.encoding(sf, bps)
                rejected += 1
    assert rejected == 256 * 256 - 28


def test_a_rejected_pair_names_the_file_and_the_pair():
    with pytest.raises(FormatError, match=r"^scene\.rumi: .*\(4, 16\)"):
        dtypes.encoding(4, 16, path="scene.rumi")


@pytest.mark.parametrize("enc", list(dtypes.ENCODINGS.values()), ids=lambda e: e.name)
def test_encoding_for_dtype_inverts_the_table(enc):
    assert dtypes.encoding_for_dtype(enc.dtype) is enc
    assert dtypes.encoding_for_dtype(np.empty(3, enc.dtype).dtype) is enc


@pytest.mark.parametrize("name", ["uint16", "int32", "float64", "complex64", "complex128"])
def test_big_endian_dtypes_map_to_the_little_endian_encoding(name):
    enc = dtypes.encoding_for_dtype(np.dtype(name).newbyteorder(">"))
    assert enc.name == name


@pytest.mark.parametrize("bad", ["U4", "S8", "O", "M8[s]", "m8[s]", np.dtype([("a", "<u2")]),
                                 np.dtype([("real", "<i1"), ("imag", "<i1")])])
def test_a_dtype_without_a_rumi_encoding_raises_rumi_error(bad):
    with pytest.raises(RumiError, match="no rumi sample encoding"):
        dtypes.encoding_for_dtype(bad)


def test_storage_views_round_trip_every_sample_bit_exactly(rng):
    for enc in dtypes.ENCODINGS.values():
        raw = rng.integers(0, 256, 64 * enc.itemsize, dtype=np.uint8)
        if enc.subbyte:
            raw &= (1 << enc.bits_per_sample) - 1
            if enc.bits_per_sample == 1:
                raw = raw.astype(bool).view(np.uint8)
        values = raw.view(enc.dtype)
        stored = values.view(enc.storage_dtype)
        assert stored.view(np.uint8).tobytes() == raw.tobytes(), enc.name


@pytest.mark.slow
def test_ml_dtypes_types_resolve_on_first_use_in_a_process_that_never_imported_it():
    # the table is lazy for ml_dtypes' types: a name, a DTYPES lookup or an encoding's dtype imports it
    import os
    import subprocess
    import sys

    code = """
import sys
from rumimm.format import dtypes
import rumimm
names = sorted(rumimm.DTYPES)
meta = [(e.name, e.itemsize, str(e.storage_dtype)) for e in dtypes.ENCODINGS.values()]
untouched = "ml_dtypes" not in sys.modules and "bfloat16" in names and ("int4", 1, "uint8") in meta
by_name = dtypes.encoding_for_dtype("bfloat16").name
loaded = "ml_dtypes" in sys.modules
import ml_dtypes
print(untouched, by_name, loaded, rumimm.DTYPES["int4"] == ml_dtypes.int4,
      dtypes.encoding_for_dtype(ml_dtypes.float8_e4m3fn).name, len(rumimm.DTYPES))
"""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # "-c" imports this checkout's rumimm
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=root).stdout
    assert out.split() == ["True", "bfloat16", "True", "True", "float8_e4m3fn", "28"]


def test_a_caller_holding_an_ml_dtypes_type_finds_its_encoding(monkeypatch):
    # a process that imported ml_dtypes itself (here: the test) before rumimm resolved its types
    monkeypatch.setattr(dtypes, "_DTYPE", {k: v for k, v in dtypes._DTYPE.items() if k not in dtypes._ML_NAMES})
    monkeypatch.setattr(dtypes, "_BY_DTYPE", {spec: {k: v for k, v in table.items() if v.name not in dtypes._ML_NAMES}
                                              for spec, table in dtypes._BY_DTYPE.items()})
    assert dtypes.encoding_for_dtype(np.dtype(ml_dtypes.int2)).name == "int2"
    assert dtypes.ENCODINGS[(102, 16)].dtype == np.dtype(ml_dtypes.bfloat16)
