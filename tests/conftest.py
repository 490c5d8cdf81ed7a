"""Shared fixtures: seeded randomness, OpenZL frames and hand-made (good or broken) rumi files.

``craft(...)`` returns a :class:`Crafted` file: the eleven IFD entries of a compliant
rumi file plus its frames, each an OpenZL frame at format version 24 made directly
with ``openzl.ext``.  ``render()`` lays the file out with its own BigTIFF writer (not
``rumimm.format.tiff``), so a test can change entries, add or drop tags, move values, pad,
reorder frames or append bytes, and get a file that is broken in exactly one way.
For a good file, ``render()`` equals ``rumimm.format.tiff.build_prefix`` + the frames
(``test_tiff.py`` checks that).
"""

from __future__ import annotations

import os
import signal
import struct
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import openzl.ext as zl
import pytest
from hypothesis import assume
from hypothesis import strategies as st

from rumimm.format import dtypes, georef
from rumimm.format.grid import FrameUnit, Grid, frame_unit

FORMAT_VERSION = 24
TIFF_TYPE_SIZE = {3: 2, 4: 4, 12: 8, 16: 8}
TIFF_TYPE_CODE = {3: "H", 4: "I", 12: "d", 16: "Q"}


@pytest.fixture
def rng():
    return np.random.default_rng(20260815)


@pytest.fixture(params=["0.1", "0.2"], ids=["spec0.1", "spec0.2"])
def spec(request):
    """Each rumi spec version (``rumimm.format.spec.V01``, ``V02``): a test of both specs takes this."""
    from rumimm.format.spec import spec_named

    return spec_named(request.param)


DATA = Path(__file__).parent / "data"
#: Each spec's reference fixtures: (folder, blob suffix, the module rebuilding their source arrays).
#: Spec 0.1 files were written by rumi-eo 0.16.0 (``data/README.md``), 0.2 files by rumi-eo 0.26.1.
_FIXTURES = {"0.1": (DATA, ".blob", "make_fixtures"), "0.2": (DATA / "v2", ".header", "make_fixtures_v2")}
#: The fixture a test of both specs reads by default: several bands and ragged tiles in each, several
#: steps and a planar cell layout in 0.2.
REFERENCE = {"0.1": "u16_cell_b3", "0.2": "cube_u7"}


@dataclass(frozen=True)
class Reference:
    """A reference file of one spec: its path, the blob its writer returned and its source array."""

    name: str
    path: Path
    blob: bytes
    array: np.ndarray


def fixture_module(spec):
    """``make_fixtures`` (0.1) or ``make_fixtures_v2`` (0.2), imported from its folder once."""
    import importlib
    import sys

    folder, _, module = _FIXTURES[str(spec)]
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))
    return importlib.import_module(module)


def reference_file(spec, name: str | None = None) -> Reference:
    """The reference fixture ``name`` of ``spec`` (default ``REFERENCE[spec]``)."""
    folder, suffix, _ = _FIXTURES[str(spec)]
    name = name or REFERENCE[str(spec)]
    return Reference(name, folder / f"{name}.rumi", (folder / f"{name}{suffix}").read_bytes(),
                     fixture_module(spec).source(name))


@pytest.fixture
def reference(spec):
    """``reference_file(spec)``: a reference file of each spec in turn."""
    return reference_file(spec)


def pytest_runtest_setup(item):
    """A test marked ``torch`` skips when PyTorch is absent, and only then (CI installs it)."""
    if item.get_closest_marker("torch") is not None:
        pytest.importorskip("torch", reason="PyTorch is not in the test extra; pip install torch (CI does)")


# -- OpenZL frames -------------------------------------------------------------------
_COMPRESSOR = {}


@pytest.fixture(scope="session", autouse=True)
def _release_openzl_objects_before_exit():
    """Free cached OpenZL compressors while openzl is alive, not in interpreter teardown."""
    yield
    import peer

    _COMPRESSOR.clear()
    peer._COMPRESSOR_CACHE.clear()


def _generic_graph():
    if "generic" not in _COMPRESSOR:
        compressor = zl.Compressor()
        gid = zl.graphs.Compress().parameterize(compressor)
        compressor.select_starting_graph(gid)
        _COMPRESSOR["generic"] = (compressor, gid)
    return _COMPRESSOR["generic"]


