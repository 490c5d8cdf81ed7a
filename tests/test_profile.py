"""``rumimm.profile_codecs`` and ``rumimm profile``: recipes measured on sample frames of the user's data.

The measuring core is ``rumimm.codec.profile`` (presets and geozl recipes, decoded through
``rumimm.codec.geozl_lib``); the sampling of frames from files and arrays is
``rumimm.writer.profile``.  Speeds are measured, never asserted: the tests check what
was measured and how (sizes against the real frames, every decode through rumimm's
decoder, the recommendation rule on known rows).
"""

from __future__ import annotations

import ctypes
import json

import numpy as np
import pytest

import rumimm
from rumimm.cli import main
from rumimm.codec import PRESETS, FrameEncoder, geozl_lib
from rumimm.codec import profile as core
from rumimm.codec.profile import RUMI_EO_016, RUMI_EO_026, RUMIMM, Candidate, Profile, measure, preset_readers
from rumimm.errors import CodecError
from rumimm.format.dtypes import encoding_for_dtype
from rumimm.synthetic import eo_scene
from rumimm.writer.profile import profile_codecs, sample_frames


@pytest.fixture(scope="module")
def scene():
    return eo_scene(3, 200, 170, "uint16", seed=5)


def _usable(dtype: str) -> list[str]:
    """Preset names that take ``dtype``, in PRESETS order ("auto" is one of them, chosen by dtype)."""
    enc = encoding_for_dtype(rumimm.DTYPES[dtype])
    return [n for n, c in PRESETS.items() if n != "auto" and c.supports(enc)]


def _frames(scene, n=2, size=64):
    return [np.ascontiguousarray(scene[i % scene.shape[0], :size, i * size:(i + 1) * size]) for i in range(n)]


# -- the measuring core ---------------------------------------------------------------------------

def test_every_preset_that_takes_the_dtype_is_measured_with_the_size_of_its_real_frames(scene):
    frames = _frames(scene)
    p = measure(frames, geozl=False, reps=1)
    names = [r.name for r in p.rows]
    assert names == _usable("uint16")
    raw = sum(f.nbytes for f in frames)
    assert p.raw_bytes == raw
    for row in p.rows:
        enc = FrameEncoder(row.name, "uint16")
        real = sum(len(enc.encode(f)) for f in frames)
        assert row.compressed == real and row.size == pytest.approx(real / raw)
        assert row.kind == "preset" and row.encode_mibs > 0 and row.decode_mibs > 0
        assert row.readers == preset_readers(PRESETS[row.name], "uint16")
    assert [r.name for r in p.rows if r.note == "default"] == ["delta"]
    # on uint16 delta-huffman writes delta's very frames: the same recipe, never the pick over delta
    assert p["delta-huffman"].same_as == "delta" and p["delta"].same_as is None
    assert "same frames as delta" in p.table()
    with_geozl = measure(frames, presets=["transpose"], reps=1)
    twin = with_geozl["id>transpose>entropy"]  # geozl's name for transpose's graph
    assert twin.same_as == "transpose" and twin.readers == with_geozl["transpose"].readers
    assert p["store"].size > 1 > p["delta"].size


def test_every_frame_of_every_candidate_is_decoded_through_rumimms_decoder(scene, monkeypatch):
    calls, checks = [], []
    real = geozl_lib.decompress

    def counting(src, size, dst, capacity, verify):
        calls.append(capacity)
        checks.append(verify)
        return real(src, size, dst, capacity, verify)

    monkeypatch.setattr(core.geozl_lib, "decompress", counting)
    frames = _frames(scene, n=2, size=32)
    p = measure(frames, reps=2)
    geo = [r for r in p.rows if r.kind == "geozl"]
    assert len(geo) >= 30 and all(">" in r.name for r in geo)
    assert len(calls) == len(p.rows) * len(frames) * (1 + 2)  # one checked decode, two timed
    assert set(calls) == {32 * 32 * 2}
    # smallest first, as geozl orders them; rumimm's checks accept what they decode to
    assert [r.size for r in geo] == sorted(r.size for r in geo)
    for r in geo:  # rumimm reads them all; a twin of a preset's frames is read by whoever reads those
        if r.same_as:
            assert r.readers == p[r.same_as].readers
        elif r.codec is None:  # no codec writes the recipe: only rumimm's own checks are claimed
            assert r.readers == (RUMIMM,)
        else:
            assert r.readers[0] == RUMIMM
    assert set(checks) == {True}  # checksums checked, as rumimm.open reads by default
    checks.clear()
    measure(frames, reps=1, geozl=False, verify=False)
    assert set(checks) == {False}


