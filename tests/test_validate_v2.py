"""``rumimm.build_blob`` and ``rumimm.validate`` on spec 0.2 files: every rule of the 0.2 draft.

Good files come from rumi-eo 0.26.1 (``tests/data/v2``); broken ones are those files
changed in exactly one place.  ``index`` must return the header rumi-eo returned,
byte for byte, and raise ``FormatError`` naming the rule for a broken file;
``validate`` must list the violation.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

import rumimm
from rumimm.errors import FormatError

DATA = Path(__file__).parent / "data" / "v2"
MANIFEST = json.loads((DATA / "manifest.json").read_text())
NAMES = sorted(MANIFEST)


def _entry_at(data: bytes, tag: int) -> int:
    for i in range(13):
        if struct.unpack_from("<H", data, 24 + 20 * i)[0] == tag:
            return 24 + 20 * i
    raise KeyError(tag)


def _patch(data: bytes, at: int, fmt: str, value) -> bytes:
    b = bytearray(data)
    struct.pack_into(fmt, b, at, value)
    return bytes(b)


def _tail_at(data: bytes) -> int:
    return data.rindex(b"TAIL")


CASES = {
    "reserved": (lambda d: _patch(d, 6, "<H", 1), "reserved field is 1, expected 0"),
    "version": (lambda d: _patch(d, 4, "<H", 2), "file header version is 2, expected 1"),
    "ifd offset": (lambda d: _patch(d, 8, "<Q", 24), "IFD offset is 24"),
    "eleven tags": (lambda d: _patch(d, 16, "<Q", 11), "IFD has 11 tags, expected exactly 13"),
    "unordered": (lambda d: _patch(_patch(d, _entry_at(d, 65000), "<H", 65001), _entry_at(d, 65001), "<H", 65000),
                  "not in rising tag order"),
    "unit type": (lambda d: _patch(d, _entry_at(d, 65000) + 2, "<H", 4),
                  "tag 65000 \\(FRAME_UNIT\\) has type 4 and count 1, expected SHORT"),
    "unit unregistered": (lambda d: _patch(d, _entry_at(d, 65000) + 12, "<H", 12), "frame_unit 12 is not registered"),
    "unit invalid": (lambda d: _patch(d, _entry_at(d, 65000) + 12, "<H", 1), "needs exactly one of B and T above 1"),
    "time count zero": (lambda d: _patch(d, _entry_at(d, 65001) + 12, "<I", 0), "TimeCount is 0"),
    "time count": (lambda d: _patch(d, _entry_at(d, 65001) + 12, "<I", 4), "has 54 entries; frame_unit 0"),
    "next ifd": (lambda d: _patch(d, 284, "<Q", 8), "next-IFD offset is 8"),
    "offsets": (lambda d: _patch(d, 292 + 8, "<Q", struct.unpack_from("<Q", d, 300)[0] + 1),
                "TileOffsets\\[1\\] .* is \\d+, expected \\d+"),
    "trailer magic": (lambda d: d[:_tail_at(d)] + b"TALE" + d[_tail_at(d) + 4:], "expected b'TAIL'"),
    "after trailer": (lambda d: d + b"\0", "nothing may follow the residuals"),
    "truncated": (lambda d: d[:-3], "truncated"),
    "band text": (lambda d: d[:_tail_at(d) + 8] + b"y" + d[_tail_at(d) + 9:], "repeats band 0"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_file_broken_in_one_place_is_refused_naming_the_rule(case, tmp_path):
    change, rule = CASES[case]
    good = (DATA / "cube_u0.rumi").read_bytes()
    path = tmp_path / "bad.rumi"
    path.write_bytes(change(good))
    with pytest.raises(FormatError, match=rule):
        rumimm.build_blob(path)
    rep = rumimm.validate(path)
    assert not rep.ok
    assert any(__import__("re").search(rule, v) for v in rep.violations), rep.violations


def test_a_cell_file_claiming_four_billion_steps_is_refused_before_anything_is_sized_by_them(tmp_path):
    good = (DATA / "cube_u4.rumi").read_bytes()
    bad = _patch(good, _entry_at(good, 65001) + 12, "<I", 0xFFFFFFFF)
    path = tmp_path / "bad.rumi"
    path.write_bytes(bad)
    with pytest.raises(FormatError):
        rumimm.build_blob(path)  # the trailer's residual size no longer matches: refused in constant work
    rep = rumimm.validate(path)
    assert not rep.ok




def test_spare_bytes_of_an_inline_value_must_be_zero_in_spec_02_only(tmp_path):
    """Spec 0.2 (as rumi-eo 0.26.1 reads it) requires the bytes of an inline value field after the value
    to be zero; a file that breaks it is refused with or without its blob, and the blob is not blamed."""
    import numpy as np

    a = np.arange(2 * 3 * 8 * 8, dtype="uint8").reshape(2, 3, 8, 8)
    good = tmp_path / "ok.rumi"
    blob = rumimm.write(good, a, spec="0.2", tile=8, descriptions=["a", "b", "c"], time=["2020-01-01", "2020-01-02"])
    raw = good.read_bytes()
    tried = 0
    for i in range(struct.unpack_from("<Q", raw, 16)[0]):
        at = 24 + 20 * i
        tag, typ, count = struct.unpack_from("<HHQ", raw, at)
        used = count * {3: 2, 4: 4, 12: 8, 16: 8}[typ]
        if used >= 8:
            continue
        bad = bytearray(raw)
        bad[at + 19] = 0x5A  # the last byte of the value field
        path = tmp_path / f"t{tag}.rumi"
        path.write_bytes(bytes(bad))
        rule = "spare bytes of an inline value to be zero"
        with pytest.raises(FormatError, match=rf"tag {tag} .*fills {used} of its 8 inline bytes.*{rule}"):
            rumimm.open(path)
        with pytest.raises(FormatError, match=rule):
            rumimm.open(path, blob)
        assert not rumimm.validate(path).ok
        tried += 1
    assert tried == 9
    v01 = tmp_path / "v01.rumi"  # spec 0.1 leaves them open
    rumimm.write(v01, a[0], tile=8)
    raw = bytearray(v01.read_bytes())
    raw[24 + 20 * 3 + 19] = 0x5A  # SamplesPerPixel, a SHORT
    v01.write_bytes(bytes(raw))
    with rumimm.open(v01) as img:
        assert img.shape == (3, 8, 8)
