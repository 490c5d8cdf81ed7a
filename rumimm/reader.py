"""Image: a rumi file memory-mapped read-only, read by window with numpy indexing.

``rumimm.open(path)[:, y0:y1, x0:x1]`` plans the read before touching a byte
(``window.py`` normalises the key, ``kernels.plan_window`` lists the frames and the
rectangles to copy), then one numba kernel decodes every frame the window touches
straight from the file mapping, without the GIL, through geozl's C decoder, and copies
each decoded rectangle into the output while the frame is still hot in the CPU cache.
Frames are decoded in parallel over ``rumimm.get_num_threads()`` threads.  A window
inside one frame is returned as a view of the freshly decoded frame when no cache
keeps that frame (zero copy); recently decoded frames are kept in an LRU cache
(``cache.py``) so neighbouring small windows decode each frame once.

What the fast path checks: every compressed frame lies inside the file (the file
size must equal the blob's end of the last frame), OpenZL verifies the frame's
compressed and content checksums, and the frame must decode to exactly the byte
count its position implies (``h * w * itemsize``, times B for cell frames).  The C
decoder reports only that byte count, so before a frame is first decoded its OpenZL
header is read (``codec.check_frame_header``, ~3 us, once per frame per open image):
one output, of type Numeric (Struct for complex128) and the right byte size.  The
element width is not in the header; the ``openzl.ext`` fallback, used when geozl's
library is missing, checks it after decoding, and ``rumimm.validate(path,
decode=True)`` checks every frame.
"""

from __future__ import annotations

import atexit
import builtins
import functools
import itertools
import os
import struct
import threading
import weakref
from functools import cached_property

import numpy as np

from . import _native
from . import cache as _cache
from . import kernels as K
from . import threads as _threads
from .blob import Header
from .errors import BlobError, CodecError, FormatError, RumiError, WindowError, where
from .grid import IFD_END, FrameUnit
from .rasterio_surface import RasterioSurface
from .window import Run, Selection, select, select_read

__all__ = ["Image", "open", "read_frames"]

_BIGTIFF = b"II\x2b\x00\x08\x00\x00\x00" + (16).to_bytes(8, "little")
_OPENZL_MAGIC = 0xD7B1A5C0
_ALIGN = 64
#: A read decodes on several threads only when its frames hold at least this many bytes.
PARALLEL_MIN_BYTES = 1 << 20
_tokens = itertools.count(1)
_NO_SCRATCH = np.zeros(1, np.uint8)
_ARANGE = np.arange(1 << 16, dtype=np.int64)  # group starts of one-frame-per-group plans (never written)
_local = threading.local()


@atexit.register
def _drop_main_thread_decoder() -> None:
    # The main thread's thread-local state outlives the modules at interpreter exit;
    # an openzl DCtx freed that late can abort in nanobind's refcounting, so free it
    # while openzl is still alive.
    _local.__dict__.pop("decoder", None)


def _align(n: int) -> int:
    return (n + _ALIGN - 1) // _ALIGN * _ALIGN


def _fallback_decoder():
    dec = getattr(_local, "decoder", None)
    if dec is None:
        from .codec import FrameDecoder  # imports openzl.ext: only when the C library is missing

        dec = _local.decoder = FrameDecoder()
    return dec


def _release(mm, cache, token, private) -> None:
    """Finaliser: forget an image's cached frames and unmap its file when unused."""
    if cache is not None:
        if private:
            cache.clear()
        else:
            cache.discard_owner(token)
    try:
        mm.close()
    except (BufferError, ValueError):
        pass  # an in-flight read still holds the mapping; it is unmapped when that read ends