def test_a_decoder_giving_other_samples_fails_the_profile(scene, monkeypatch):
    real = geozl_lib.decompress

    def wrong(src, size, dst, capacity, verify):
        n = real(src, size, dst, capacity, verify)
        (ctypes.c_uint8 * 1).from_address(dst)[0] ^= 1  # one bit of the first sample flipped
        return n

    monkeypatch.setattr(core.geozl_lib, "decompress", wrong)
    with pytest.raises(CodecError, match="decoded samples differ from the samples encoded"):
        measure(_frames(scene, n=1, size=16), geozl=False, reps=1)


@pytest.mark.parametrize("dtype", ["uint8", "int16", "float32", "float64", "bool", "uint4", "bfloat16", "complex64"])
def test_every_sample_type_gets_its_presets_and_frames_that_decode_exactly(dtype, rng):
    dt = rumimm.DTYPES[dtype]
    if dtype == "bool":
        frame = rng.random((24, 40)) < 0.2
    elif dtype == "uint4":
        frame = rng.integers(0, 16, (24, 40), dtype=np.uint8).view(dt)
    elif np.dtype(dt).kind == "c":
        frame = (rng.normal(size=(24, 40)) + 1j * rng.normal(size=(24, 40))).astype(dt)
    else:
        frame = (rng.normal(size=(24, 40)) * 20 + 50).astype(dt)
    p = measure([frame], reps=1)
    presets = [r.name for r in p.rows if r.kind == "preset"]
    assert presets == _usable(dtype)
    assert p.recommended is not None and p.recommended.kind == "preset"


def test_a_spec_02_file_is_profiled_with_its_default_and_the_readers_that_open_it(tmp_path):
    """A spec 0.2 file's default is fast and rumi-eo 0.16.0 opens no spec 0.2 file: it was marked delta and
    listed 0.16.0, so require=("rumi-eo 0.16.0",) recommended a preset for a file that reader cannot open."""
    path = tmp_path / "s02.rumi"
    rumimm.write(path, eo_scene(2, 64, 64, "uint16", seed=1), tile=32, spec="0.2", descriptions=["a", "b"],
                 time=["2026-01-01"])
    p = profile_codecs(path, samples=2, geozl=False, reps=1)
    assert [r.name for r in p.rows if r.note == "default"] == ["fast"]
    assert all(RUMI_EO_016 not in r.readers for r in p.rows)
    assert p["fast"].readers == (RUMIMM, RUMI_EO_026)
    assert profile_codecs(path, samples=2, geozl=False, reps=1, require=[RUMI_EO_016]).recommended is None


def test_a_cell_frame_is_measured_as_one_frame_of_every_band(scene):
    cell = np.ascontiguousarray(scene[:, :48, :48])
    p = measure([cell], presets=["delta", "geozl-average"], geozl=False, reps=1)
    assert p.frame_shape == (3, 48, 48) and p.raw_bytes == cell.nbytes
    assert p["geozl-average"].compressed == len(FrameEncoder("geozl-average", "uint16").encode(cell))


def test_the_time_budget_leaves_out_the_frames_not_started_and_never_the_first(scene):
    ticks = iter(range(0, 100_000))

    def clock():  # each reading one second later
        return float(next(ticks))

    frames = _frames(scene, n=3, size=16)
    p = measure(frames, geozl=False, reps=1, budget=5, clock=clock)
    assert p.frames_skipped == 2 and p.raw_bytes == frames[0].nbytes
    assert [r.name for r in p.rows] == _usable("uint16")  # every candidate, on the same frames
    assert p["delta"].compressed == len(FrameEncoder("delta", "uint16").encode(frames[0]))
    assert "time budget: 2 sample frames left out" in p.table()
    assert measure(frames, geozl=False, reps=1, budget=None, clock=iter(range(100_000)).__next__).frames_skipped == 0


def test_bad_arguments_are_refused_with_what_was_expected(scene):
    f = _frames(scene, n=1, size=16)
    with pytest.raises(ValueError, match="codec 'nope' is not a preset; expected one of"):
        measure(f, presets=["nope"], geozl=False)
    with pytest.raises(ValueError, match="does not support float32 samples"):
        measure([f[0].astype(np.float32)], presets=["geozl-planar"], geozl=False)
    with pytest.raises(ValueError, match="at least one sample frame"):
        measure([])
    with pytest.raises(ValueError, match="must all be uint16"):
        measure([f[0], f[0].astype(np.int16)])
    with pytest.raises(ValueError, match="reps must be an int >= 1"):
        measure(f, reps=0)
    with pytest.raises(ValueError, match="unknown readers"):
        measure(f, require=["gdal"], geozl=False)


