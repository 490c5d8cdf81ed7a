"""Tests of rumimm.codec: one frame in, one OpenZL frame out, and back."""

from __future__ import annotations

import geozl
import ml_dtypes
import numpy as np
import openzl.ext as zl
import pytest
import rumi
from openzl.ext import graphs as G
from openzl.ext import nodes as N

import rumimm
from rumimm.codec import (
    DEFAULT_FORMAT_VERSION,
    DEFAULT_PRESETS,
    FRAME_MAGIC,
    MAX_FORMAT_VERSION,
    MIN_FORMAT_VERSION,
    PRESETS,
    Codec,
    FrameDecoder,
    FrameEncoder,
    frame_format_version,
    resolve_codec,
)
from rumimm.errors import CodecError
from rumimm.format.dtypes import DTYPES, ENCODINGS, encoding_for_dtype
from rumimm.synthetic import eo_scene

ENCS = list(ENCODINGS.values())
CASES = [(e, p) for e in ENCS for p, c in PRESETS.items() if c.supports(e)]

# Known NaN payloads (storage bit patterns) per float encoding, quiet, signalling,
# negative; sub-byte float formats have none.
NANS = {
    "float16": [0x7E00, 0x7C01, 0xFFFF],
    "float32": [0x7FC00000, 0x7F800001, 0xFFFFFFFF, 0x7FC0BEEF],
    "float64": [0x7FF8000000000000, 0x7FF0000000000001, 0xFFFFFFFFFFFFFFFF],
    "bfloat16": [0x7FC0, 0x7F81, 0xFFFF],
    "complex64": [0x7FC000007FC00001],
    "float8_e4m3fn": [0x7F, 0xFF],
    "float8_e5m2": [0x7D, 0xFE],
    "float8_e8m0fnu": [0xFF],
}


@pytest.fixture(scope="module")
def decoder():
    return FrameDecoder()


def _with_odd_bits(a: np.ndarray, seed: int) -> np.ndarray:
    """Copy of ``a`` with random raw bit patterns (NaNs, infinities, denormals) mixed in."""
    enc = encoding_for_dtype(a.dtype)
    rng = np.random.default_rng(seed)
    out = a.copy()
    raw = out.reshape(-1).view(np.uint8).reshape(out.size, enc.itemsize)
    pick = rng.random(out.size) < 0.05
    raw[pick] = rng.integers(0, 256, size=(int(pick.sum()), enc.itemsize), dtype=np.uint8)
    if enc.subbyte:
        raw &= np.uint8((1 << enc.bits_per_sample) - 1)
    if enc.name in NANS and enc.itemsize <= 8:
        flat = out.reshape(-1).view(enc.storage_dtype)
        for i, bits in enumerate(NANS[enc.name]):
            flat[3 * i + 1] = bits
    if enc.name == "complex128":
        out.reshape(-1)[5] = complex(np.nan, -np.inf)
    return out


def _bits(a: np.ndarray) -> bytes:
    return np.ascontiguousarray(a).tobytes()


# ----------------------------------------------------------------------- round trips


@pytest.mark.parametrize(("enc", "preset"), CASES, ids=[f"{e.name}-{p}" for e, p in CASES])
def test_every_encoding_round_trips_bit_exactly_through_every_preset_that_supports_it(enc, preset, decoder):
    scene = _with_odd_bits(eo_scene(3, 21, 37, enc.dtype, seed=5), seed=len(preset))
    encoder = FrameEncoder(preset, enc)
    frames = {
        "tile": scene[1],
        "cell": scene,
        "strided": scene[:, 2:, ::3],
        "edge": scene[0, :7, :5],
    }
    for label, frame in frames.items():
        blob = encoder.encode(frame)
        out = decoder.decode(blob, enc, frame.size, index=3)
        assert out.dtype == enc.storage_dtype
        assert out.shape == (frame.size,)
        assert out.tobytes() == _bits(frame), label
        assert out.view(enc.dtype).reshape(frame.shape).view(np.uint8).tobytes() == _bits(frame)


def test_every_encoding_has_a_default_preset_that_is_portable_and_lossless():
    assert set(DEFAULT_PRESETS) == {e.name for e in ENCS}
    for e in ENCS:
        codec = resolve_codec(None, e)
        assert codec.name == DEFAULT_PRESETS[e.name]
        assert codec.portable and codec.lossless and not codec.requires_geozl
        assert resolve_codec("auto", e) is codec


