"""The spec objects: chosen once from a file's first bytes or a blob, and what each one decides."""

from __future__ import annotations

import pickle
import struct

import numpy as np
import pytest

import rumimm
from rumimm.errors import BlobError, FormatError
from rumimm.format.blob import Header
from rumimm.format.grid import FrameUnit, Grid
from rumimm.format.spec import SPECS, V01, V02, spec_named, spec_of, spec_of_blob
from rumimm.format.v2 import Grid2, Header2
from rumimm.reader.image import frame_source
from rumimm.reader.validate import inspect_file

pytestmark = pytest.mark.filterwarnings("error")


def _write(path, spec, shape=(2, 20, 30), **kw):
    data = np.arange(int(np.prod(shape)), dtype=np.uint16).reshape(shape)
    extra = {"time": ["2026-01-01"], "descriptions": [f"B{i}" for i in range(shape[0])]} if spec is V02 else {}
    return rumimm.write(path, data, tile=8, spec=spec.name, **extra, **kw), data


def test_each_spec_is_found_from_the_first_bytes_of_its_files(tmp_path, spec):
    _write(tmp_path / "a.rumi", spec)
    head = (tmp_path / "a.rumi").read_bytes()[:4]
    assert head == spec.first_bytes
    assert spec_of(head) is spec
    assert spec_of(head + b"more bytes") is spec  # only the first 4 count


@pytest.mark.parametrize("head", [b"\x89PNG", b"MM\x00\x2b", b"II\x2a\x00", b"RUM", b""])
def test_other_first_bytes_are_refused_naming_what_was_found(head):
    with pytest.raises(FormatError, match=r"^scene\.rumi: file starts with .*a BigTIFF header .* or RUMI"):
        spec_of(head, path="scene.rumi")
    assert spec_of(head, fallback=V01) is V01  # a checker whose own rules explain


def test_each_spec_is_found_from_a_blob_of_it(tmp_path, spec):
    blob, _ = _write(tmp_path / "a.rumi", spec)
    assert len(blob) >= spec.blob_header_size
    assert spec_of_blob(blob) is spec
    assert spec_of_blob(spec.parse_header(blob)) is spec  # a header record knows its spec


@pytest.mark.parametrize("cut", [0, 1, 20, 27])
def test_a_blob_too_short_for_either_header_is_refused(tmp_path, cut):
    blob, _ = _write(tmp_path / "a.rumi", V02)
    with pytest.raises(BlobError, match=rf"^x\.rumi: header blob is neither spec 0\.1 \(blob is {cut} bytes, shorter "
                                         rf"than the 28-byte header\) nor spec 0\.2 \(blob is {cut} bytes, shorter "
                                         r"than the 32-byte header\)$"):
        spec_of_blob(blob[:cut], path="x.rumi")


def test_a_blob_of_the_wrong_length_names_each_specs_rule(tmp_path, spec, rng):
    data = rng.integers(0, 1 << 16, (3, 40, 40), dtype=np.uint16)
    data[:, :20] = 7  # frames of different sizes: count_bits > 0
    extra = {"time": ["2026-01-01"], "descriptions": ["B1", "B2", "B3"]} if spec is V02 else {}
    blob = rumimm.write(tmp_path / "a.rumi", data, tile=8, spec=spec.name, **extra)
    assert spec.parse_header(blob).count_bits > 0
    for bad in (blob + b"\0", blob[:-1]):
        with pytest.raises(BlobError, match=r"^header blob is neither spec 0\.1 \(.*\) nor spec 0\.2 \(.*\)$") as got:
            spec_of_blob(bad)
        assert (f"spec {spec.name} (blob is {len(bad)} bytes, expected {spec.blob_header_size} + "
                "ceil(N * count_bits / 8)") in str(got.value)


def test_spec_named_and_pickling_keep_one_object_per_version():
    assert spec_named("0.1") is V01 and spec_named("0.2") is V02 and spec_named(V02) is V02
    assert list(SPECS) == ["0.1", "0.2"] and str(V02) == "0.2" and repr(V01) == "<rumimm spec 0.1>"
    assert pickle.loads(pickle.dumps(V02)) is V02
    with pytest.raises(ValueError, match=r"^format must be '0\.1' or '0\.2', got '0\.3'"):
        spec_named("0.3", what="format")
    with pytest.raises(ValueError, match=r"^spec must be"):
        spec_named(None)