def openzl_frame(samples: np.ndarray, format_version: int = FORMAT_VERSION, *, serial: bool = False) -> bytes:
    """One OpenZL frame: a Numeric input of the sample width (16-byte samples as a Struct).

    ``serial`` stores the same bytes as a Serial input instead: the right size, the wrong type.
    """
    flat = np.ascontiguousarray(samples).reshape(-1)
    width = flat.dtype.itemsize
    if serial:
        held, kind = flat.view(np.uint8), zl.Type.Serial
    elif width == 16:
        held, kind = flat.view(np.uint8).reshape(16, flat.size), zl.Type.Struct
    else:
        held, kind = flat.view(f"<u{width}"), zl.Type.Numeric
    compressor, gid = _generic_graph()
    cctx = zl.CCtx()
    cctx.set_parameter(zl.CParam.FormatVersion, int(format_version))
    cctx.select_starting_graph(compressor, gid)
    inp = zl.Input(kind, held)  # does not keep `held` alive: hold it until compress returns
    out = bytes(cctx.compress([inp]))
    del inp
    return out


#: Transforms used by the write tests: projected (EPSG:32633) and geographic (EPSG:4326).
UTM33N = (10.0, 0.0, 500000.0, 0.0, -10.0, 4200000.0)
WGS84 = (0.001, 0.0, 12.5, 0.0, -0.001, 45.0)


@pytest.fixture
def scene(rng):
    """(3, 37, 45) uint16 with ragged edges for 16 x 20 tiles and frames of unequal size (the write tests).

    A test module's own ``scene`` fixture takes its place there.
    """
    a = rng.integers(0, 4000, (3, 37, 45), dtype=np.uint16)
    a[1] //= 64  # compresses better than band 0: unequal frame sizes
    return a


def samples(name: str, shape, rng) -> np.ndarray:
    """Random samples of every bit pattern an encoding allows (NaNs and infinities included)."""
    dt = dtypes.DTYPES[name]
    enc = dtypes.encoding_for_dtype(dt)
    if enc.bits_per_sample == 1:
        return rng.integers(0, 2, shape, dtype=np.uint8).astype(bool)
    if enc.subbyte:
        return rng.integers(0, 1 << enc.bits_per_sample, shape, dtype=np.uint8).view(dt)
    return rng.integers(0, 256, (*shape[:-1], shape[-1] * enc.itemsize), dtype=np.uint8).view(dt)


def affine_times(a, b):
    """``a @ b`` for affine.Affine (composition, or applied to a point): affine >= 3 spells it ``@``,
    affine 2.4 (the declared floor) only ``*``."""
    return a @ b if hasattr(type(a), "__matmul__") else a * b


def exit_code_in_fork(child, seconds: float = 30) -> int:
    """Run ``child()`` in a forked child (exit 0 if it returns, 1 if it raises); its exit code, or -1 if it
    was still running after ``seconds`` (then killed): a hung child fails the test, never hangs the run."""
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            child()
            code = 0
        finally:
            os._exit(code)
    deadline = time.monotonic() + seconds
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            return -1
        time.sleep(0.02)


def same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    """Same shape, dtype and bytes: NaN payloads compare equal, unlike ``==``."""
    return a.shape == b.shape and a.dtype == b.dtype and np.array_equal(
        np.ascontiguousarray(a).view(np.uint8), np.ascontiguousarray(b).view(np.uint8)
    )


@st.composite
def grid_and_encoding(draw, *, max_size: int, max_tile: int, max_bands: int, max_frames: int):
    """A random Grid (either frame unit) of at most ``max_frames`` frames, and any encoding."""
    g = Grid(draw(st.integers(1, max_size)), draw(st.integers(1, max_size)), draw(st.integers(1, max_tile)),
             draw(st.integers(1, max_tile)), draw(st.integers(1, max_bands)), draw(st.sampled_from(list(FrameUnit))))
    assume(g.n_frames <= max_frames)
    enc = draw(st.sampled_from(sorted(dtypes.ENCODINGS.values(), key=lambda e: e.key)))
    return g, enc