def test_the_spec_01_default_decodes_with_openzl_alone_and_fast_does_not():
    # Why spec 0.1's default stays portable (docs/dev/default-codec.md, "Decision"): spec 0.1
    # promises that a frame carries everything needed to decode it, and an OpenZL decoder
    # without geozl's decoders registered reads the default's frames but not `fast`'s.
    scene = eo_scene(2, 64, 64, "uint16", seed=3)
    for name, plain_openzl_reads in ((None, True), ("fast", False)):
        blob = FrameEncoder(resolve_codec(name, "uint16"), "uint16").encode(scene)
        if plain_openzl_reads:
            (o,) = zl.DCtx().decompress(blob)
            assert o.content.as_nparray().tobytes() == scene.tobytes()
        else:
            with pytest.raises(RuntimeError, match="Graph invalid"):
                zl.DCtx().decompress(blob)
            dctx = zl.DCtx()
            geozl.register_decoders(dctx)
            (o,) = dctx.decompress(blob)
            assert o.num_elts == scene.size


def test_the_auto_preset_builds_the_default_graph_of_each_dtype(decoder):
    for e in (encoding_for_dtype("uint16"), encoding_for_dtype("complex128")):
        frame = eo_scene(1, 16, 16, e.dtype)[0]
        auto = FrameEncoder(PRESETS["auto"], e).encode(frame)
        default = FrameEncoder(None, e).encode(frame)
        assert auto == default
        assert decoder.decode(auto, e, frame.size).tobytes() == frame.tobytes()


def test_the_default_integer_preset_uses_only_builtin_graphs_and_shrinks_a_scene(decoder):
    scene = eo_scene(2, 128, 128, "uint16")
    codec = resolve_codec(None, "uint16")
    assert codec.name == "delta" and codec.portable
    enc = FrameEncoder(codec, "uint16")
    size = sum(len(enc.encode(scene[b])) for b in range(2))
    assert size < 0.7 * scene.nbytes
    generic = FrameEncoder("generic", "uint16")
    assert size < sum(len(generic.encode(scene[b])) for b in range(2))


# ------------------------------------------------------------------ format versions


def test_frames_carry_the_pinned_format_version():
    assert DEFAULT_FORMAT_VERSION == 24
    frame = eo_scene(1, 16, 16)[0]
    for preset in ("auto", "delta", "generic", "transpose", "store"):
        assert frame_format_version(FrameEncoder(preset, "uint16").encode(frame)) == 24


@pytest.mark.parametrize("version", [14, 20, 23, 25, 27])
def test_frames_carry_another_chosen_format_version(version, decoder):
    frame = eo_scene(1, 16, 16, "float32")[0]
    enc = FrameEncoder(None, "float32", format_version=version)
    blob = enc.encode(frame)
    assert frame_format_version(blob) == version
    assert int.from_bytes(blob[:4], "little") == FRAME_MAGIC + version
    assert enc.portable == (version <= 24)
    assert decoder.decode(blob, "float32", frame.size).tobytes() == frame.tobytes()


def test_the_magic_is_the_openzl_constant_plus_the_version_for_serial_only_versions_too():
    # versions below 14 take one Serial input only; the magic follows the same rule
    for version in (MIN_FORMAT_VERSION, 10, 13):
        c = zl.Compressor()
        c.select_starting_graph(G.Zstd()(c))
        cctx = zl.CCtx()
        cctx.ref_compressor(c)
        cctx.set_parameter(zl.CParam.StickyParameters, 1)
        cctx.set_parameter(zl.CParam.FormatVersion, version)
        data = np.frombuffer(b"rumi" * 64, np.uint8)
        blob = cctx.compress([zl.Input(zl.Type.Serial, data)])
        assert frame_format_version(blob) == version


def test_frame_format_version_accepts_bytes_memoryview_and_uint8_arrays():
    blob = FrameEncoder(None, "uint8").encode(np.zeros((4, 4), np.uint8))
    assert frame_format_version(memoryview(blob)) == 24
    assert frame_format_version(np.frombuffer(blob, np.uint8)) == 24
    assert frame_format_version(bytearray(blob)) == 24


