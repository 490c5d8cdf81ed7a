"""The readers each preset declares (``Codec.readers_for``) are the readers that decode its frames.

For every preset and every measured sample type, frames are written by rumimm and decoded
by each reader: rumimm, rumi-eo 0.16.0 (``rumi`` in this venv, spec 0.1.0 files) and rumi-eo
0.26.1 (its own venv through ``peer026``, spec 0.2 files).  A reader that cannot take the
sample type at all (sub-byte in both, bool in 0.16.0, bfloat16 where numpy lacks its DLPack
code) gets a stand-in file: the same frame bytes under the storage integer type, checked
byte for byte against the real file's frames.  A test expecting "readable" fails when the
reader cannot decode, and one expecting "not readable" fails when it can.

``rumimm.codec.frame_codecs`` (what ``info``/``validate`` report) must name the same readers.
"""

from __future__ import annotations

import numpy as np
import peer026
import pytest
from peer import PEER_READABLE, peer_read

import rumimm
from rumimm.codec import PRESETS, READERS, FrameEncoder, frame_codecs, resolve_codec
from rumimm.codec.compat import C_ONLY, READER_RUMI_016, READER_RUMI_026, READER_RUMIMM, recipe_codecs
from rumimm.format.dtypes import encoding_for_dtype
from rumimm.format.v2 import parse_header
from rumimm.synthetic import eo_scene

DTYPES = ("uint8", "uint16", "uint32", "int16", "float32", "float64", "bfloat16", "bool", "uint4")
TILE = 32
SHAPE = (2, 64, 96)  # whole tiles: every frame is (32, 32)
#: The sample types rumi-eo 0.26.1 hands back to numpy (bfloat16: "NumPy cannot represent"; uint4: not in spec 0.2).
PEER026_READABLE = frozenset({"uint8", "int8", "uint16", "int16", "uint32", "int32", "uint64", "int64", "float16",
                              "float32", "float64", "complex64", "complex128", "bool"})
CASES = [(p, d) for p, c in PRESETS.items() for d in DTYPES if c.supports(encoding_for_dtype(d))]

_READ_EACH = peer026._PRELUDE + r'''
out = []
for job in args["jobs"]:
    try:
        arr = rumi.read(job["path"], bytes.fromhex(job["header"]))
        np.save(job["npy"], arr if arr.dtype.kind != "V" else arr.view(np.uint8))
        out.append("ok")
    except Exception as exc:
        out.append(type(exc).__name__ + ": " + str(exc)[:200])
print(json.dumps(out))
'''


def _standin_codec(preset: str, enc):
    """A codec writing, for samples of the storage integer type, the frames ``preset`` writes for ``enc``."""
    member = resolve_codec(preset, enc)
    if member.recipe is not None:
        return member  # geozl's graph depends on the storage type and the frame shape only
    return lambda compressor: member.build(compressor, enc, (TILE, TILE))


def _frames(path, blob) -> bytes:
    offsets = parse_header(blob).frame_offsets
    with open(path, "rb") as fh:
        fh.seek(int(offsets[0]))
        return fh.read(int(offsets[-1]) - int(offsets[0]))


def _write(tmp, preset, name, spec, reader_reads_dtype):
    """(path, blob, expected array) of a file holding ``preset``'s frames of ``name`` samples."""
    arr = eo_scene(*SHAPE, name)
    enc = encoding_for_dtype(arr.dtype)
    real = tmp / f"{preset}-{name}-real.rumi"
    real_blob = rumimm.write(real, arr, tile=TILE, codec=preset)
    kw = {"spec": "0.2", "descriptions": ["a", "b"], "time": ["2026-01-01"]} if spec == "0.2" else {}
    path = tmp / f"{preset}-{name}-{spec}.rumi"
    if reader_reads_dtype:
        blob = rumimm.write(path, arr, tile=TILE, codec=preset, **kw)
        want = arr
    else:
        want = np.ascontiguousarray(arr).view(enc.storage_dtype)
        if enc.bits_per_sample == 1:
            want = want.astype(bool).view(np.uint8)
        blob = rumimm.write(path, want, tile=TILE, codec=_standin_codec(preset, enc), **kw)
    assert _frames(path, blob) == _frames(real, real_blob), "the stand-in file must hold the preset's own frames"
    return path, blob, want


def _expected(preset, name, reader) -> bool:
    return reader in PRESETS[preset].readers_for(encoding_for_dtype(name))


@pytest.mark.parametrize(("preset", "name"), CASES)
def test_rumimm_and_rumi_eo_016_decode_exactly_the_presets_that_declare_them(tmp_path, preset, name):
    path, blob, want = _write(tmp_path, preset, name, "0.1", name in PEER_READABLE)
    with rumimm.open(path) as img:
        assert np.array_equal(img[:].view(np.uint8), np.ascontiguousarray(want).view(np.uint8))
    assert _expected(preset, name, READER_RUMIMM)
    try:
        got = peer_read(path, blob)
        decoded = np.array_equal(np.asarray(got).view(np.uint8), np.ascontiguousarray(want).view(np.uint8))
    except Exception:
        decoded = False
    assert decoded == _expected(preset, name, READER_RUMI_016), f"rumi-eo 0.16.0 decoded: {decoded}"


