"""format/profile_checks.py: the file profile checked from bytes alone, no file opened."""

from __future__ import annotations

import numpy as np
import pytest

import rumimm
from rumimm.errors import FormatError
from rumimm.format.profile_checks import Findings, Parsed, Stop, check_file, check_frame_magic, describe_header
from rumimm.format.v2 import parse_header


@pytest.fixture(scope="module", params=["0.1", "0.2"])
def written(request, tmp_path_factory):
    spec = request.param
    path = tmp_path_factory.mktemp("pc") / "f.rumi"
    names = {"descriptions": ["a", "b"], "time": ["2026-06-01"]} if spec == "0.2" else {}
    blob = rumimm.write(path, np.arange(2 * 19 * 23, dtype=np.uint16).reshape(2, 19, 23), tile=8, spec=spec,
                        **names)
    return spec, blob, np.frombuffer(path.read_bytes(), np.uint8)


def test_the_bytes_of_a_written_file_pass_and_give_its_blob(written):
    spec, blob, data = written
    f, parsed = Findings("f.rumi", strict=False), Parsed()
    check_file(data, data.shape[0], f, parsed)
    assert f.items == [] and parsed.spec == spec and parsed.blob == blob
    hdr = parse_header(blob, spec=spec)
    offsets, counts = hdr.frame_offsets[:-1], hdr.frame_byte_counts
    assert check_frame_magic(data, offsets, counts, hdr.grid, f) is not None and f.items == []


def test_a_truncated_copy_is_a_violation_and_strict_raises_at_it(written):
    spec, _, data = written
    short = data[:-3]
    f, parsed = Findings("f.rumi", strict=False), Parsed()
    with pytest.raises(Stop):
        check_file(short, short.shape[0], f, parsed)
    assert len(f.items) == 1 and parsed.spec == spec and parsed.blob is None
    with pytest.raises(FormatError, match=r"^f\.rumi: "):
        check_file(short, short.shape[0], Findings("f.rumi", strict=True), Parsed())


def test_describe_header_names_shape_type_tiles_and_frames(written):
    spec, blob, _ = written
    unit = "18 tile frames" if spec == "0.1" else "18 'h w' frames"
    assert describe_header(parse_header(blob, spec=spec)) == f"a 2 x 19 x 23 uint16 image in 8 x 8 tiles ({unit})"