@pytest.mark.parametrize(
    "head",
    [b"", b"\xd8\xa5", b"II*\x00", (FRAME_MAGIC + MIN_FORMAT_VERSION - 1).to_bytes(4, "little"),
     (FRAME_MAGIC + MAX_FORMAT_VERSION + 1).to_bytes(4, "little")],
)
def test_frame_format_version_rejects_bytes_that_are_not_an_openzl_frame(head):
    with pytest.raises(CodecError):
        frame_format_version(head)


@pytest.mark.parametrize("version", [13, MAX_FORMAT_VERSION + 1, 24.5, 0])
def test_an_encoder_refuses_a_format_version_that_cannot_hold_numeric_frames(version):
    with pytest.raises(ValueError, match="format_version"):
        FrameEncoder(None, "uint16", format_version=version)


# ------------------------------------------------------------------ input lifetime


class _ChurningCCtx(zl.CCtx):
    """A CCtx that reuses freed memory right before compressing, as a busy process would."""

    def compress(self, inputs):
        junk = [np.full(i.content_size, 0xAB, np.uint8) for i in inputs for _ in range(4)]
        del junk
        junk = [np.full(i.content_size, 0xCD, np.uint8) for i in inputs for _ in range(4)]  # noqa: F841
        return super().compress(inputs)  # the second junk stays alive, holding reused memory


def test_encoding_fresh_temporaries_many_times_decodes_every_frame(decoder, monkeypatch):
    # openzl.ext.Input does not keep its array alive; the encoder must, until
    # compress returns, or the allocator hands the samples' memory to someone else
    monkeypatch.setattr(zl, "CCtx", _ChurningCCtx)
    enc = FrameEncoder(None, "uint16")
    blobs = []
    for i in range(200):
        # a temporary, strided so the encoder copies it, dropped by the caller at once
        blobs.append(enc.encode(np.random.default_rng(i).integers(0, 4000, (40, 64), np.uint16)[:, ::2]))
    for i, blob in enumerate(blobs):
        want = np.random.default_rng(i).integers(0, 4000, (40, 64), np.uint16)[:, ::2]
        assert decoder.decode(blob, "uint16", want.size).tobytes() == want.tobytes()


# --------------------------------------------------------------------- sub-byte bits


@pytest.mark.parametrize("name", ["uint2", "int2", "uint4", "int4", "float4_e2m1fn", "float6_e2m3fn", "float6_e3m2fn"])
def test_sub_byte_samples_are_stored_with_zero_high_bits(name, decoder):
    enc = encoding_for_dtype(DTYPES[name])
    raw = np.random.default_rng(1).integers(0, 256, (9, 11), np.uint8)
    frame = raw.view(enc.dtype)  # high bits set: not how ml_dtypes stores, but possible
    blob = FrameEncoder("store", enc).encode(frame)
    mask = (1 << enc.bits_per_sample) - 1
    out = decoder.decode(blob, enc, frame.size)
    assert np.array_equal(out, (raw & mask).reshape(-1))
    # the stored bytes themselves, read without the decoder's own masking
    stored = zl.DCtx().decompress(blob)[0].content.as_nparray()
    assert not np.any(stored & ~np.uint8(mask))


def test_bool_samples_are_stored_as_zero_or_one(decoder):
    raw = np.array([[0, 1, 2, 255], [7, 0, 0, 1]], np.uint8)
    frame = raw.view(np.bool_)
    blob = FrameEncoder(None, "bool").encode(frame)
    assert np.array_equal(decoder.decode(blob, "bool", 8), (raw != 0).astype(np.uint8).reshape(-1))


def test_a_foreign_frame_with_high_bits_set_decodes_to_the_low_bits(decoder):
    raw = np.arange(256, dtype=np.uint8).reshape(16, 16)
    blob = FrameEncoder("store", "uint8").encode(raw)
    out = decoder.decode(blob, ml_dtypes.uint4, 256)
    assert np.array_equal(out, raw.reshape(-1) & 0x0F)
    assert np.array_equal(decoder.decode(blob, "bool", 256), raw.reshape(-1) & 1)


# ------------------------------------------------------------------ hostile frames