def random_samples(enc: dtypes.Encoding, n: int, rng, spread: int) -> np.ndarray:
    """``n`` valid samples of ``enc``; a larger ``spread`` compresses worse (unequal frames)."""
    if enc.bits_per_sample < 8:
        bits = rng.integers(0, min(spread, 1 << enc.bits_per_sample), n, dtype=np.uint8)
        return bits.view(enc.dtype) if enc.dtype != np.bool_ else bits.astype(bool)
    raw = rng.integers(0, spread, n * enc.itemsize, dtype=np.uint8)
    return raw.view(enc.dtype)


def cut_frames(array: np.ndarray, grid: Grid) -> list[np.ndarray]:
    """The frame arrays of ``array`` (B, Y, X) in frame-index order."""
    out = []
    for row in range(grid.tiles_down):
        for col in range(grid.tiles_across):
            ys = slice(row * grid.tile_length, (row + 1) * grid.tile_length)
            xs = slice(col * grid.tile_width, (col + 1) * grid.tile_width)
            cell = array[:, ys, xs]
            if grid.unit == FrameUnit.CELL:
                out.append(cell)
            else:
                out.extend(cell[b] for b in range(grid.samples_per_pixel))
    return out


# -- a tiny BigTIFF writer for crafted files ------------------------------------------
@dataclass
class Entry:
    """One IFD entry; ``data`` is the raw value bytes (None: filled in by render)."""

    tag: int
    type: int
    count: int
    data: bytes | None
    pointer: int | None = None  # force the 8-byte field to this pointer


@dataclass
class Crafted:
    """A rumi file as entries + frames, with knobs that break exactly one rule each."""

    grid: Grid
    enc: dtypes.Encoding
    frames: list[bytes]
    entries: list[Entry]
    magic: bytes = b"II\x2b\x00"
    first_ifd: int = 16
    next_ifd: int = 0
    gap_after: dict[int, int] = field(default_factory=dict)  # tag -> zero bytes after its external value
    gap_before_frames: int = 0
    frame_order: list[int] | None = None  # physical order of frames (default: frame-index order)
    tail: bytes = b""

    # -- entries ------------------------------------------------------------------
    def entry(self, tag: int) -> Entry:
        return next(e for e in self.entries if e.tag == tag)

    def set_values(self, tag: int, values, type: int | None = None) -> None:
        """Replace a tag's values (count follows), optionally with another TIFF type."""
        e = self.entry(tag)
        if type is not None:
            e.type = type
        vals = np.atleast_1d(np.asarray(values))
        e.data = vals.astype(np.dtype(TIFF_TYPE_CODE[e.type]).newbyteorder("<")).tobytes()
        e.count = vals.size

    def remove(self, tag: int) -> None:
        self.entries = [e for e in self.entries if e.tag != tag]

    def add(self, tag: int, type: int, values) -> None:
        """Add a tag, keeping rising tag order."""
        vals = np.atleast_1d(np.asarray(values))
        data = vals.astype(np.dtype(TIFF_TYPE_CODE[type]).newbyteorder("<")).tobytes()
        self.entries.append(Entry(tag, type, vals.size, data))
        self.entries.sort(key=lambda e: e.tag)

    @property
    def counts(self) -> np.ndarray:
        return np.array([len(f) for f in self.frames], dtype=np.uint64)

    @property
    def blob(self) -> bytes:
        from rumimm.format.blob import build_header

        return build_header(self.grid, self.enc, self.counts)

    # -- layout -------------------------------------------------------------------
    def render(self) -> bytes:
        n_entries = len(self.entries)
        cursor = self.first_ifd + 8 + 20 * n_entries + 8
        datas = {}
        for e in self.entries:  # sizes first: TileOffsets values depend on where frames start
            size = len(self.frames) * (8 if e.tag == 324 else 4) if e.data is None else len(e.data)
            datas[e.tag] = size
        for e in self.entries:
            if datas[e.tag] > 8:
                cursor += datas[e.tag] + self.gap_after.get(e.tag, 0)
        base = cursor + self.gap_before_frames
        order = self.frame_order if self.frame_order is not None else range(len(self.frames))
        phys = np.zeros(len(self.frames), dtype=np.uint64)
        pos = base
        for k in order:
            phys[k] = pos
            pos += len(self.frames[k])
        auto = {324: phys.astype("<u8").tobytes(), 325: self.counts.astype("<u4").tobytes()}

        ifd = [struct.pack("<Q", n_entries)]
        external = []
        cursor = self.first_ifd + 8 + 20 * n_entries + 8
        for e in self.entries:
            data = e.data if e.data is not None else auto[e.tag]
            if len(data) <= 8:
                fld = data.ljust(8, b"\0")
            else:
                fld = struct.pack("<Q", cursor)
                gap = self.gap_after.get(e.tag, 0)
                external.append(data + b"\0" * gap)
                cursor += len(data) + gap
            if e.pointer is not None:
                fld = struct.pack("<Q", e.pointer)
            ifd.append(struct.pack("<HHQ", e.tag, e.type, e.count) + fld)
        ifd.append(struct.pack("<Q", self.next_ifd))
        head = self.magic + struct.pack("<HHQ", 8, 0, self.first_ifd)
        head = head.ljust(self.first_ifd, b"\0")
        body = b"".join(self.frames[k] for k in order)
        return head + b"".join(ifd) + b"".join(external) + b"\0" * self.gap_before_frames + body + self.tail

    def write(self, path) -> str:
        with open(path, "wb") as fh:
            fh.write(self.render())
        return str(path)


