"""Image: a rumi file memory-mapped read-only, read by window with numpy indexing.

``rumimm.open(path)[:, y0:y1, x0:x1]`` normalises the key (``window.py``) and hands
the window to the read engine (``engine.py``), which plans it, takes what the
decoded-frame cache holds, and decodes the other frames straight from the file
mapping without the GIL, copying each window's rectangle into the output.

Opening checks what it can before it allocates anything proportional to the frame
count: with a blob, the blob itself, the 252 bytes of header and IFD it implies
(``tiff.check_blob_prefix``) and frame 0's magic, then the file size; without a blob
the whole file profile (``validate.index_mapping``), on the same mapping.  The file
is opened once, measured with ``fstat`` and mapped through that one descriptor, so
a file replaced while it is opened is seen whole, old or new.  Opening and reading
metadata import neither numba nor OpenZL: those load on the first pixel read.
"""

from __future__ import annotations

import builtins
import itertools
import os
import weakref
from functools import cached_property

import numpy as np

from rumimm.reader import cache as _cache
from rumimm.reader import engine
from rumimm.format.blob import Header
from rumimm.errors import BlobError, FormatError, RumiError, WindowError, where
from rumimm.format.georef import parse_geokeys
from rumimm.reader.mapped import OpenFile
from rumimm.reader.rasterio_surface import RasterioSurface
from rumimm.format.tiff import check_blob_prefix
from rumimm.reader.validate import index_mapping  # the full IFD walk, used only when no blob is given
from rumimm.format.window import Run, Selection, select, select_read

__all__ = ["Image", "open", "read_frames", "load_header"]

_tokens = itertools.count(1)


def load_header(header, path):
    """The blob given as ``header=``: a Header, bytes-like, or the path of a blob file."""
    if header is None or isinstance(header, Header):
        return header
    if type(header) is bytes:
        return Header.parse(header, path=path)
    if isinstance(header, (str, os.PathLike)):
        try:
            with builtins.open(header, "rb") as fh:
                return Header.parse(fh.read(), path=path)
        except OSError as exc:
            raise BlobError(f"{where(path)}cannot read the header blob file {os.fspath(header)!r}: "
                            f"{exc.strerror or exc}") from exc
    try:
        return Header.parse(header, path=path)
    except TypeError:
        raise TypeError(f"header must be the blob bytes, a Header or the path of a blob file, got "
                        f"{type(header).__name__}") from None



def _release(cache, token, private) -> None:
    """Finaliser: forget an image's cached frames (the file closes with its last holder)."""
    if private:
        cache.clear()
    else:
        cache.discard_owner(token)