class Image(RasterioSurface):
    """A rumi image opened for reading: a lazy (B, Y, X) array.

    Use :func:`rumimm.open`.  Indexing follows numpy on axes (band, y, x) and
    returns an ``ndarray``; only the frames a selection touches are decoded.

    Parameters
    ----------
    path : str or os.PathLike
        The ``.rumi`` file.
    header : bytes or Header, optional
        The file's header blob (what ``rumimm.write`` returned).  With it the IFD
        is not walked: the file size, the 252 bytes of header and IFD (compared
        with those the blob implies) and the first frame's magic are checked
        against the blob.  Without it the blob is rebuilt and the whole file
        profile checked by :func:`rumimm.index`.
    cache_bytes : int, optional
        None (default): share the process-wide decoded-frame cache
        (``rumimm.cache.SHARED``, 64 MiB or ``RUMIMM_CACHE_BYTES``).  0: no cache.
        n > 0: a private cache of n bytes for this image.
    verify : bool
        Verify each frame's OpenZL checksums while decoding (default True).
        False is ~5% faster and still checks the decoded size.
    """

    def __init__(self, path, header=None, *, cache_bytes=None, verify: bool = True):
        self.path = os.fspath(path)
        _cache.tune_malloc()
        fh = builtins.open(self.path, "rb")
        try:
            if header is None:
                from .validate import index  # the full IFD walk, only when no blob is given

                hdr = Header.parse(index(self.path), path=self.path)
            else:
                try:
                    hdr = Header.parse(header, path=self.path)
                except TypeError:
                    raise TypeError(f"header must be the blob bytes or a Header, got {type(header).__name__}") \
                        from None
            size = os.fstat(fh.fileno()).st_size
            if size != hdr.file_size:
                kind = "truncated, or the blob belongs to another file" if size < hdr.file_size else \
                    "the blob belongs to another file"
                raise BlobError(f"{where(self.path)}file has {size} bytes but the header blob's frames end at byte "
                                f"{hdr.file_size}; {kind}")
            # np.memmap maps the open descriptor (no second open by name); its mmap is
            # kept to unmap on close() rather than whenever the garbage collector runs.
            mm = np.memmap(fh, dtype=np.uint8, mode="r")._mmap
            # Read through np.frombuffer, whose arrays hold a buffer export of the map (np.memmap
            # and its views hold none): mm.close() then raises BufferError and leaves the map in
            # place while any array of it lives (a read in flight on another thread, a traceback's
            # frame) instead of unmapping memory still in use (a segfault).  A plain ndarray view
            # is also cheaper to slice per read than the memmap subclass.
            buf = np.frombuffer(mm, np.uint8)
        finally:
            fh.close()
        if header is not None:
            try:
                _check_prefix(buf, hdr, self.path)
            except BaseException:
                del buf
                try:
                    mm.close()
                except BufferError:
                    pass  # the exception's traceback still holds a view; the map goes with it
                raise
        self._header = hdr
        self._buf = buf
        grid = hdr.grid
        self._grid = grid
        enc = hdr.encoding
        self._enc = enc
        self._dtype = enc.dtype
        self._isz = enc.itemsize
        self._mask = (1 << enc.bits_per_sample) - 1 if enc.subbyte else 0xFF
        self._shape = grid.shape
        offsets = hdr.offsets
        self._src = offsets[:-1] + np.uint64(buf.ctypes.data)  # absolute frame addresses
        self._size = np.diff(offsets)
        self._grid_rows = np.array([[grid.tile_length, grid.tile_width, grid.tiles_across, grid.tiles_down,
                                     grid.samples_per_pixel, int(grid.unit == FrameUnit.CELL),
                                     grid.image_length, grid.image_width]], np.int64)
        self._grid_row = self._grid_rows[0]
        self._token = next(_tokens)
        self._cache_arg = cache_bytes
        if cache_bytes is None:
            self._cache = _cache.SHARED
            private = False
        else:
            self._cache = _cache.FrameCache(cache_bytes) if cache_bytes else None
            private = True
        self._verify = bool(verify)
        self._native = _native.available()
        self._typed = np.zeros(grid.n_frames, np.uint8)  # 1: frame header checked (type and size)
        # frame 0's magic = OpenZL magic + the file's pinned format version; every frame must share it
        (self._magic0,) = struct.unpack_from("<I", buf, grid.base_frame_offset)
        self._finalizer = weakref.finalize(self, _release, mm, self._cache, self._token, private)

    # -- lifecycle ------------------------------------------------------------------
    def close(self) -> None:
        """Release the file mapping and this image's cached frames (idempotent)."""
        if self._buf is None:
            return
        self._buf = None  # a read already holding the buffer keeps the map (and ``_src``) valid
        self._finalizer()

    @property
    def closed(self) -> bool:
        return self._buf is None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __reduce__(self):
        return (_reopen, (self.path, self._header.blob, self._cache_arg, self._verify))

    def __repr__(self) -> str:
        b, y, x = self._shape
        state = "closed " if self.closed else ""
        return (f"<{state}rumimm.Image {self.path!r} ({b}, {y}, {x}) {self._enc.name} "
                f"tile {self._grid.tile_length}x{self._grid.tile_width} {self.frame_unit}>")

    # -- metadata -------------------------------------------------------------------
    @property
    def header(self) -> Header:
        """The checked header blob (``bytes(img.header)`` is the blob)."""
        return self._header

    @property
    def shape(self) -> tuple[int, int, int]:
        """(B, Y, X): bands, rows, columns."""
        return self._shape

    @property
    def dtype(self) -> np.dtype:
        return self._dtype

    @property
    def ndim(self) -> int:
        return 3

    @property
    def size(self) -> int:
        b, y, x = self._shape
        return b * y * x

    @property
    def nbytes(self) -> int:
        """Bytes of the whole decoded image."""
        return self.size * self._isz

    @property
    def count(self) -> int:
        """Band count B (rasterio's name)."""
        return self._shape[0]

    @property
    def height(self) -> int:
        return self._shape[1]

    @property
    def width(self) -> int:
        return self._shape[2]

    @property
    def tile(self) -> tuple[int, int]:
        """(tile_length, tile_width): nominal frame height and width."""
        return (self._grid.tile_length, self._grid.tile_width)

    @property
    def frame_unit(self) -> str:
        """``"tile"`` (one band per frame) or ``"cell"`` (all bands per frame)."""
        return self._grid.unit.name.lower()

    @property
    def encoding(self):
        """The sample encoding (``rumimm.dtypes.Encoding``)."""
        return self._enc

    @property
    def n_frames(self) -> int:
        return self._grid.n_frames

    def __len__(self) -> int:
        return self._shape[0]

    @cached_property
    def georef(self):
        """The file's georeferencing (``rumimm.georef.Georef``), read from the two tag values.

        They sit at fixed places right before the first frame (the matrix 160 bytes
        before it, the key directory 32 bytes before it), so no IFD is parsed.
        """
        from .georef import parse_geokeys

        buf = self._open_buf()
        base = self._grid.base_frame_offset
        matrix = np.frombuffer(buf, "<f8", 16, base - 160)
        keys = np.frombuffer(buf, "<u2", 16, base - 32)
        geo, bad = parse_geokeys(keys, matrix)
        if bad or geo is None:
            raise FormatError(f"{where(self.path)}{bad[0] if bad else 'unreadable georeferencing'}")
        return geo

    @property
    def transform(self) -> tuple[float, ...] | None:
        """(x_res, row_rot, x_origin, col_rot, y_res, y_origin), or None without a CRS.

        The order of ``affine.Affine(a, b, c, d, e, f)``: ``Affine(*img.transform)``.
        """
        return self.georef.transform

    @property
    def crs(self) -> str | None:
        """``"EPSG:<code>"``, or None for undefined georeferencing."""
        return self.georef.crs

    @property
    def epsg(self) -> int | None:
        return self.georef.epsg

    @property
    def pixel_is_point(self) -> bool:
        return self.georef.pixel_is_point

    @property
    def bounds(self) -> tuple[float, float, float, float] | None:
        """(left, bottom, right, top) of the image's corners in CRS units, or None."""
        t = self.transform
        if t is None:
            return None
        a, b, c, d, e, f = t
        _, y, x = self._shape
        xs = [c + a * px + b * py for px, py in ((0, 0), (x, 0), (0, y), (x, y))]
        ys = [f + d * px + e * py for px, py in ((0, 0), (x, 0), (0, y), (x, y))]
        return (min(xs), min(ys), max(xs), max(ys))

    @property
    def res(self) -> tuple[float, float] | None:
        """(x, y) pixel size in CRS units, or None."""
        t = self.transform
        if t is None:
            return None
        a, b, _, d, e, _ = t
        return (float(np.hypot(a, d)), float(np.hypot(b, e)))

    def to_dict(self) -> dict:
        """JSON-safe summary: the blob's fields plus path, dtype name and georeferencing."""
        out = self._header.to_dict()
        out.update(path=self.path, crs=self.crs, epsg=self.epsg,
                   transform=None if self.transform is None else list(self.transform),
                   pixel_is_point=self.pixel_is_point)
        return out

    # -- reading ----------------------------------------------------------------------
    def __getitem__(self, key):
        sel = select(key, self._shape)
        block = self._read_block(sel.lists[0], sel.y, sel.x, None)
        return block if sel.remap is None else block[sel.remap]

    def __array__(self, dtype=None, copy=None):
        a = self._read_block(np.arange(self._shape[0], dtype=np.int64), Run(0, 1, self._shape[1]),
                             Run(0, 1, self._shape[2]), None)
        return a if dtype is None else a.astype(dtype, copy=False)

    def read(self, bands=None, window=None, out=None):
        """Read bands of a window, optionally into a caller's buffer.

        Parameters
        ----------
        bands : int or sequence of int, optional
            0-based band(s); an int gives a 2-D (h, w) result, a list (n, h, w).
            Default: every band.
        window : optional
            ``((y0, y1), (x0, x1))``, ``(slice(y0, y1), slice(x0, x1))`` or a
            rasterio ``Window``.  Default: the whole image.  It must lie inside
            the image (no clipping).
        out : numpy.ndarray, optional
            Written in place and returned; must have the result's shape and this
            image's dtype.

        Returns
        -------
        numpy.ndarray
            (n, h, w), or (h, w) for an int band.

        Raises
        ------
        WindowError
            A band or window outside the image.
        CodecError
            A frame is corrupt (the message names it and its grid position).
        """
        sel = select_read(bands, window, self._shape)
        return _read_into(self, sel, out)

    def _open_buf(self):
        buf = self._buf
        if buf is None:
            raise RumiError(f"{where(self.path)}image is closed")
        return buf

    def _read_block(self, bands: np.ndarray, y: Run, x: Run, out):
        """Decode the (len(bands), y.count, x.count) block into ``out`` or a new array."""
        buf = self._open_buf()
        nb = bands.shape[0]
        if not (nb and y.count and x.count):
            return np.empty((nb, y.count, x.count), self._dtype) if out is None else out
        plan = K.plan_window(self._grid_row, bands, y.start, y.step, y.count, x.start, x.step, x.count, self._isz)
        if out is None:
            if plan.shape[0] == 1:
                view = self._single_frame(plan, bands, y, x, buf)
                if view is not None:
                    return view
            out = np.empty((nb, y.count, x.count), self._dtype)
        _execute((self,), plan, False, bands, y.step, x.step, out.reshape((1,) + out.shape).view(np.uint8))
        return out

    def _single_frame(self, plan, bands, y, x, buf):
        """One frame holds the window: a view of it (zero copy) or a copy out of the cache."""
        e = plan[0]
        unit_cell = self._grid_row[K.G_CELL]
        if unit_cell:
            nb = bands.shape[0]
            b0 = int(bands[0])
            bstep = int(bands[1] - bands[0]) if nb > 1 else 1
            if bstep < 1 or (nb > 2 and not np.array_equal(np.diff(bands), np.full(nb - 1, bstep))):
                return None
            bsel = slice(b0, b0 + (nb - 1) * bstep + 1, bstep)
        k = int(e[K.P_FRAME])
        cache = self._cache
        hit = cache.get((self._token, k)) if cache is not None else None
        if hit is not None:
            frame, cached = hit[0], True
        else:
            frame = self._decode_frame(k, int(e[K.P_NBYTES]), buf)
            cached = cache is not None and cache.admits(frame.nbytes)
            if cached:
                cache.put_many(((self._token, k),), (frame,))
        fh, fw, fy, fx = int(e[K.P_FH]), int(e[K.P_FW]), int(e[K.P_FY]), int(e[K.P_FX])
        ys = slice(fy, fy + (y.count - 1) * y.step + 1, y.step)
        xs = slice(fx, fx + (x.count - 1) * x.step + 1, x.step)
        samples = frame.view(self._dtype)
        if unit_cell:
            view = samples.reshape(self._shape[0], fh, fw)[bsel, ys, xs]
        else:
            view = samples.reshape(1, fh, fw)[:, ys, xs]
        return view.copy() if cached or not frame.flags.writeable else view

    def _decode_frame(self, k: int, nbytes: int, buf) -> np.ndarray:
        """Decode frame k into a new uint8 buffer of its exact size, ``nbytes``."""
        if not self._native:
            return _fallback_frames((self,), [k], [0])[0]
        if not self._typed[k]:
            _check_header(self, k)
        dst = np.empty(nbytes, np.uint8)
        start = int(self._header.offsets[k])
        # one call of the 3-argument decoder: a small window's read is mostly this frame
        got = _native.decode_one(buf[start:start + int(self._size[k])], dst, self._verify)
        if got != nbytes:
            raise _frame_error(self, k, got if got < 0 else K.STATUS_SIZE_MISMATCH)
        if self._mask != 0xFF:
            np.bitwise_and(dst, np.uint8(self._mask), out=dst)  # sub-byte samples: their low bits
        return dst

    def _position(self, k: int) -> str:
        row, col, band = self._grid.frame_position(k)
        if self._grid.unit == FrameUnit.CELL:
            return f"row {row}, col {col}"
        return f"row {row}, col {col}, band {band}"