def fixed_entries(grid: Grid, enc: dtypes.Encoding, matrix, keys) -> list[Entry]:
    b = grid.samples_per_pixel
    n = grid.n_frames
    return [
        Entry(256, 4, 1, struct.pack("<I", grid.image_width)),
        Entry(257, 4, 1, struct.pack("<I", grid.image_length)),
        Entry(258, 3, b, struct.pack(f"<{b}H", *[enc.bits_per_sample] * b)),
        Entry(277, 3, 1, struct.pack("<H", b)),
        Entry(322, 3, 1, struct.pack("<H", grid.tile_width)),
        Entry(323, 3, 1, struct.pack("<H", grid.tile_length)),
        Entry(324, 16, n, None),
        Entry(325, 4, n, None),
        Entry(339, 3, b, struct.pack(f"<{b}H", *[enc.sample_format] * b)),
        Entry(34264, 12, 16, struct.pack("<16d", *matrix)),
        Entry(34735, 3, 16, struct.pack("<16H", *keys)),
    ]


def craft(shape=(3, 20, 30), tile=8, unit="tile", dtype="uint16", *, epsg=None, transform=None,
          pixel_is_point=False, seed=0, array=None) -> Crafted:
    """A compliant rumi file with ragged edge frames of unequal compressed size."""
    tl, tw = (tile, tile) if isinstance(tile, int) else tile
    b, y, x = shape
    enc = dtypes.encoding_for_dtype(dtypes.DTYPES.get(dtype, dtype) if isinstance(dtype, str) else dtype)
    grid = Grid(x, y, tw, tl, b, frame_unit(unit))
    r = np.random.default_rng(seed)
    if array is None:
        frames = []
        for k in range(grid.n_frames):
            n = grid.frame_samples(k)
            frames.append(openzl_frame(random_samples(enc, n, r, spread=2 + 37 * (k % 7))))
    else:
        frames = [openzl_frame(np.ascontiguousarray(a)) for a in cut_frames(array, grid)]
    if epsg is None:
        matrix, keys = georef.UNDEFINED_MATRIX, georef.geokeys(None, pixel_is_point)
    else:
        matrix = georef.matrix_from_transform(transform or (10.0, 0.0, 500000.0, 0.0, -10.0, 4200000.0))
        keys = georef.geokeys(epsg, pixel_is_point)
    return Crafted(grid, enc, frames, fixed_entries(grid, enc, matrix, keys))


def set_entry(which: int, /, **fields):
    """A change for :func:`craft` files: set fields (tag, type, count, pointer, data) of IFD entry ``which``."""
    def change(c: Crafted) -> None:
        e = c.entry(which)
        for name, value in fields.items():
            setattr(e, name, value)
    return change