# -- the recommendation --------------------------------------------------------------------------

def _row(name, size, dec, readers=(RUMIMM,), kind="preset"):
    return Candidate(name, kind, size, 100.0, dec, readers, int(size * 1000))


def test_the_recommendation_is_the_fastest_decoder_within_the_tolerance_of_the_smallest():
    rows = [_row("small", 0.400, 500), _row("close", 0.419, 900), _row("fastest", 0.43, 5000),
            _row("recipe", 0.401, 2000, kind="geozl"), _row("portable", 0.41, 700, (RUMIMM, RUMI_EO_016))]
    p = Profile(rows=rows, dtype="uint16", frame_shape=(8, 8), raw_bytes=1000, tolerance=1.05)
    assert p.recommended.name == "close"  # 0.43 > 1.05 x 0.400
    assert p.best.name == "recipe"
    assert "fastest decode within 1.05x the smallest size" in p.rule
    default = Profile(rows=rows, dtype="uint16", frame_shape=(8, 8), raw_bytes=1000)  # tolerance 1.10
    assert default.recommended.name == "fastest" and "within 1.1x the smallest size" in default.rule
    only = Profile(rows=rows, dtype="uint16", frame_shape=(8, 8), raw_bytes=1000, require=(RUMI_EO_016,))
    assert only.recommended.name == only.best.name == "portable"
    assert "read by rumimm, rumi-eo 0.16.0" in only.rule
    none = Profile(rows=rows, dtype="uint16", frame_shape=(8, 8), raw_bytes=1000, require=(RUMI_EO_026,))
    assert none.recommended is None and "none fits the rule" in none.table()


def test_a_row_with_the_frames_of_an_earlier_one_is_never_recommended():
    rows = [_row("delta", 0.46, 600), _row("twin", 0.46, 900)]
    assert Profile(rows=rows, dtype="uint16", frame_shape=(8, 8), raw_bytes=1000).recommended.name == "twin"
    rows[1] = Candidate("twin", "preset", 0.46, 100.0, 900, (RUMIMM,), 460, same_as="delta")
    assert Profile(rows=rows, dtype="uint16", frame_shape=(8, 8), raw_bytes=1000).recommended.name == "delta"


def test_the_table_and_the_dict_say_the_same_thing():
    rows = [_row("delta", 0.46, 600, (RUMIMM, RUMI_EO_016)), _row("a>b", 0.45, 900, kind="geozl")]
    p = Profile(rows=rows, dtype="uint16", frame_shape=(512, 512), raw_bytes=1 << 20, frames=[(0, 0, 0, 0)],
                frames_skipped=3)
    text = p.table()
    assert "recommended preset: delta, 0.460 of raw" in text
    assert "best recipe overall: a>b" in text and "no codec writes it" in text
    assert "time budget: 3 sample frames left out" in text
    assert repr(p).startswith("<Profile uint16 (512, 512) x1: 2 candidates, recommended 'delta'>")
    d = json.loads(json.dumps(p.to_dict()))
    assert d["recommended"] == "delta" and d["best"] == "a>b" and d["rows"][1]["kind"] == "geozl"


def test_a_geozl_recipe_the_presets_module_makes_a_codec_of_carries_that_codec_and_its_readers(scene, monkeypatch):
    from types import SimpleNamespace

    from rumimm.codec import presets

    recipe = "delta_n>zigzag>transpose>zstd"

    def recipe_codec(name):
        if name != recipe:
            raise ValueError(f"not {recipe}")
        return SimpleNamespace(name="geozl:" + name, portable=False, readers_for=lambda enc: {RUMI_EO_026, RUMIMM})

    monkeypatch.setattr(presets, "recipe_codec", recipe_codec, raising=False)
    p = measure(_frames(scene, n=1, size=32), presets=["delta"], reps=1)
    row = p[recipe]
    assert row.codec == "geozl:" + recipe and row.readers == (RUMIMM, RUMI_EO_026)
    assert p["delta"].codec == "delta"
    others = [r for r in p.rows if r.kind == "geozl" and r.name != recipe]
    assert others and all(r.codec is None for r in others)
    best = Profile(rows=[row], dtype="uint16", frame_shape=(32, 32), raw_bytes=2048).table()
    assert f"(write it with codec='geozl:{recipe}')" in best