def _check_prefix(buf: np.ndarray, hdr: Header, path) -> None:
    """Check that a blob describes this file: the whole 252-byte IFD and frame 0's magic.

    The IFD is a function of the blob, so its expected bytes (and a mask hiding the
    unused bytes of inline fields, which the spec leaves open) are built once per
    layout and compared as one masked integer (~2 us); only a mismatch pays for
    :func:`_explain_prefix`, which names the field.
    """
    want, mask = _ifd_image(hdr)
    b, n = hdr.samples_per_pixel, hdr.n_frames
    same = int.from_bytes(buf[:IFD_END], "little") & mask == want
    if same and b >= 5:  # the sample pair is stored after the IFD: check band 0's
        sf_at = IFD_END + 2 * b + (8 * n if n >= 2 else 0) + (4 * n if n >= 3 else 0)
        same = (struct.unpack_from("<H", buf, IFD_END)[0], struct.unpack_from("<H", buf, sf_at)[0]) == \
            (hdr.bits_per_sample, hdr.sample_format)
    if not same:
        _explain_prefix(buf, hdr, path)
        raise BlobError(f"{where(path)}the header blob does not describe this file: its IFD differs")  # unreachable
    if hdr.byte_count(0) < 4:  # the magic alone is 4 bytes (and a 1-frame file ends right after frame 0)
        raise FormatError(f"{where(path)}frame 0 is {hdr.byte_count(0)} bytes, too short to be an OpenZL frame")
    (magic,) = struct.unpack_from("<I", buf, int(hdr.offsets[0]))
    if not 0 < magic - _OPENZL_MAGIC < 256:
        raise FormatError(f"{where(path)}frame 0 does not start with an OpenZL frame magic (found {magic:#010x}); "
                          "the header blob belongs to another file or the file is corrupt")