def patch(buf: bytes, offset: int, fmt: str, *values) -> bytes:
    """``buf`` with ``struct.pack("<" + fmt, *values)`` written at ``offset``."""
    out = bytearray(buf)
    struct.pack_into("<" + fmt, out, offset, *values)
    return bytes(out)


@pytest.fixture(scope="session")
def good_tile_file():
    """(Crafted, rendered bytes) of a (3, 20, 30) uint16 tile-unit file, 8 x 8 tiles."""
    c = craft()
    return c, c.render()


@pytest.fixture(scope="module")
def http():
    """A Range-serving HTTP server on 127.0.0.1 (tests/servers.py), one per test module."""
    from servers import RangeServer

    srv = RangeServer().start()
    yield srv
    srv.stop()


@pytest.fixture
def server(http):
    """The module's HTTP server, with no faults, latency or counts left from another test."""
    http.reset()
    yield http
    if http.faulted:
        http.settle()  # requests the client sent before it gave up land here, not in the next test
    http.reset()


def remote_batch(server, urls, scenes, seed: int, latency: float = 0.05):
    """``read_batch`` of 16 random 256 x 256 chips over 8 served ``scenes`` (1024 x 1024), with ``latency``
    added to every request; checks the pixels and returns the chips' (file, y, x) rows."""
    import rumimm

    images = [rumimm.open(u, header=b, cache_bytes=0) for u, (_, _, b) in zip(urls, scenes, strict=True)]
    rng = np.random.default_rng(seed)
    rows = [(int(i), int(y), int(x)) for i, y, x in zip(rng.integers(0, 8, 16), rng.integers(0, 769, 16),
                                                        rng.integers(0, 769, 16), strict=True)]
    server.latency = latency
    try:
        got = rumimm.read_batch([images[i] for i, _, _ in rows], np.array([(y, x) for _, y, x in rows]),
                                size=(256, 256))
    finally:
        server.latency = 0.0
    for n, (i, y, x) in enumerate(rows):
        np.testing.assert_array_equal(got[n], scenes[i][0][:, y:y + 256, x:x + 256])
    return rows


def write_scenes(folder, **write_kwargs):
    """8 synthetic scenes of 4 bands, 1024 x 1024, 512-pixel tile frames, written with ``write_kwargs``:
    [(array, path, blob)] (the remote tests' files, of either spec)."""
    import rumimm
    from rumimm.synthetic import eo_scene

    out = []
    for i in range(8):
        a = eo_scene(bands=4, height=1024, width=1024, dtype="uint16", seed=i)
        blob = rumimm.write(folder / f"s{i}.rumi", a, tile=512, **write_kwargs)
        out.append((a, folder / f"s{i}.rumi", blob))
    return out


def moto_object(moto, monkeypatch, bucket: str, key: str, data: bytes) -> None:
    """Point the environment at moto's S3 server, put ``data`` at ``s3://bucket/key`` and reset its counters."""
    for k, v in moto.env.items():
        monkeypatch.setenv(k, v)
    c = moto.client()
    c.create_bucket(Bucket=bucket)
    c.put_object(Bucket=bucket, Key=key, Body=data)
    moto.reset()



_COMPILES: list = []


def _count_numba_compiles():
    """Run on a Dask worker: count every entry into numba's compiler (a compile or a cache load)."""
    from numba.core import event

    class Counter(event.Listener):
        def on_start(self, ev):
            _COMPILES.append(ev.kind)

        def on_end(self, ev):
            pass

    event.register("numba:compiler_lock", Counter())


@pytest.fixture(scope="session")
def dask_session_client():
    """One LocalCluster for the session: 2 worker processes of 1 thread (~15 s to start, so tests using it are slow).

    Not the default client: a test takes it with the ``client`` fixture of its module
    (``client.as_current()``), so tests that do not ask for it keep Dask's local schedulers.
    Workers count numba compiles from their start (``_count_numba_compiles``).
    """
    from dask.distributed import Client, LocalCluster

    with LocalCluster(processes=True, n_workers=2, threads_per_worker=1, dashboard_address=None,
                      silence_logs=50) as cluster, Client(cluster, set_as_default=False) as c:
        c.run(_count_numba_compiles)
        yield c