def test_a_presets_declared_readers_win_over_its_portable_flag():
    class Declared:
        portable = False

        def __init__(self, readers):
            self.readers = readers

    from types import SimpleNamespace

    # nothing declared: the portable flag (rumi-eo 0.16.0 decodes OpenZL's built-ins)
    assert preset_readers(SimpleNamespace(portable=True), "uint16") == (RUMIMM, RUMI_EO_016)
    assert preset_readers(SimpleNamespace(portable=False), "uint16") == (RUMIMM,)
    assert preset_readers(Declared([RUMI_EO_026, RUMIMM]), "uint16") == (RUMIMM, RUMI_EO_026)
    assert preset_readers(Declared({"uint16": [RUMIMM, RUMI_EO_016]}), "uint16") == (RUMIMM, RUMI_EO_016)
    assert preset_readers(Declared({"uint8": [RUMIMM]}), "uint16") == ()
    assert preset_readers(Declared(lambda enc: [RUMIMM] if enc.name == "uint16" else []), "uint16") == (RUMIMM,)
    flags = {"rumimm": True, "rumi-eo==0.16.0": False, "rumi-eo==0.26.1": True}
    assert preset_readers(Declared(flags), "uint16") == (RUMIMM, RUMI_EO_026)
    assert preset_readers(Declared({"uint16": flags}), "uint16") == (RUMIMM, RUMI_EO_026)

    class Compatible:
        portable = True
        compatibility = {"rumimm": True, "rumi-eo 0.16.0": False, "rumi-eo 0.26.1": False}

    assert preset_readers(Compatible(), "uint16") == (RUMIMM,)

    class Table:  # a per-dtype table: readers_for(encoding) wins over the table-wide attribute
        portable = False
        readers = frozenset({RUMIMM})

        def readers_for(self, enc):
            return frozenset({RUMIMM, RUMI_EO_016}) if enc.name == "uint16" else self.readers

    assert preset_readers(Table(), "uint16") == (RUMIMM, RUMI_EO_016)
    assert preset_readers(Table(), "float32") == (RUMIMM,)


# -- sampling frames from arrays and files ---------------------------------------------------------

def test_frames_are_whole_tiles_at_seeded_positions_in_file_order(scene):
    frames, where = sample_frames(scene, tile=64, samples=4, seed=1)
    assert where == sorted(where) and len(frames) == 4
    for f, (t, b, y, x) in zip(frames, where, strict=True):
        assert t == 0 and f.shape == (64, 64) and y + 64 <= 200 and x + 64 <= 170
        np.testing.assert_array_equal(f, scene[b, y:y + 64, x:x + 64])
    _again, where2 = sample_frames(scene, tile=64, samples=4, seed=1)
    assert where2 == where
    assert sample_frames(scene, tile=64, samples=4, seed=2)[1] != where
    # 3 bands x 3 x 2 whole tiles: asking for more gives them all
    assert len(sample_frames(scene, tile=64, samples=100)[0]) == 18


def test_cells_span_every_band_and_a_small_image_gives_its_clipped_frame(scene):
    frames, where = sample_frames(scene, tile=(50, 40), unit="cell", samples=3)
    assert all(f.shape == (3, 50, 40) for f in frames) and all(b is None for _, b, _, _ in where)
    small, _ = sample_frames(scene[:, :10, :20], tile=64, samples=8)
    assert [f.shape for f in small] == [(10, 20)] * 3
    with pytest.raises(ValueError, match="samples must be an int >= 1"):
        sample_frames(scene, samples=0)
    with pytest.raises(ValueError, match="unit must be 'tile' or 'cell'"):
        sample_frames(scene, unit="band")
    with pytest.raises(ValueError, match=r"expected an array of shape \(Y, X\)"):
        sample_frames(np.zeros(5, np.uint16))


def test_a_rumi_file_is_profiled_on_its_own_decoded_frames_with_its_tile_and_unit(tmp_path, scene):
    path = tmp_path / "s.rumi"
    rumimm.write(path, scene, tile=48, unit="cell")
    p = rumimm.profile_codecs(path, samples=3, geozl=False, reps=1)
    assert p.source == str(path) and p.frame_shape == (3, 48, 48) and len(p.frames) == 3
    assert p is not None and p.recommended is not None
    frames, where = sample_frames(scene, tile=48, unit="cell", samples=3)
    assert p.frames == where
    assert p.raw_bytes == sum(f.nbytes for f in frames)
    first = rumimm.profile_codecs(path, samples=3, geozl=False, reps=1, budget=0)  # the first frame, always
    assert first.frames == where[:1] and first.frames_skipped == 2
    np.save(tmp_path / "s.npy", scene)
    q = rumimm.profile_codecs(tmp_path / "s.npy", tile=48, samples=3, geozl=False, reps=1)
    assert q.frame_shape == (48, 48) and q.source.endswith("s.npy")