class Image(RasterioSurface):
    """A rumi image opened for reading: a lazy (B, Y, X) array.

    Use :func:`rumimm.open`.  Indexing follows numpy on axes (band, y, x) and
    returns an ``ndarray``; only the frames a selection touches are decoded.

    Parameters
    ----------
    path : str or os.PathLike
        The ``.rumi`` file.
    header : bytes, Header, str or os.PathLike, optional
        The file's header blob (what ``rumimm.write`` returned), or the path of a
        file holding it.  With it the IFD is not walked: the 252 bytes of header
        and IFD (compared with those the blob implies), the first frame's magic
        and the file size are checked against the blob.  Without it the blob is
        rebuilt and the whole file profile checked, as :func:`rumimm.index` does.
    cache_bytes : int, optional
        None (default): share the process-wide decoded-frame cache
        (``rumimm.reader.cache.SHARED``, 64 MiB or ``RUMIMM_CACHE_BYTES``).  0: no cache.
        n > 0: a private cache of n bytes for this image.
    verify : bool
        Verify each frame's OpenZL checksums while decoding (default True).
        False is ~5% faster and still checks the decoded size.
    """

    def __init__(self, path, header=None, *, cache_bytes=None, verify: bool = True):
        self.path = os.fspath(path)
        hdr = load_header(header, self.path)
        if cache_bytes is None:
            cache, private = _cache.shared(), False
        else:
            _cache.check_size(cache_bytes)  # before the falsy test: False and 0.0 are refused, not "no cache"
            cache, private = (_cache.FrameCache(cache_bytes) if cache_bytes else None), True
        file = OpenFile(self.path)
        try:
            if hdr is None:
                hdr = Header.parse(index_mapping(file.mapping(), self.path), path=self.path)
                magic0 = int.from_bytes(file.read(hdr.base_frame_offset, 4), "little")
            else:
                magic0 = _check_blob(file, hdr, self.path)
        except BaseException:
            file.close()  # not left to the traceback, which may outlive this call
            raise
        self._init(hdr, cache_bytes, verify)
        self._cache = cache
        self._token = token = next(_tokens)
        self._source = engine.FrameSource(self.path, hdr, file, cache, token, bool(verify), magic0)
        self._finalizer = None if cache is None else weakref.finalize(self, _release, cache, token, private)

    def _init(self, hdr: Header, cache_bytes, verify) -> None:
        self._header = hdr
        self._grid = hdr.grid
        self._enc = hdr.encoding
        self._dtype = self._enc.dtype
        self._isz = self._enc.itemsize
        self._shape = self._grid.shape
        self._cache_arg = cache_bytes
        self._verify = bool(verify)

    # -- lifecycle ------------------------------------------------------------------
    def close(self) -> None:
        """Release the file mapping and this image's cached frames (idempotent)."""
        src = self._source
        if src is None:
            return
        self._source = None
        src.file = None  # closed now, or when a read in flight that holds it returns
        if self._finalizer is not None:
            self._finalizer()

    @property
    def closed(self) -> bool:
        return self._source is None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __reduce__(self):
        return (_reopen, (self.path, self._header.blob, self._cache_arg, self._verify, self.closed))

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
        """The sample encoding (``rumimm.format.dtypes.Encoding``)."""
        return self._enc

    @property
    def n_frames(self) -> int:
        return self._grid.n_frames

    def __len__(self) -> int:
        return self._shape[0]

    @cached_property
    def georef(self):
        """The file's georeferencing (``rumimm.format.georef.Georef``), read from the two tag values.

        They sit at fixed places right before the first frame (the matrix 160 bytes
        before it, the key directory 32 bytes before it), so no IFD is parsed.
        """
        block = self._georef_bytes()
        matrix = np.frombuffer(block, "<f8", 16, 0)
        keys = np.frombuffer(block, "<u2", 16, 128)
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


    def _georef_bytes(self) -> bytes:
        """The 160 bytes of the two georeferencing tag values (matrix, key directory) before frame 0."""
        base = self._grid.base_frame_offset
        return bytes(self._open_source().opened().read(base - 160, 160))

    def _open_source(self) -> engine.FrameSource:
        src = self._source
        if src is None:
            raise RumiError(f"{where(self.path)}image is closed")
        return src

    def _read_block(self, bands: np.ndarray, y: Run, x: Run, out):
        """Decode the (len(bands), y.count, x.count) block into ``out`` or a new array."""
        return engine.read_window(self._open_source(), bands, y, x, out)


def _check_blob(file: OpenFile, hdr: Header, path) -> int:
    """A given blob must describe this file: its first bytes first, then the file size.

    The IFD check needs only the 252 bytes of header and IFD, so a blob of another
    file is refused before anything proportional to its frame count is computed.
    Returns frame 0's magic.
    """
    size = file.size
    if size < hdr.base_frame_offset:
        _size_error(size, hdr, path)
    magic0 = check_blob_prefix(file.read, hdr, path)
    if size != hdr.file_size:
        _size_error(size, hdr, path)
    return magic0


def _size_error(size: int, hdr: Header, path):
    end = hdr.file_size
    kind = "truncated, or the blob belongs to another file" if size < end else "the blob belongs to another file"
    raise BlobError(f"{where(path)}file has {size} bytes but the header blob's frames end at byte {end}; {kind}")


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


def _reopen(path, blob, cache_bytes, verify, closed=False):
    if not closed:
        return Image(path, blob, cache_bytes=cache_bytes, verify=verify)
    img = Image.__new__(Image)  # a closed image stays closed: no file is opened
    img.path = path
    img._init(Header.parse(blob, path=path), cache_bytes, verify)
    img._source = img._cache = img._finalizer = None
    img._token = 0
    return img


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
    src = img._open_source()
    ks = [int(k) for k in frames]
    for k in ks:
        if not 0 <= k < img.n_frames:
            raise WindowError(f"frame {k} is out of range for {img.n_frames} frames")
    return engine.decode_frames(src, ks)