def _ifd_image(hdr: Header) -> tuple[int, int]:
    """(expected bytes 0..252, mask) of a file's header and IFD, as little-endian ints."""
    n = hdr.n_frames
    counts = tuple(int(hdr.byte_count(k)) for k in range(n)) if n <= 2 else None  # inline only then
    return _ifd_image_of(hdr.grid, hdr.bits_per_sample, hdr.sample_format, counts)


@functools.lru_cache(maxsize=4096)
def _ifd_image_of(grid, bits_per_sample, sample_format, counts) -> tuple[int, int]:
    want = bytearray(IFD_END)
    mask = bytearray(IFD_END)
    want[:16] = _BIGTIFF
    want[16:24] = (11).to_bytes(8, "little")
    mask[:24] = b"\xff" * 24
    for i, (tag, typ, cnt, value) in enumerate(_ifd_template(grid, bits_per_sample, sample_format, counts)):
        at = 24 + 20 * i
        struct.pack_into("<HHQ", want, at, int(tag), int(typ), cnt)
        want[at + 12:at + 12 + len(value)] = value
        mask[at:at + 12 + len(value)] = b"\xff" * (12 + len(value))
    mask[244:252] = b"\xff" * 8  # next-IFD offset 0
    return int.from_bytes(want, "little"), int.from_bytes(mask, "little")