@pytest.fixture(scope="module")
def good():
    frame = eo_scene(1, 64, 64, "uint16", seed=9)[0]
    return frame, FrameEncoder(None, "uint16").encode(frame)


def test_truncated_frames_raise_codec_error(good, decoder):
    frame, blob = good
    for cut in [0, 1, 3, 4, 8, 12, 20, len(blob) // 2, len(blob) - 1]:
        with pytest.raises(CodecError):
            decoder.decode(blob[:cut], "uint16", frame.size, index=7)


def test_bit_flipped_frames_raise_codec_error_or_decode_exactly(good, decoder):
    frame, blob = good
    rng = np.random.default_rng(3)
    errors = 0
    for _ in range(300):
        bad = bytearray(blob)
        pos = int(rng.integers(0, len(bad)))
        bad[pos] ^= 1 << int(rng.integers(0, 8))
        try:
            out = decoder.decode(bytes(bad), "uint16", frame.size)
        except CodecError:
            errors += 1
        else:  # a flip in an unused bit may be harmless; then the data is exact
            assert out.tobytes() == frame.tobytes()
    assert errors > 250


def test_random_bytes_raise_codec_error(decoder):
    rng = np.random.default_rng(4)
    for n in (1, 4, 16, 100, 5000):
        junk = rng.integers(0, 256, n, np.uint8)
        with pytest.raises(CodecError):
            decoder.decode(junk, "uint16", 100)
        junk[:4] = np.frombuffer((FRAME_MAGIC + 24).to_bytes(4, "little"), np.uint8)[: min(n, 4)]
        with pytest.raises(CodecError):
            decoder.decode(junk, "uint16", 100)


def test_a_valid_frame_of_the_wrong_width_raises_codec_error_naming_the_frame(decoder):
    frame = np.arange(4096, dtype=np.uint16).reshape(64, 64)
    blob = FrameEncoder(None, "uint16").encode(frame)
    with pytest.raises(CodecError,
                       match=r"^scene.rumi: frame 7: decoded 4096 samples of width 2, expected 8192 of width 1$"):
        decoder.decode(blob, "uint8", 8192, index=7, where="scene.rumi: ")
    with pytest.raises(CodecError, match=r"^frame 2: decoded 4096 samples of width 2, expected 2048 of width 4$"):
        decoder.decode(blob, "uint32", 2048, index=2)


def test_a_valid_frame_of_the_wrong_size_raises_before_decoding(decoder):
    frame = np.arange(4096, dtype=np.uint16).reshape(64, 64)
    blob = FrameEncoder(None, "uint16").encode(frame)
    for n in (4095, 4097, 4160, 0):
        with pytest.raises(CodecError, match=rf"frame 5 declares 8192 bytes of samples, expected {2 * n} "):
            decoder.decode(blob, "uint16", n, index=5)


def test_a_frame_of_another_type_or_several_outputs_raises_codec_error(decoder):
    c = zl.Compressor()
    c.select_starting_graph(G.Zstd()(c))
    cctx = zl.CCtx()
    cctx.ref_compressor(c)
    cctx.set_parameter(zl.CParam.StickyParameters, 1)
    cctx.set_parameter(zl.CParam.FormatVersion, 24)
    serial = cctx.compress([zl.Input(zl.Type.Serial, np.zeros(64, np.uint8))])
    with pytest.raises(CodecError, match="Serial data, expected Numeric"):
        decoder.decode(serial, "uint8", 64)
    c2 = zl.Compressor()
    c2.select_starting_graph(G.Compress()(c2))
    cctx2 = zl.CCtx()
    cctx2.ref_compressor(c2)
    cctx2.set_parameter(zl.CParam.StickyParameters, 1)
    cctx2.set_parameter(zl.CParam.FormatVersion, 24)
    a, b = np.zeros(32, np.uint16), np.ones(32, np.uint16)
    two = cctx2.compress([zl.Input(zl.Type.Numeric, a), zl.Input(zl.Type.Numeric, b)])
    with pytest.raises(CodecError, match="holds 2 outputs, expected 1"):
        decoder.decode(two, "uint16", 32)


def _varint(x: int) -> bytes:
    out = bytearray()
    while True:
        b, x = x & 0x7F, x >> 7
        out.append(b | (0x80 if x else 0))
        if not x:
            return bytes(out)


def _claim_size(blob: bytes, size: int) -> bytes:
    """Rewrite a one-output frame's declared content size (test-only knowledge of the v24 header).

    Byte 6 starts a varint of content size + 1, followed by a one-byte header
    check that is found by trying all 256 values.
    """
    pos, shift, value = 6, 0, 0
    while True:
        b = blob[pos]
        value |= (b & 0x7F) << shift
        pos += 1
        shift += 7
        if not b & 0x80:
            break
    head = blob[:6] + _varint(size + 1)
    for check in range(256):
        cand = head + bytes([check]) + blob[pos + 1 :]
        try:
            if zl.FrameInfo(cand).output_content_size(0) == size:
                return cand
        except RuntimeError:
            pass
    raise AssertionError("no header check byte matched")


def test_a_frame_claiming_a_huge_output_is_refused_before_any_allocation(decoder):
    frame = np.arange(1000, dtype=np.uint16).reshape(10, 100)
    blob = FrameEncoder(None, "uint16").encode(frame)
    for huge in (2 * 1000 + 2, 3 << 30, 1 << 40):
        hostile = _claim_size(blob, huge)
        assert zl.FrameInfo(hostile).output_content_size(0) == huge
        # the message proves the size check fired, so decompress never ran
        with pytest.raises(CodecError, match=rf"frame 0 declares {huge} bytes of samples, expected 2000"):
            decoder.decode(hostile, "uint16", 1000, index=0)


def test_decode_accepts_memoryview_and_uint8_array_frames(good, decoder):
    frame, blob = good
    for form in (memoryview(blob), np.frombuffer(blob, np.uint8), bytearray(blob)):
        assert decoder.decode(form, "uint16", frame.size).tobytes() == frame.tobytes()


def test_codec_errors_are_value_errors():
    assert issubclass(CodecError, ValueError)


# ------------------------------------------------------------- codec resolution


def test_resolve_codec_accepts_names_codecs_and_none():
    assert resolve_codec("generic", "uint16") is PRESETS["generic"]
    assert resolve_codec(PRESETS["delta"], np.int16) is PRESETS["delta"]
    assert resolve_codec(None, "float64").name == "transpose"
    assert resolve_codec(None, "complex128").name == "transpose"
    assert resolve_codec(None, "float32").name == "delta"


def test_resolve_codec_rejects_unknown_names_unsupported_dtypes_and_other_types():
    with pytest.raises(ValueError, match="not a preset"):
        resolve_codec("zstd-max", "uint16")
    with pytest.raises(ValueError, match="does not support complex128"):
        resolve_codec("delta", "complex128")
    with pytest.raises(ValueError, match="does not support float32"):
        resolve_codec("geozl-planar", "float32")
    with pytest.raises(ValueError, match="does not support uint16"):
        resolve_codec("float", "uint16")
    with pytest.raises(TypeError):
        resolve_codec(42, "uint16")


def test_a_user_graph_is_wrapped_as_a_custom_codec_and_round_trips(decoder):
    def zstd_bytes(compressor):
        return N.ConvertNumToSerialLE()(compressor, G.Zstd()(compressor))

    codec = resolve_codec(zstd_bytes, "int32")
    assert isinstance(codec, Codec)
    assert codec.name.startswith("custom:") and "zstd_bytes" in codec.name
    assert codec.lossless is None and not codec.portable and codec.readers == frozenset()
    frame = eo_scene(2, 20, 30, "int32")
    blob = FrameEncoder(zstd_bytes, "int32").encode(frame)
    assert decoder.decode(blob, "int32", frame.size).tobytes() == frame.tobytes()


def test_a_user_graph_that_returns_no_graph_id_is_a_type_error():
    with pytest.raises(TypeError, match="GraphID"):
        FrameEncoder(lambda c: None, "uint16").encode(np.zeros((2, 2), np.uint16))


def test_encode_rejects_the_wrong_dtype_rank_and_empty_frames():
    enc = FrameEncoder(None, "uint16")
    with pytest.raises(ValueError, match="dtype"):
        enc.encode(np.zeros((4, 4), np.int16))
    with pytest.raises(ValueError, match="shape"):
        enc.encode(np.zeros(16, np.uint16))
    with pytest.raises(ValueError, match="no samples"):
        enc.encode(np.zeros((0, 4), np.uint16))


def test_geozl_presets_are_opt_in_and_decode_to_numeric_samples_of_the_sample_width(decoder):
    scene = eo_scene(2, 40, 56, "int16")
    for name in ("geozl-planar", "geozl-average"):
        codec = PRESETS[name]
        assert codec.requires_geozl and not codec.portable and codec.lossless
        enc = FrameEncoder(name, "int16")
        for frame in (scene[0], scene, scene[:, :13, :17]):  # graphs depend on the row width
            blob = enc.encode(frame)
            dctx = zl.DCtx()
            geozl.register_decoders(dctx)
            (o,) = dctx.decompress(blob)
            assert o.type == zl.Type.Numeric and o.elt_width == 2 and o.num_elts == frame.size
            assert decoder.decode(blob, "int16", frame.size).tobytes() == frame.tobytes()


# ------------------------------------------------------------------ the reference


@pytest.mark.parametrize("name", ["uint16", "int16", "uint8", "float32", "float64", "int64"])
@pytest.mark.parametrize("unit", ["tile", "cell"])
def test_the_reference_reader_reads_default_preset_frames_exactly(name, unit, tmp_path):
    arr = eo_scene(3, 45, 70, name, seed=11)
    tf = rumi.frames(arr, 32, unit=unit)
    enc = FrameEncoder(None, arr.dtype)
    for i in range(len(tf)):
        tf[i].compressed = enc.encode(tf[i].data)
    path = str(tmp_path / f"{name}.rumi")
    rumi.write(path, tf)
    back = rumi.read(path)
    assert back.dtype == arr.dtype and back.shape == arr.shape
    assert back.tobytes() == arr.tobytes()


@pytest.mark.parametrize("preset", [p for p, c in PRESETS.items() if c.portable and c.supports(ENCODINGS[(1, 16)])])
def test_the_reference_reader_reads_every_portable_preset(preset, tmp_path):
    arr = eo_scene(2, 40, 40, "uint16", seed=12)
    tf = rumi.frames(arr, 32)
    enc = FrameEncoder(preset, "uint16")
    for i in range(len(tf)):
        tf[i].compressed = enc.encode(tf[i].data)
    path = str(tmp_path / "p.rumi")
    rumi.write(path, tf)
    assert rumi.read(path).tobytes() == arr.tobytes()


def test_a_misaligned_frame_encodes_and_decodes_exactly():
    """OpenZL refuses unaligned input buffers; the encoder copies such frames first."""
    enc = encoding_for_dtype(np.uint16)
    raw = np.zeros(2 * 48 * 40 + 1, dtype=np.uint8)[1:]
    frame = raw.view(np.uint16).reshape(48, 40)
    frame[:] = np.random.default_rng(3).integers(0, 5000, (48, 40), dtype=np.uint16)
    assert not frame.flags.aligned
    data = FrameEncoder(resolve_codec(None, enc), enc).encode(frame)
    out = FrameDecoder().decode(data, enc, frame.size)
    assert np.array_equal(out, frame.reshape(-1))


# ----------------------------------------------------- per-dtype tables and geozl recipes


def test_the_table_presets_resolve_to_a_member_per_dtype_and_fall_back_to_the_default():
    for e in ENCS:
        for name in ("fast", "small", "portable"):
            member = resolve_codec(name, e)
            assert member.members is None and member.lossless
            picks = PRESETS[name].members
            if e.name in picks and picks[e.name].recipe is not None:
                assert member.recipe is not None and member.name == "geozl:" + member.recipe
            elif e.name in picks and picks[e.name] is not resolve_codec(None, e):
                assert member is PRESETS[member.name]  # a built-in preset measured faster/smaller
            else:
                assert member is resolve_codec(None, e)  # nothing measured faster/smaller: the default
    assert resolve_codec("fast", "uint16").name == "geozl:delta_n>zigzag>pfor"
    assert resolve_codec("fast", "bool") is PRESETS["generic"]
    assert resolve_codec("portable", "uint16").name == "delta"


def test_codec_none_is_auto_for_spec_01_and_fast_for_spec_02():
    for e in ENCS:
        assert resolve_codec(None, e) is resolve_codec("auto", e)
        assert resolve_codec(None, e, spec="0.2") is resolve_codec("fast", e)
    with pytest.raises(ValueError, match="spec must be one of"):
        resolve_codec(None, "uint16", spec="0.3")


@pytest.mark.parametrize("name", ["uint16", "float32", "bool", "uint4", "bfloat16", "int8", "complex128"])
@pytest.mark.parametrize("preset", ["fast", "small", "portable"])
def test_write_with_a_table_preset_round_trips_every_dtype(tmp_path, name, preset):
    import rumimm

    arr = eo_scene(2, 40, 56, name, seed=3)
    rumimm.write(tmp_path / "a.rumi", arr, tile=32, codec=preset)
    with rumimm.open(tmp_path / "a.rumi") as img:
        assert img[:].tobytes() == arr.tobytes()


def test_spec_02_files_default_to_fast_frames(tmp_path):
    import rumimm

    arr = eo_scene(2, 64, 64, "uint16", seed=4)
    kw = {"tile": 32, "spec": "0.2", "descriptions": ["a", "b"], "time": ["2026-01-01"]}
    rumimm.write(tmp_path / "d.rumi", arr, **kw)
    rumimm.write(tmp_path / "f.rumi", arr, codec="fast", **kw)
    rumimm.write(tmp_path / "p.rumi", arr, codec="portable", **kw)
    d, f, p = ((tmp_path / n).read_bytes() for n in ("d.rumi", "f.rumi", "p.rumi"))
    assert d == f and d != p


def test_a_geozl_recipe_writes_deterministic_frames_any_reader_of_geozl_decodes(decoder):
    scene = eo_scene(3, 64, 80, "uint16", seed=5)
    a = FrameEncoder("geozl:delta_w>zigzag>pfor", "uint16")
    b = FrameEncoder(resolve_codec("geozl:delta_w>zigzag>pfor", "uint16"), "uint16")
    for frame in (scene[1], scene, scene[:, :13, :17]):
        blob = a.encode(frame)
        assert blob == b.encode(frame) and frame_format_version(blob) == 24
        assert decoder.decode(blob, "uint16", frame.size).tobytes() == frame.tobytes()
        assert geozl.decompress(blob).tobytes() == frame.tobytes()


def test_a_recipe_of_frame_format_27_needs_format_version_27():
    frame = eo_scene(1, 32, 32, "uint16")[0]
    with pytest.raises(CodecError, match="writes OpenZL frame format 27, above the format_version 24"):
        FrameEncoder("geozl:planar>zigzag>pivco", "uint16").encode(frame)
    blob = FrameEncoder("geozl:planar>zigzag>pivco", "uint16", 27).encode(frame)
    assert frame_format_version(blob) == 27


@pytest.mark.parametrize("version", [25, 26, 27])
def test_a_recipe_refuses_a_format_version_its_frames_would_not_carry(tmp_path, version):
    """fast writes frame format 24 whatever is asked: a file asked to pin 25-27 was written at 24 (and the
    same write through Dask refused its own frames); now it is refused, and nothing is left behind."""
    scene = eo_scene(1, 32, 32, "uint16")
    with pytest.raises(CodecError, match=f"writes OpenZL frame format 24, not the frame_format_version {version}"):
        rumimm.write(tmp_path / "f.rumi", scene, tile=32, codec="fast", frame_format_version=version)
    assert not list(tmp_path.iterdir())
    rumimm.write(tmp_path / "f.rumi", scene, tile=32, codec="fast", frame_format_version=24)
    assert rumimm.validate(tmp_path / "f.rumi").frame_format_version == 24


def test_an_unknown_recipe_is_a_codec_error_naming_it():
    with pytest.raises(CodecError, match=r"geozl:nope>zstd.*unknown method"):
        FrameEncoder("geozl:nope>zstd", "uint16").encode(np.zeros((4, 4), np.uint16))
    with pytest.raises(ValueError, match="recipe must be"):
        resolve_codec("geozl:", "uint16")


def test_a_recipe_codec_is_not_built_on_an_openzl_compressor():
    with pytest.raises(TypeError, match="geozl builds and runs its graph"):
        resolve_codec("geozl:id>pfor", "uint16").build(zl.Compressor(), ENCODINGS[(1, 16)], (4, 4))