def test_a_geotiff_is_profiled_on_windows_gdal_reads(tmp_path, scene):
    import rasterio

    path = tmp_path / "s.tif"
    from affine import Affine

    with rasterio.open(path, "w", driver="GTiff", width=170, height=200, count=3, dtype="uint16", crs="EPSG:32633",
                       transform=Affine(10, 0, 500000, 0, -10, 4e6)) as ds:
        ds.write(scene)
    p = profile_codecs(path, tile=64, samples=3, geozl=False, reps=1, presets=["delta"])
    frames, where = sample_frames(scene, tile=64, samples=3)
    assert p.frames == where and p.raw_bytes == sum(f.nbytes for f in frames)
    assert p["delta"].compressed == sum(len(FrameEncoder("delta", "uint16").encode(f)) for f in frames)
    cells = profile_codecs(path, tile=64, unit="cell", samples=2, geozl=False, reps=1, presets=["delta"])
    assert cells.frame_shape == (3, 64, 64)


def test_a_file_that_is_neither_rumi_nor_a_tiff_is_refused_as_not_rumi(tmp_path):
    (tmp_path / "x.rumi").write_bytes(b"PNG? no" * 10)
    with pytest.raises(rumimm.RumiError, match=r"x.rumi"):
        profile_codecs(tmp_path / "x.rumi")


def test_a_spec_02_file_of_several_steps_is_sampled_across_its_steps(tmp_path, rng):
    a = rng.integers(0, 900, (2, 2, 40, 40)).astype(np.uint16)
    path = tmp_path / "t.rumi"
    rumimm.write(path, a, tile=16, spec="0.2", descriptions=["a", "b"], time=["2026-01-01", "2026-02-01"])
    p = profile_codecs(path, samples=20, geozl=False, reps=1, presets=["delta"])
    assert p.frame_shape == (16, 16) and {t for t, _, _, _ in p.frames} == {0, 1}


# -- the command line ---------------------------------------------------------------------------

def test_the_command_prints_the_table_or_json(tmp_path, scene, capsys):
    path = tmp_path / "s.rumi"
    rumimm.write(path, scene, tile=64)
    assert main(["profile", str(path), "--samples", "2", "--no-geozl", "--preset", "delta", "--preset",
                 "transpose"]) == 0
    out = capsys.readouterr().out
    assert "delta" in out and "transpose" in out and "rule: fastest decode" in out and "recommended preset:" in out
    assert main(["profile", str(path), "--samples", "2", "--no-geozl", "--json", "--require", RUMI_EO_016]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["require"] == [RUMI_EO_016] and len(d["frames"]) == 2 and d["recommended"] in PRESETS


def test_the_command_fails_in_one_line_on_a_missing_file_or_a_bad_preset(tmp_path, scene, capsys):
    assert main(["profile", str(tmp_path / "missing.rumi")]) == 2
    assert "missing.rumi: No such file or directory" in capsys.readouterr().err
    path = tmp_path / "s.rumi"
    rumimm.write(path, scene, tile=64)
    assert main(["profile", str(path), "--no-geozl", "--preset", "nope"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("rumimm: codec 'nope' is not a preset") and err.count("\n") == 1


def test_a_remote_rumi_file_is_profiled_on_the_frames_it_serves(http, tmp_path, scene, capsys):
    pytest.importorskip("obstore")  # the "remote" extra; CI installs it
    http.reset()
    path = tmp_path / "s.rumi"
    rumimm.write(path, scene, tile=64)
    url = http.put("profile/s.rumi", path.read_bytes())
    remote = profile_codecs(url, samples=2, geozl=False, reps=1, presets=["delta"])
    assert len(http.requests) == 1 + 2  # the open (no blob), then one ranged GET per sampled frame
    local = profile_codecs(path, samples=2, geozl=False, reps=1, presets=["delta"])
    assert remote.source == url and remote.frames == local.frames
    assert remote["delta"].compressed == local["delta"].compressed and remote.raw_bytes == local.raw_bytes
    assert main(["profile", url, "--samples", "1", "--no-geozl", "--preset", "delta"]) == 0
    assert capsys.readouterr().out.startswith(f"{url}: 1 frame of uint16 (64, 64)")
    http.reset()