def _explain_prefix(buf: np.ndarray, hdr: Header, path) -> None:
    """Raise the error that says which part of the IFD does not match the blob."""
    g = hdr.grid
    mismatch = []
    if bytes(buf[:16]) != _BIGTIFF:
        raise BlobError(f"{where(path)}file does not start with a little-endian BigTIFF header whose IFD is at "
                        "byte 16; it is not a rumi file")
    (count,) = struct.unpack_from("<Q", buf, 16)
    if count != 11:
        raise BlobError(f"{where(path)}IFD has {count} entries, expected 11; the header blob belongs to another "
                        "file")

    def field(i, fmt):
        return struct.unpack_from(fmt, buf, 24 + 20 * i + 12)[0]

    for name, got, want in (("image_width", field(0, "<I"), g.image_width),
                            ("image_length", field(1, "<I"), g.image_length),
                            ("samples_per_pixel", field(3, "<H"), g.samples_per_pixel),
                            ("tile_width", field(4, "<H"), g.tile_width),
                            ("tile_length", field(5, "<H"), g.tile_length),
                            ("frame count", struct.unpack_from("<Q", buf, 24 + 20 * 6 + 4)[0], g.n_frames)):
        if got != want:
            mismatch.append(f"{name} is {got} in the file but {want} in the blob")
    b, n = g.samples_per_pixel, g.n_frames
    if b <= 4:
        bps, sf = field(2, "<H"), field(8, "<H")
    else:
        bps = struct.unpack_from("<H", buf, 252)[0]
        sf = struct.unpack_from("<H", buf, 252 + 2 * b + (8 * n if n >= 2 else 0) + (4 * n if n >= 3 else 0))[0]
    if (sf, bps) != (hdr.sample_format, hdr.bits_per_sample):
        mismatch.append(f"(sample_format, bits_per_sample) is ({sf}, {bps}) in the file but "
                        f"({hdr.sample_format}, {hdr.bits_per_sample}) in the blob")
    if mismatch:
        raise BlobError(f"{where(path)}the header blob does not describe this file: {'; '.join(mismatch)}")
    # The whole IFD is a function of the blob: every (tag, type, count), the inline values and
    # the pointers to the external ones.  It sits in the 252 bytes just read; compare all of it
    # (but not the unused bytes of inline fields, which the spec leaves open).
    counts = tuple(int(hdr.byte_count(k)) for k in range(n)) if n <= 2 else None
    for i, (tag, typ, cnt, value) in enumerate(_ifd_template(g, hdr.bits_per_sample, hdr.sample_format, counts)):
        at = 24 + 20 * i
        got = struct.unpack_from("<HHQ", buf, at)
        name = f"{int(tag)} ({tag.name})"
        if got != (int(tag), int(typ), cnt):
            raise BlobError(f"{where(path)}the header blob does not describe this file: IFD entry {i} is tag "
                            f"{got[0]}, type {got[1]}, count {got[2]}; expected tag {name}, type {typ.name} "
                            f"({int(typ)}), count {cnt}")
        field = bytes(buf[at + 12:at + 12 + len(value)])
        if field != value:
            if cnt * typ.size > 8:
                what = (f"value is at byte {int.from_bytes(field, 'little')}, expected {int.from_bytes(value, 'little')} "
                        "(external values follow the IFD in rising tag order with no gaps)")
            else:
                fmt = f"<{cnt}{typ.code}"
                what = f"holds {struct.unpack(fmt, field)}, the blob gives {struct.unpack(fmt, value)}"
            raise BlobError(f"{where(path)}the header blob does not describe this file: tag {name} {what}")
    (next_ifd,) = struct.unpack_from("<Q", buf, 24 + 20 * 11)
    if next_ifd != 0:
        raise FormatError(f"{where(path)}next-IFD offset is {next_ifd}; a rumi file has exactly one IFD (no "
                          "overviews, masks or auxiliary IFDs)")