def test_what_each_spec_decides():
    assert (V01.has_trailer, V01.has_time, V01.components) == (False, False, False)
    assert (V02.has_trailer, V02.has_time, V02.components) == (True, True, True)
    assert (V01.blob_header_size, V02.blob_header_size) == (28, 32)
    assert (V01.profile.n_tags, V02.profile.n_tags) == (11, 13)
    assert V01.other is V02 and V02.other is V01
    assert (V01.qualifier, V02.qualifier) == ("", " in spec 0.2")
    assert V01.header_type is Header and V02.header_type is Header2
    # complex128 only: 0.2 frames hold its float64 components
    assert V02.component_frames(16) and not V02.component_frames(8) and not V01.component_frames(16)
    assert V02.encodings.keys() - V01.encodings.keys() == {(107, 8), (108, 8)}  # the fnuz floats
    assert (1, 4) in V01.encodings and (1, 4) not in V02.encodings  # 0.1's sub-byte types
    assert V02.encoding(107, 8).name == "float8_e4m3fnuz"
    with pytest.raises(FormatError, match=r"\(107, 8\) is not a valid rumi sample encoding;"):
        V01.encoding(107, 8)
    with pytest.raises(FormatError, match=r"\(1, 4\) is not a valid rumi sample encoding in spec 0\.2;"):
        V02.encoding(1, 4)


def test_header_of_a_walked_layout_equals_the_parsed_blob(tmp_path, spec):
    """Opening without a blob builds the record from the IFD walk: the same header as parsing the blob."""
    blob, _ = _write(tmp_path / "a.rumi", spec, shape=(3, 40, 40))
    rep = inspect_file(tmp_path / "a.rumi", strict=True)
    walked, parsed = rep.header, spec.parse_header(blob)
    assert rep.blob == blob and walked == parsed and walked.format_spec is spec
    assert type(walked) is type(parsed) and walked.grid == parsed.grid and walked.encoding == parsed.encoding
    assert walked.count_min == parsed.count_min and walked.count_bits == parsed.count_bits
    np.testing.assert_array_equal(walked.frame_offsets, parsed.frame_offsets)
    np.testing.assert_array_equal(walked.frame_byte_counts, parsed.frame_byte_counts)
    assert [walked.offset(k) for k in range(walked.n_frames + 1)] == list(parsed.frame_offsets)
    np.testing.assert_array_equal(walked.grid_rows, parsed.grid_rows)


def test_an_image_opened_without_a_blob_shares_the_walks_record(tmp_path, spec):
    _write(tmp_path / "a.rumi", spec)
    with rumimm.open(tmp_path / "a.rumi") as img:
        src = frame_source(img)
        assert src.header is img.header and src.grid_rows is img.header.grid_rows
        assert img.spec == spec.name and img.header.format_spec is spec


def test_convert_logic_of_each_spec():
    g1 = Grid(30, 20, 8, 8, 3, FrameUnit.CELL)
    counts = np.full(g1.n_frames, 9, np.uint64)
    h1 = V01.header_of(g1, rumimm.format.dtypes.encoding(1, 16), counts)
    assert V01.planar_unit(h1) == FrameUnit.CELL and V01.layout_number(h1) == 1
    assert V01.writer_unit(h1) == V02.writer_unit(h1) == "cell"
    g2 = Grid2.of(30, 20, 8, 8, 3, 1, 2)  # h w b: interleaved cells
    h2 = V02.header_of(g2, rumimm.format.dtypes.encoding(1, 16), np.full(g2.n_frames, 9, np.uint64))
    assert h2.interleaved and not h1.interleaved
    assert V02.planar_unit(h2) == FrameUnit.CELL and V02.layout_number(h2) == 2
    assert V02.writer_unit(h2) == "cell" and V01.writer_unit(h2) == "cell"
    g0 = Grid2.of(30, 20, 8, 8, 3, 1, 0)
    h0 = V02.header_of(g0, rumimm.format.dtypes.encoding(1, 16), np.full(g0.n_frames, 9, np.uint64))
    assert V02.writer_unit(h0) == 0 and V01.writer_unit(h0) == "tile"


def test_a_header_of_one_spec_is_refused_as_the_other(tmp_path):
    blob, _ = _write(tmp_path / "a.rumi", V01)
    hdr = V01.parse_header(blob)
    with pytest.raises(BlobError, match=r"header blob is spec 0\.1, but spec 0\.2 was asked for"):
        rumimm.parse_header(hdr, spec="0.2")
    assert rumimm.parse_header(hdr, spec=V01) is hdr


def test_a_truncated_rumi_header_is_still_spec_02():
    assert spec_of(b"RUMI" + struct.pack("<H", 9)) is V02  # the version is checked by 0.2's rules