@pytest.fixture(scope="module")
def peer026_results(tmp_path_factory):
    peer026.require()
    d = tmp_path_factory.mktemp("readers026")
    jobs, wants = [], []
    for i, (preset, name) in enumerate(CASES):
        path, blob, want = _write(d, preset, name, "0.2", name in PEER026_READABLE)
        jobs.append({"path": str(path), "header": blob.hex(), "npy": str(d / f"out{i}.npy")})
        wants.append(want)
    status = peer026.run(_READ_EACH, {"jobs": jobs})
    out = {}
    for (preset, name), job, want, st in zip(CASES, jobs, wants, status, strict=True):
        ok = st == "ok" and np.array_equal(np.load(job["npy"]).view(np.uint8),
                                           np.ascontiguousarray(want).view(np.uint8))
        out[preset, name] = (ok, st)
    return out


@pytest.mark.parametrize(("preset", "name"), CASES)
def test_rumi_eo_026_decodes_exactly_the_presets_that_declare_it(peer026_results, preset, name):
    decoded, status = peer026_results[preset, name]
    assert decoded == _expected(preset, name, READER_RUMI_026), f"rumi-eo 0.26.1: {status}"


@pytest.mark.parametrize(("preset", "name"), CASES)
def test_the_readers_found_from_a_frame_are_the_readers_its_preset_declares(preset, name):
    arr = eo_scene(1, TILE, TILE, name)[0]
    enc = encoding_for_dtype(arr.dtype)
    frame = FrameEncoder(preset, enc).encode(arr)
    found = frame_codecs(frame)
    assert found.decodable
    declared = PRESETS[preset].readers_for(enc)
    assert set(found.readers) == set(declared)
    assert set(declared) <= set(READERS)


def test_fast_and_portable_decode_in_every_reader_for_every_measured_dtype():
    for name in DTYPES:
        enc = encoding_for_dtype(name)
        assert PRESETS["fast"].readers_for(enc) == frozenset(READERS)
        assert PRESETS["portable"].readers_for(enc) == frozenset(READERS)
        assert not resolve_codec("portable", enc).requires_geozl


def test_rumi_eo_016_is_not_named_a_reader_of_the_sample_types_it_cannot_decode(tmp_path):
    """complex128 (a Numeric output of width 16 it expects, which OpenZL cannot make) and complex integers: no
    preset makes rumi-eo 0.16.0 a reader, and validate and info do not list it (they did, from the codecs alone)."""
    import rumi

    from rumimm.format.dtypes import ENCODINGS

    for name in ("complex128", "complex_int16", "complex_int32"):
        enc = next(e for e in ENCODINGS.values() if e.name == name)
        for preset, codec in PRESETS.items():
            if codec.supports(enc):
                assert READER_RUMI_016 not in codec.readers_for(enc), (preset, name)
    scene = (np.arange(2 * 16 * 16) * (1 + 2j)).astype(np.complex128).reshape(2, 16, 16)
    blob = rumimm.write(tmp_path / "c.rumi", scene, tile=16)
    with pytest.raises(OSError, match="unexpected frame output"):
        rumi.read(str(tmp_path / "c.rumi"), blob)
    assert rumimm.validate(tmp_path / "c.rumi").readers == (READER_RUMIMM,)


# the codecs a recipe's name says it references are the ones its frames cannot be decoded without
RECIPES = sorted({c.recipe for p in PRESETS.values() if p.members for c in p.members.values() if c.recipe}
                 | {"planar>zigzag>entropy", "planar>zigzag>pfor", "wp_static>zigzag>entropy", "id>pfor",
                    "id>transpose>zstd", "delta_w>zigzag>pfor", "planar>zigzag>pivco", "average>zigzag>entropy"})


@pytest.mark.parametrize("recipe", RECIPES)
def test_a_recipes_named_codecs_are_what_its_frames_reference(recipe):
    frame = FrameEncoder("geozl:" + recipe, "uint16", 27).encode(eo_scene(1, TILE, TILE, "uint16")[0])
    found = frame_codecs(frame)
    codecs, version = recipe_codecs(recipe)
    if C_ONLY in codecs:  # geozl's Python decoders cannot take the frame: the trial sees only "C codecs"
        codecs = frozenset({C_ONLY})
    assert (found.codecs, found.format_version) == (codecs, version)


def test_a_frame_no_decoder_takes_is_not_decodable_and_has_no_readers():
    frame = bytearray(FrameEncoder("delta", "uint16").encode(eo_scene(1, TILE, TILE, "uint16")[0]))
    frame[len(frame) // 2] ^= 0xFF
    found = frame_codecs(bytes(frame))
    assert not found.decodable and found.readers == ()


def test_a_frame_declaring_more_than_max_bytes_is_not_decoded():
    frame = FrameEncoder("fast", "uint16").encode(eo_scene(1, TILE, TILE, "uint16")[0])
    assert frame_codecs(frame, max_bytes=TILE * TILE * 2).decodable
    found = frame_codecs(frame, max_bytes=TILE * TILE * 2 - 1)
    assert not found.decodable and found.readers == ()