def _ifd_template(g, bits_per_sample: int, sample_format: int, counts) -> list:
    """(tag, type, count, value bytes) of each IFD entry of a file of grid ``g``.

    Taken from the IFD the writer lays out (``tiff.build_prefix``), so the Fixed IFD
    table lives in one place.  ``counts`` are the frame byte counts when N <= 2 (inline
    then), else None: external values appear in the IFD only as pointers, which do
    not depend on them.  Inline values are their used bytes; an external value is its
    8-byte pointer.
    """
    from .dtypes import encoding
    from .georef import UNDEFINED_MATRIX, geokeys
    from .tiff import FIXED_TAGS, build_prefix

    b, n = g.samples_per_pixel, g.n_frames
    c = np.asarray(counts if counts is not None else np.ones(n), np.uint64)
    offsets = np.uint64(g.base_frame_offset) + np.concatenate(([0], np.cumsum(c)[:-1])).astype(np.uint64)
    ifd = build_prefix(g, encoding(sample_format, bits_per_sample), offsets, c, UNDEFINED_MATRIX,
                       geokeys(None))[:IFD_END]
    out = []
    for i, (tag, (typ, count)) in enumerate(FIXED_TAGS.items()):
        at, cnt = 24 + 20 * i, count(b, n)
        out.append((tag, typ, cnt, ifd[at + 12:at + 12 + min(cnt * typ.size, 8)]))
    return out


def _frame_error(img: Image, k: int, code: int) -> CodecError:
    reason = _native.status_message(code) if code < 0 else f"decoded {code} bytes"
    if code == K.STATUS_SIZE_MISMATCH:
        row, col, _ = img._grid.frame_position(k)
        reason = f"decoded to a different size than the {img._grid.frame_shape(k)} frame at this position holds"
    detail = ""
    if img._buf is not None and code not in (K.STATUS_SIZE_MISMATCH,):
        start = int(img._header.offsets[k])
        ctx = _native.error_context(bytes(img._buf[start:start + int(img._size[k])]))
        detail = f": {ctx}" if ctx else ""
    return CodecError(f"{where(img.path)}frame {k} of {img.n_frames} ({img._position(k)}) failed to decode "
                      f"({reason}{detail}); the file may be corrupt or truncated")


def _check_header(img: Image, k: int) -> None:
    """Check frame k's OpenZL header (one output, its type and byte size) once per image.

    geozl's C decoder reports only the decoded byte count, so a frame of the right size
    but the wrong type (Serial, String) would otherwise decode silently.  A frame that
    declares what it should costs one ``codec.frame_declaration`` (~3 us); any other goes
    through ``codec.check_frame_header``, which says what is wrong.
    """
    from . import codec  # imports openzl.ext (~5 ms), on the first read

    buf = img._open_buf()
    start = int(img._header.offsets[k])
    size = int(img._size[k])
    _check_pinned(img, buf, k, start, size)
    frame = buf[start:start + size]
    want = codec.zl.Type.Struct if img._isz == 16 else codec.zl.Type.Numeric
    nbytes = img._grid.frame_samples(k) * img._isz
    try:
        ok = codec.frame_declaration(frame) == (1, want, nbytes)
    except CodecError:
        ok = False
    if not ok:  # the label costs a few us: build it only for the error
        try:
            codec.check_frame_header(frame, img._enc, nbytes // img._isz,
                                     label=f"{where(img.path)}frame {k} of {img.n_frames} ({img._position(k)})")
        except CodecError as exc:
            raise CodecError(f"{exc}; the file may be corrupt or truncated") from None
    img._typed[k] = 1


def _check_pinned(img: Image, buf, k: int, start: int, size: int) -> None:
    """Frame k must start with frame 0's magic: one pinned OpenZL format version per file."""
    if size < 4:
        return  # not an OpenZL frame at all: the decoder says so
    (magic,) = struct.unpack_from("<I", buf, start)
    if magic != img._magic0:
        raise CodecError(f"{where(img.path)}frame {k} of {img.n_frames} ({img._position(k)}) starts with "
                         f"{magic:#010x} but frame 0 with {img._magic0:#010x} (OpenZL format version "
                         f"{img._magic0 - _OPENZL_MAGIC}); all frames of a file must use one pinned OpenZL format "
                         "version")


def _check_headers(images, ks: np.ndarray, owners, groups) -> None:
    """:func:`_check_header` for the frames of ``groups`` not checked yet."""
    if owners is None:
        img = images[0]
        sel = ks if groups is None else ks[groups]
        for k in sel[img._typed[sel] == 0].tolist():
            _check_header(img, k)
        return
    for g in range(ks.shape[0]) if groups is None else groups:
        img = images[owners[g]]
        k = int(ks[g])
        if not img._typed[k]:
            _check_header(img, k)


def _fallback_frames(images, ks, imgs) -> list[np.ndarray]:
    """Decode frames with openzl.ext (holds the GIL); checks type, width and size."""
    dec = _fallback_decoder()
    out = []
    for k, i in zip(ks, imgs):
        img = images[i]
        buf = img._open_buf()
        start = int(img._header.offsets[k])
        size = int(img._size[k])
        _check_pinned(img, buf, k, start, size)
        frame = buf[start:start + size]
        try:
            arr = dec.decode(frame, img._enc, img._grid.frame_samples(k))
        except CodecError as exc:
            msg = str(exc)
            msg = msg[len("frame "):] if msg.startswith("frame ") else msg
            raise CodecError(f"{where(img.path)}frame {k} of {img.n_frames} ({img._position(k)}): {msg}") from None
        out.append(np.ascontiguousarray(arr).view(np.uint8).reshape(-1))
    return out


def _execute(images, plan, group: bool, bands, ys: int, xs: int, out4) -> None:
    """Decode and copy every entry of ``plan`` into ``out4`` (uint8, (items, slots, rows, row bytes)).

    ``images`` are the files the plan's P_IMAGE column refers to (one dtype).  With
    ``group``, entries of one frame are gathered first, so a frame several entries
    need decodes once; without it the entries must be one per frame, of images[0].
    """
    img0 = images[0]
    if group:
        key = plan[:, K.P_IMAGE] * (max(im.n_frames for im in images) + 1) + plan[:, K.P_FRAME]
        idx = np.argsort(key, kind="stable")
        plan = plan[idx]
        key = key[idx]
        starts = np.flatnonzero(np.concatenate(([True], key[1:] != key[:-1])))
        gstart = np.append(starts, plan.shape[0]).astype(np.int64)
        heads = plan[starts]
        ks = np.ascontiguousarray(heads[:, K.P_FRAME])
        owners = heads[:, K.P_IMAGE].tolist()
    else:
        n = plan.shape[0]
        gstart = _ARANGE[:n + 1] if n < _ARANGE.shape[0] else np.arange(n + 1, dtype=np.int64)
        heads = plan
        ks = np.ascontiguousarray(plan[:, K.P_FRAME])
        owners = None
    ngroups = ks.shape[0]
    keep = [im._open_buf() for im in images]  # every mapping the kernel reads, alive until it returns
    if len(images) == 1:
        src, size, fidx = img0._src, img0._size, ks
    else:
        own = np.asarray(owners)
        src = np.empty(ngroups, np.uint64)
        size = np.empty(ngroups, np.uint64)
        for i, im in enumerate(images):
            m = own == i
            src[m] = im._src[ks[m]]
            size[m] = im._size[ks[m]]
        fidx = np.arange(ngroups, dtype=np.int64)
    klist = ks.tolist()
    nbytes = heads[:, K.P_NBYTES]
    dec = np.zeros(ngroups, np.uint64)
    need = np.ones(ngroups, np.uint8)

    # -- frames already decoded
    shared = img0._cache
    if len(images) > 1 and any(im._cache is not shared for im in images):
        found = [None if images[o]._cache is None else images[o]._cache.get((images[o]._token, k))
                 for o, k in zip(owners, klist)]
        caching = all(im._cache is not None for im in images)
    elif shared is not None:
        if owners is None:
            token = img0._token
            found = shared.get_many([(token, k) for k in klist])
        else:
            found = shared.get_many([(images[o]._token, k) for o, k in zip(owners, klist)])
        caching = True
    else:
        found = None
        caching = False
    if found is None:
        missing = klist and list(range(ngroups))
    else:
        missing = []
        for g, hit in enumerate(found):
            if hit is None:
                missing.append(g)
            else:
                keep.append(hit[0])
                dec[g] = hit[1]
                need[g] = 0
    if missing:
        sizes = nbytes.tolist()
        if len(missing) < ngroups:
            sizes = [sizes[g] for g in missing]
        new_bytes, max_bytes = sum(sizes), max(sizes)
    else:
        new_bytes = max_bytes = 0
    store = caching and bool(missing) and all(
        im._cache is None or im._cache.admits(new_bytes) for im in images)

    # -- frames to decode: into new buffers the cache keeps, or a scratch slot per thread
    chunks = 1
    fresh = []
    scratch = _NO_SCRATCH
    stride = 0
    if missing and not all(im._native for im in images):
        olist = [0] * len(missing) if owners is None else [owners[g] for g in missing]
        fresh = _fallback_frames(images, [klist[g] for g in missing], olist)
        for g, frame in zip(missing, fresh):
            dec[g] = frame.ctypes.data
            need[g] = 0
        keep.extend(fresh)
    elif missing:
        _check_headers(images, ks, owners, None if len(missing) == ngroups else missing)
        if new_bytes >= PARALLEL_MIN_BYTES:  # threads pay off only with enough work
            chunks = _threads.parallel_slot(len(missing))
        if store:
            for g in missing:
                frame = np.empty(int(nbytes[g]), np.uint8)
                dec[g] = frame.ctypes.data
                fresh.append(frame)
            keep.extend(fresh)
        else:
            stride = _align(max_bytes)
            scratch = np.empty(stride * chunks, np.uint8)
    verify = img0._verify if len(images) == 1 else any(im._verify for im in images)
    status = np.zeros(ngroups, np.int64)
    args = (src, size, fidx, dec, need, gstart, plan, bands, out4, ys, xs, img0._isz, img0._mask, verify,
            scratch, stride, status)
    if chunks > 1:
        try:
            counter = np.zeros(1, np.int64)
            bad = _threads.run_workers(lambda w: K.decode_copy_shared(*args, counter, w), chunks)
            bad = min((b for b in bad if b >= 0), default=-1)
        finally:
            _threads.release_parallel()
    else:
        bad = K.decode_copy(*args, 0, ngroups, 1, 0)
    if bad >= 0:
        o = 0 if owners is None else owners[bad]
        raise _frame_error(images[o], klist[bad], int(status[bad]))
    if store and fresh:
        if owners is None:
            token = img0._token
            img0._cache.put_many([(token, klist[g]) for g in missing], fresh, [int(dec[g]) for g in missing])
        else:
            for g, frame in zip(missing, fresh):
                im = images[owners[g]]
                if im._cache is not None:
                    im._cache.put_many([(im._token, klist[g])], [frame], [int(dec[g])])
    del keep


def _read_into(img: Image, sel: Selection, out):
    """Read a selection, applying its remap, into ``out`` when given."""
    bands = sel.lists[0]
    shape = (bands.shape[0], sel.y.count, sel.x.count)
    if out is None:
        block = img._read_block(bands, sel.y, sel.x, None)
        return block if sel.remap is None else block[sel.remap]
    if not isinstance(out, np.ndarray):
        raise TypeError(f"out must be a numpy array, got {type(out).__name__}")
    want = shape if sel.remap is None else np.empty(shape, np.uint8)[sel.remap].shape
    if out.shape != want or out.dtype != img.dtype:
        raise ValueError(f"out must have shape {want} and dtype {img.dtype}, got {out.shape} and {out.dtype}")
    if not out.flags.writeable:
        raise ValueError("out must be writable")
    if sel.remap is None and out.flags.c_contiguous:
        img._read_block(bands, sel.y, sel.x, out)
    else:
        block = img._read_block(bands, sel.y, sel.x, None)
        out[...] = block if sel.remap is None else block[sel.remap]
    return out


def _reopen(path, blob, cache_bytes, verify):
    return Image(path, blob, cache_bytes=cache_bytes, verify=verify)


def open(path, header=None, *, cache_bytes=None, verify: bool = True) -> Image:  # noqa: A001
    """Open a rumi file for reading.

    Parameters
    ----------
    path : str or os.PathLike
        The ``.rumi`` file.
    header : bytes or Header, optional
        Its header blob, as returned by ``rumimm.write``.  With it the IFD is not
        walked (fast, e.g. for a data loader opening many files): the file size
        and the 252 bytes of header and IFD are checked against the blob.
        Without it the whole file profile is checked and the blob rebuilt.
    cache_bytes : int, optional
        Decoded-frame cache: None shares the process-wide cache (64 MiB by
        default, ``RUMIMM_CACHE_BYTES``), 0 disables it, n > 0 gives this image
        a private cache of n bytes.
    verify : bool
        Verify OpenZL checksums while decoding (default True).

    Returns
    -------
    Image
        A lazy (B, Y, X) array: ``img[:, y0:y1, x0:x1]`` decodes only the frames
        the window touches.  A context manager; picklable (reopens in the child).

    Raises
    ------
    FormatError
        The file breaks the rumi profile (no header given), or is truncated.
    BlobError
        The header blob is invalid or describes another file.
    FileNotFoundError
        No such file.

    Examples
    --------
    >>> with rumimm.open("scene.rumi", header=blob) as img:      # doctest: +SKIP
    ...     chip = img[:, 1024:1280, 2048:2304]                   # (B, 256, 256)
    ...     red = img[2]                                          # (Y, X)
    """
    return Image(path, header, cache_bytes=cache_bytes, verify=verify)


def read_frames(img: Image, frames) -> list[np.ndarray]:
    """Decode whole frames of an image (frame indices) into new arrays of their shape.

    Returns one ndarray per frame, shaped (h, w) for tile frames and (B, h, w) for
    cell frames, in the image's dtype.  Mostly for tests and tools.
    """
    buf = img._open_buf()
    out = []
    for k in frames:
        k = int(k)
        if not 0 <= k < img.n_frames:
            raise WindowError(f"frame {k} is out of range for {img.n_frames} frames")
        raw = img._decode_frame(k, img._grid.frame_samples(k) * img._isz, buf)
        out.append(raw.view(img.dtype).reshape(img._grid.frame_shape(k)))
    return out
