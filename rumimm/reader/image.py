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
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import cached_property
from typing import TYPE_CHECKING, Any, NoReturn, cast

import numpy as np
from affine import Affine

from rumimm._deprecation import UNSET, renamed, renamed_keyword
from rumimm.errors import BlobError, FormatError, RumiError, WindowError, where
from rumimm.format.blob import Header
from rumimm.format.georef import GEOREF_BYTES, parse_geokeys, split_georef_block
from rumimm.format.spec import V01, spec_named, spec_of
from rumimm.format.tiff import check_blob_prefix
from rumimm.format.trailer import Trailer, max_trailer_bytes, min_trailer_bytes, parse_trailer
from rumimm.format.v2 import Grid2, Header2, check_blob_prefix2, parse_header
from rumimm.format.window import Run, Selection, select, select_read
from rumimm.reader import cache as _cache
from rumimm.reader import engine, layouts
from rumimm.reader.rasterio_surface import RasterioSurface, area_coefficients, indexes_to_bands
from rumimm.reader.validate import inspect_mapping, inspect_store  # the IFD walk, used only when no blob is given
from rumimm.store.local import LocalStore
from rumimm.store.remote import RemoteStore
from rumimm.store.uri import is_remote, public_name

if TYPE_CHECKING:
    from typing import Self

    from numpy.typing import DTypeLike, NDArray

    from rumimm._typing import BlobArg, SpecName, StrPath
    from rumimm.format.dtypes import Encoding
    from rumimm.format.georef import Georef
    from rumimm.format.grid import Grid
    from rumimm.format.pam import Metadata
    from rumimm.format.spec import Spec

__all__ = ["Image", "frame_source", "georef_block", "load_header", "open", "raw_frame", "read_block", "read_frames",
           "state_georef"]

_tokens = itertools.count(1)
_PENDING: Trailer = Trailer.__new__(Trailer)  # a remote spec 0.2 image's trailer, fetched on first use
_TIME_AXES = ("time", "band", "y", "x")
#: Each open image's frame source, what the read engine reads it through: held by this module, not as a
#: member of ``Image``, so that the cube, the converter and the CLI reach it by :func:`frame_source`
#: without widening Image's public API.  An image that closes, or is collected, leaves it.
_SOURCES: weakref.WeakKeyDictionary[Image, engine.FrameSource] = weakref.WeakKeyDictionary()


def load_header(header: BlobArg | StrPath | None, path: StrPath, spec: Spec | str | None = None) -> Header | None:
    """The blob given as ``header=``: a Header, bytes-like, or the path of a blob file.

    ``spec`` (a ``format.spec.Spec``, its name or None) is the file's specification, from its first bytes.
    """
    if header is None:
        return header
    if isinstance(header, Header) or type(header) is bytes:
        return parse_header(header, spec=spec, path=path)
    if isinstance(header, (str, os.PathLike)):
        try:
            with builtins.open(header, "rb") as fh:
                data = fh.read()
        except OSError as exc:
            raise BlobError(f"{where(path)}cannot read the header blob file {os.fspath(header)!r}: "
                            f"{exc.strerror or exc}") from exc
        return parse_header(data, spec=spec, path=path)
    try:
        return parse_header(header, spec=spec, path=path)
    except TypeError:
        raise TypeError(f"header must be the blob bytes, a Header or the path of a blob file, got "
                        f"{type(header).__name__}") from None



def _release(cache: _cache.FrameCache, token: int, private: bool) -> None:
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
        The ``.rumi`` file, or a remote URI (``s3://``, ``gs://``, ``az://``,
        ``http(s)://``; ``docs/remote.md``).
    header : bytes, Header, str or os.PathLike, optional
        The file's header blob (what ``rumimm.write`` returned), or the path of a
        file holding it.  With it the IFD is not walked: the 252 bytes of header
        and IFD (compared with those the blob implies), the first frame's magic
        and the file size are checked against the blob.  Without it the blob is
        rebuilt and the whole file profile checked, as :func:`rumimm.build_blob` does.
    cache_bytes : int, optional
        None (default): share the process-wide decoded-frame cache
        (``rumimm.reader.cache.SHARED``, 64 MiB or ``RUMIMM_CACHE_BYTES``).  0: no cache.
        n > 0: a private cache of n bytes for this image.
    verify : bool
        Verify each frame's OpenZL checksums while decoding (default True).
        False still checks the decoded size; it decodes default-codec frames up to
        ~10% faster and ``fast`` frames 10-25% faster (hashing is a larger share of
        a faster decoder's time).
    spec : {None, "0.1", "0.2"}
        The specification the file must follow (``Image.spec``); None accepts either.
    storage_options : dict, optional
        Remote URIs only: client settings (``store.remote.RemoteStore``).  A remote
        file opened with a blob is not read at open: its size (reported by the first
        answer) and first frame's magic are checked at the first read (a spec 0.2 file's
        trailer is fetched when band texts or time are first asked for); without a blob
        its profile is checked from its first bytes (one request).
    """

    def __init__(self, path: StrPath, header: BlobArg | StrPath | None = None, *, cache_bytes: int | None = None,
                 verify: bool = True, spec: SpecName | None = None, storage_options: Mapping[str, Any] | None = None,
                 format: Any = UNSET) -> None:
        spec = renamed_keyword("Image", "format", "spec", format, spec)
        remote = is_remote(path)
        if not remote and storage_options:
            raise ValueError(f"storage_options apply to remote URIs only, got a local path {os.fspath(path)!r}")
        self._uri = cast(str, path) if remote else None  # a remote path is a str (is_remote)
        self._storage_options = dict(storage_options) if storage_options else None
        self.path = public_name(cast(str, path)) if remote else os.fspath(path)
        want = None if spec is None else spec_named(spec, what="spec")
        cache: _cache.FrameCache | None
        if cache_bytes is None:
            cache, private = _cache.shared(), False
        else:
            _cache.check_size(cache_bytes)  # before the falsy test: False and 0.0 are refused, not "no cache"
            cache, private = (_cache.FrameCache(cache_bytes) if cache_bytes else None), True
        georef = None
        file: LocalStore | RemoteStore
        magic0: int | None
        if self._uri is not None:
            file, hdr, magic0, trailer, georef = _open_remote(self._uri, header, want, self._storage_options,
                                                                  self.path)
        else:
            file, hdr, magic0, trailer = self._open_local(header, want)
        self._init(hdr, cache_bytes, verify)
        self._trailer = trailer
        if georef is not None:  # parsed from the first request of an open without a blob: no second request
            self.__dict__["georef"] = georef
        self._cache = cache
        self._token = token = next(_tokens)
        _SOURCES[self] = engine.FrameSource(self.path, hdr, file, cache, token, bool(verify), magic0)
        self._finalizer = None if cache is None else weakref.finalize(self, _release, cache, token, private)

    def _open_local(self, header: BlobArg | StrPath | None, want: Spec | None
                    ) -> tuple[LocalStore, Header, int, Trailer | None]:
        """(store, header, frame 0's magic, trailer or None) of a local file, checked as the docstring says.

        The spec is chosen once, from the first bytes (anything but ``RUMI`` is checked as
        0.1, whose rules name what is wrong); the header record comes from the blob given,
        or from the one IFD walk.
        """
        file = LocalStore(self.path)
        trailer = None
        try:
            spec = spec_of(bytes(file.read(0, 4)), fallback=V01)
            if want is not None and want is not spec:
                raise FormatError(f"{where(self.path)}file is rumi spec {spec} (it starts with {spec.starts_with}), "
                                  f"but spec={want.name!r} was given")
            hdr = load_header(header, self.path, spec)
            if hdr is None:
                rep = inspect_mapping(file.mapping(), self.path, strict=True)
                hdr = rep.header
                assert hdr is not None  # a strict inspection raises where it would leave none
                trailer = rep.trailer
                magic0 = int.from_bytes(file.read(hdr.base_frame_offset, 4), "little")
            elif spec.has_trailer:
                magic0, trailer = _check_blob2(file, cast(Header2, hdr), self.path)  # a 0.2 header
            else:
                magic0 = _check_blob(file, hdr, self.path)
        except BaseException:
            file.close()  # not left to the traceback, which may outlive this call
            raise
        return file, hdr, magic0, trailer

    @property
    def remote(self) -> bool:
        """Whether the image is read from a remote URI (``store.remote.RemoteStore``)."""
        return self._uri is not None

    @property
    def uri(self) -> str:
        """What the image was opened from: the path, or the whole URI (``path`` drops a
        URI's query string and credentials, for messages)."""
        return self.path if self._uri is None else self._uri

    @property
    def storage_options(self) -> dict[str, Any] | None:
        """The ``storage_options`` a remote image was opened with (None: the environment's)."""
        return None if self._storage_options is None else dict(self._storage_options)

    def _init(self, hdr: Header, cache_bytes: int | None, verify: bool) -> None:
        self._header = hdr  # the one record of the file's header facts, shared with the FrameSource
        self._cache_arg = cache_bytes
        self._verify = bool(verify)

    # the header's facts, read from the record rather than copied
    @property
    def _grid(self) -> Grid:
        return self._header.grid

    @property
    def _enc(self) -> Encoding:
        return self._header.encoding

    @property
    def _dtype(self) -> np.dtype:
        return self._header.encoding.dtype

    @property
    def _isz(self) -> int:
        return self._header.encoding.itemsize

    @property
    def _shape(self) -> tuple[int, ...]:
        """(B, Y, X), or (T, B, Y, X) for a spec 0.2 file of several steps."""
        return self._header.shape

    # -- lifecycle ------------------------------------------------------------------
    def close(self) -> None:
        """Release the file mapping and this image's cached frames (idempotent)."""
        src = _SOURCES.pop(self, None)
        if src is None:
            return
        src.store = None  # closed now, or when a read in flight that holds it returns
        if self._finalizer is not None:
            self._finalizer()

    @property
    def closed(self) -> bool:
        return self not in _SOURCES

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __setstate__(self, state: tuple[Any, ...]) -> None:
        """Make this image, created by ``__new__``, a closed image of the given state: no file is opened.

        ``state`` is ``(path, blob, cache_bytes, verify, spec, trailer, storage_options)``, as ``__reduce__``
        gives them.
        """
        path, blob, cache_bytes, verify, spec, trailer, storage_options = state
        remote = is_remote(path)
        self._uri = path if remote else None
        self._storage_options = storage_options
        self.path = public_name(path) if remote else path
        self._init(parse_header(blob, spec=spec, path=path), cache_bytes, verify)
        pending = trailer is None and self._header.format_spec.has_trailer
        self._trailer = _PENDING if pending else trailer  # a closed image fetches nothing
        self._cache = self._finalizer = None
        self._token = 0

    def __reduce__(self) -> tuple[Callable[..., Image], tuple[Any, ...]]:
        trailer = None if self._trailer is _PENDING else self._trailer
        return (_reopen, (self.uri, self._header.blob, self._cache_arg, self._verify, self.closed,
                          self._header.spec, trailer, self._storage_options, _STATED_GEOREF.get(self)))

    def __repr__(self) -> str:
        shape = ", ".join(str(v) for v in self._shape)
        state = "closed " if self.closed else ""
        return (f"<{state}rumimm.Image {self.path!r} ({shape}) {self._enc.name} "
                f"tile {self._grid.tile_length}x{self._grid.tile_width} {self.frame_unit}>")

    # -- metadata -------------------------------------------------------------------
    @property
    def header(self) -> Header:
        """The checked header blob (``bytes(img.header)`` is the blob)."""
        return self._header

    @property
    def shape(self) -> tuple[int, ...]:
        """(B, Y, X): bands, rows, columns; (T, B, Y, X) for a spec 0.2 file of T > 1 time steps."""
        return self._shape

    @property
    def dtype(self) -> np.dtype:
        return self._dtype

    @property
    def ndim(self) -> int:
        return len(self._shape)

    @property
    def size(self) -> int:
        return int(np.prod(self._shape, dtype=object))

    @property
    def nbytes(self) -> int:
        """Bytes of the whole decoded image."""
        return self.size * self._isz

    @property
    def file_size(self) -> int:
        """Bytes of the file as opened (spec 0.2: the frames and the trailer); RumiError once closed."""
        return int(frame_source(self).live_store().size)

    @property
    def count(self) -> int:
        """Band count B (rasterio's name)."""
        return self._header.samples_per_pixel

    @property
    def height(self) -> int:
        return self._grid.image_length

    @property
    def width(self) -> int:
        return self._grid.image_width

    @property
    def tile(self) -> tuple[int, int]:
        """(tile_length, tile_width): nominal frame height and width."""
        return (self._grid.tile_length, self._grid.tile_width)

    @property
    def frame_unit(self) -> str:
        """``"tile"`` (one band per frame) or ``"cell"`` (all bands per frame); spec 0.2 files
        give the decoded frame's axes instead, as rumi-eo's ``frame_layout`` (``"t b h w"``)."""
        return self._header.frame_unit_name

    @property
    def spec(self) -> str:
        """The rumi specification the file follows: ``"0.1"`` or ``"0.2"``."""
        return self._header.format_spec.name

    @property
    def time_count(self) -> int:
        """Time steps T (1 for every spec 0.1 file)."""
        return self._header.time_count

    @property
    def descriptions(self) -> tuple:
        """Band descriptions (rasterio's name): a spec 0.2 file's band texts (its trailer), else each
        band's description from the PAM sidecar, or None."""
        tr = self._tail()
        if tr is None:
            return super().descriptions
        return tr.bands

    @property
    def time(self) -> list | None:
        """Spec 0.2 time coordinates, as rumi-eo gives them: ``datetime.date`` for whole days, else
        UTC ``datetime``; ``(start, end)`` tuples for intervals.  None for spec 0.1 files."""
        tr = self._tail()
        return None if tr is None else tr.time

    @property
    def time_kind(self) -> str | None:
        """``"instant"`` or ``"interval"`` (spec 0.2), else None."""
        tr = self._tail()
        return None if tr is None else tr.time_kind

    @property
    def trailer(self) -> Trailer | None:
        """The spec 0.2 trailer (``rumimm.format.trailer.Trailer``), None for spec 0.1.

        A remote spec 0.2 image fetches it on first use (one ranged request for the bytes
        after the frames) unless opening it (without a blob, from a small object) read it.
        """
        return self._tail()

    def _tail(self) -> Trailer | None:
        """The trailer, fetched now if it was left for later (a remote spec 0.2 image)."""
        tr = self._trailer
        if tr is _PENDING:
            assert isinstance(self._header, Header2)  # only a spec 0.2 image leaves its trailer pending
            tr = self._trailer = fetch_trailer(frame_source(self).live_store(), self._header)
        return tr

    @property
    def encoding(self) -> Encoding:
        """The sample encoding (``rumimm.format.dtypes.Encoding``)."""
        return self._enc

    @property
    def n_frames(self) -> int:
        return self._grid.n_frames

    def __len__(self) -> int:
        return self._shape[0]

    @cached_property
    def georef(self) -> Georef:
        """The file's georeferencing (``rumimm.format.georef.Georef``), read from the two tag values.

        They sit at fixed places right before the first frame (the matrix 160 bytes
        before it, the key directory 32 bytes before it), so no IFD is parsed.
        """
        matrix, keys = split_georef_block(georef_block(self))
        geo, bad = parse_geokeys(keys, matrix)
        if bad or geo is None:
            raise FormatError(f"{where(self.path)}{bad[0] if bad else 'unreadable georeferencing'}")
        return geo

    @cached_property
    def metadata(self) -> Metadata:
        """Band metadata from the file's PAM sidecar ``path + ".aux.xml"`` (``rumimm.format.pam.Metadata``).

        Read on first use (a remote file's sidecar object with one ranged GET).  No sidecar:
        empty metadata.  An unreadable one: empty metadata and a ``RumiWarning`` (see
        ``nodata``, ``descriptions``, ... for the fields).
        """
        from rumimm.reader.sidecar import read_metadata, read_remote_metadata

        store = frame_source(self).live_store()
        if self._uri is not None:
            return read_remote_metadata(self._uri, self._storage_options, self.count, bytes(self._header),
                                        self.dtype, store)
        return read_metadata(self.path, self.count, bytes(self._header), self.dtype, store)

    @property
    def transform(self) -> Affine | None:
        """The pixel-to-CRS transform as rasterio's ``affine.Affine``, or None without a CRS.

        ``Affine(a, b, c, d, e, f)``: x = a * col + b * row + c, y = d * col + e * row + f
        (``a`` the pixel width, ``e`` minus its height for a north-up image).  ``to_dict()``
        gives the six numbers as a list.

        It is the stored transform: a PixelIsPoint file's maps pixel indices to the pixels'
        points.  rasterio reads such a file's transform half a pixel up and left (the pixel
        corners), and ``bounds``, ``xy``, ``index`` and ``window_from_bounds`` use that one,
        so they give what rasterio's give.
        """
        t = self.georef.transform
        return None if t is None else Affine(*t)

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
        """(left, bottom, right, top) of the image's corners in CRS units, or None.

        The corners of the pixel areas, as rasterio's ``bounds``: a PixelIsPoint file's
        reach half a pixel beyond its outer pixels' points.  Always ``left < right`` and
        ``bottom < top``: rasterio sorts them only for a rotated transform, so for a
        south-up or east-left grid its ``bounds`` swaps two of them (rasterio issue 525).
        """
        t = self.georef.transform
        if t is None:
            return None
        a, b, c, d, e, f = area_coefficients(t, self.pixel_is_point)
        y, x = self._shape[-2:]
        xs = [c + a * px + b * py for px, py in ((0, 0), (x, 0), (0, y), (x, y))]
        ys = [f + d * px + e * py for px, py in ((0, 0), (x, 0), (0, y), (x, y))]
        return (min(xs), min(ys), max(xs), max(ys))

    @property
    def res(self) -> tuple[float, float] | None:
        """(x, y) pixel size in CRS units, or None."""
        t = self.georef.transform
        if t is None:
            return None
        a, b, _, d, e, _ = t
        return (float(np.hypot(a, d)), float(np.hypot(b, e)))

    def to_dict(self) -> dict:
        """JSON-safe summary: the blob's fields (``spec`` always; ``frame_unit`` as :attr:`frame_unit` gives it, a
        spec 0.2 file's stored number as ``frame_unit_number``) plus path, dtype name and georeferencing."""
        out = {key: self.frame_unit if key == "frame_unit" else value for key, value in self._header.to_dict().items()}
        if "frame_layout" in out:  # spec 0.2: the registry number the file stores (0 to 9)
            out["frame_unit_number"] = self._header.format_spec.layout_number(self._header)
        out.update(path=self.path, crs=self.crs, epsg=self.epsg,
                   transform=None if self.georef.transform is None else list(self.georef.transform),
                   pixel_is_point=self.pixel_is_point)
        tr = self._tail()
        if tr is not None:
            out.update(bands=list(tr.bands), time_kind=tr.time_kind,
                       time=[[v.isoformat() for v in t] if isinstance(t, tuple) else t.isoformat() for t in tr.time])
        return out

    # -- reading ----------------------------------------------------------------------
    def __getitem__(self, key: Any) -> NDArray[Any]:
        shape = self._header.shape
        sel = select(key, shape, _TIME_AXES if len(shape) == 4 else None)
        if len(sel.lists) == 2:  # (T, B, Y, X): the (step, band) pairs are virtual bands of the grid
            block = self._read_steps(sel.lists[0], sel.lists[1], sel.y, sel.x)
        else:
            block = read_block(self, sel.lists[0], sel.y, sel.x, None)
        return block if sel.remap is None else block[sel.remap]

    def __array__(self, dtype: DTypeLike | None = None, copy: bool | None = None) -> NDArray[Any]:
        a = self[...]
        return a if dtype is None else a.astype(dtype, copy=False)

    def read(self, indexes: int | Sequence[int] | None = None, window: Any = None, out: NDArray[Any] | None = None,
             *, copy: bool = True, bands: Any = UNSET) -> NDArray[Any]:
        """Read bands of a window, optionally into a caller's buffer, as rasterio's ``read``.

        Parameters
        ----------
        indexes : int or sequence of int, optional
            Band number(s) counted from 1, as rasterio: ``read(1)`` is the first band.
            An int gives a 2-D (h, w) result, a list (n, h, w).  Default: every band.
        window : optional
            ``((y0, y1), (x0, x1))``, ``(slice(y0, y1), slice(x0, x1))`` or a
            rasterio ``Window``.  Default: the whole image.  None and negative ends
            resolve as rasterio's ``Window.from_slices`` does (``(-64, None)``: the last 64
            rows); the window must then lie inside the image (no clipping).
        out : numpy.ndarray, optional
            Written in place and returned; must have the result's shape and this
            image's dtype.
        copy : bool, default True
            True: a new, writable array of the caller's own (as ``img[...]`` returns).
            False (without ``out``): a window inside one frame that the decoded-frame
            cache holds, or keeps now, comes back as a read-only view of that frame: no
            copy and no new array (``flags.writeable`` is False; the view keeps the
            whole frame in memory while it lives; ``np.array(view)`` owns the window).
            Any other window is a new array as with True.
        bands : int or sequence of int, optional
            Deprecated (two numberings in one call): band(s) counted from 0; use
            ``read(b + 1)`` or ``img[b]``.

        Returns
        -------
        numpy.ndarray
            (n, h, w), or (h, w) for an int band: ``out``, a new array, or (with
            ``copy=False``, a window inside one cached frame) a read-only view.

        Raises
        ------
        WindowError
            A band or window outside the image.
        TypeError
            Both ``indexes`` and the deprecated ``bands``.
        CodecError
            A frame is corrupt (the message names it and its grid position).
        """
        bands = indexes_to_bands(indexes, bands, self.count)
        if len(self._shape) == 4:
            sel = select_read(bands, window, self._shape[1:])
            key = (slice(None), sel.lists[0] if sel.remap is None else bands,
                   slice(sel.y.start, sel.y.start + sel.y.count), slice(sel.x.start, sel.x.start + sel.x.count))
            block = self[key]
            if out is None:
                return block
            if not isinstance(out, np.ndarray) or out.shape != block.shape or out.dtype != self.dtype:
                raise ValueError(f"out must be an array of shape {block.shape} and dtype {self.dtype}")
            out[...] = block
            return out
        sel = select_read(bands, window, cast("tuple[int, int, int]", self._shape))
        return _read_into(self, sel, out, view=not copy)


    def raw_frame(self, k: int) -> bytes:
        """Deprecated: ``rumimm.reader.image.raw_frame(img, k)`` (a tool's, not a dataset member)."""
        renamed("Image.raw_frame(k)", "rumimm.reader.image.raw_frame(img, k)")
        return raw_frame(self, k)

    def georef_block(self) -> bytes:
        """Deprecated: ``rumimm.reader.image.georef_block(img)`` (a tool's, not a dataset member)."""
        renamed("Image.georef_block()", "rumimm.reader.image.georef_block(img)")
        return georef_block(self)

    def _read_steps(self, steps: np.ndarray, bands: np.ndarray, y: Run, x: Run) -> np.ndarray:
        """The (len(steps), len(bands), y.count, x.count) block of a spec 0.2 file of several steps."""
        assert isinstance(self._grid, Grid2)  # only a spec 0.2 file has steps
        virtual = self._grid.virtual_bands(steps, bands).reshape(-1)
        block = read_block(self, virtual, y, x, None)
        return block.reshape(steps.shape[0], bands.shape[0], y.count, x.count)


def _check_blob2(file: LocalStore, hdr: Header2, path: StrPath) -> tuple[int, Trailer]:
    """A given 0.2 blob must describe this file: its 292 bytes of header and IFD, then its trailer.

    The trailer runs from the end of the frames the blob locates to the end of the file, so
    parsing it checks the file size too.  Returns frame 0's magic and the trailer.
    """
    size = file.size
    if size < hdr.frames_end:
        raise BlobError(f"{where(path)}file has {size} bytes but the header blob's frames end at byte "
                        f"{hdr.frames_end}; truncated, or the blob belongs to another file")
    magic0 = check_blob_prefix2(file.read, hdr, path)
    tail = bytes(file.read(hdr.frames_end, size - hdr.frames_end))
    try:
        trailer = parse_trailer(tail, hdr.samples_per_pixel, hdr.time_count, path=path)
    except FormatError as exc:
        raise BlobError(f"{exc}; or the header blob belongs to another file") from None
    return magic0, trailer


def _open_remote(uri: str, header: BlobArg | StrPath | None, want: Spec | None, storage_options: dict[str, Any] | None,
                 name: str | None = None) -> tuple[RemoteStore, Header, int | None, Trailer | None, Georef | None]:
    """(store, header, frame 0's magic or None, trailer, georeferencing or None) for a remote URI.

    With a blob nothing is requested: the store expects the object size the blob implies
    (spec 0.1: exactly; spec 0.2: at least the frames and the smallest trailer) and the
    first answer reports the real one, a mismatch failing that read; frame 0's magic is
    taken from the first frame read, and a spec 0.2 trailer is fetched when it is first
    asked for (``_PENDING``).  Without a blob the header and IFD cost one request (two for
    files of more than ~5,400 frames), which also holds the georeferencing and, for an
    object that small, the trailer.
    """
    name = public_name(uri) if name is None else name  # ``name``: the caller's public_name(uri)
    hdr = load_header(header, name, want)
    if isinstance(hdr, Header2):
        store = RemoteStore(uri, storage_options, min_size=hdr.frames_end + min_trailer_bytes(hdr.samples_per_pixel),
                            name=name)
        return store, hdr, None, _PENDING, None
    if hdr is not None:
        return RemoteStore(uri, storage_options, size=hdr.file_size, name=name), hdr, None, None, None
    store = RemoteStore(uri, storage_options, name=name)
    rep = inspect_store(store, strict=True)
    hdr = rep.header
    assert hdr is not None  # a strict inspection raises where it would leave none
    if want is not None and hdr.format_spec is not want:
        raise FormatError(f"{name}: the object is rumi spec {hdr.spec}, but spec={want.name!r} was given")
    trailer = rep.trailer if rep.trailer is not None or not hdr.format_spec.has_trailer else _PENDING
    return store, hdr, None, trailer, rep.georef


#: The first request for a remote spec 0.2 trailer of unknown length asks for this many bytes.
TRAILER_GUESS = 64 << 10


def fetch_trailer(store: RemoteStore, hdr: Header2) -> Trailer:
    """A remote spec 0.2 object's trailer: the bytes from its last frame's end to its end.

    One ranged request (exact when an earlier answer reported the object's size; else the
    first ``TRAILER_GUESS`` bytes, and a second request only for a trailer longer than
    that).  Never fetches more than a trailer of the file's bands and steps can hold.
    """
    end = hdr.frames_end
    most = max_trailer_bytes(hdr.samples_per_pixel, hdr.time_count)
    size = store.known_size
    if size is None:
        data = store.read(end, min(most, TRAILER_GUESS))  # fewer at the object's end; reports the size
        size = store.known_size
        if size is not None and end + len(data) < size <= end + most:
            data += store.read(end + len(data), size - end - len(data))
    elif size < end:
        raise BlobError(f"{store.name}: the object has {size} bytes but the header blob's frames end at byte {end}; "
                        "truncated, or the blob belongs to another file")
    else:
        data = store.read(end, size - end) if size - end <= most else b""
    if size is not None and size - end > most:
        raise BlobError(f"{store.name}: {size - end} bytes follow the frames the header blob locates, more than "
                        f"the {most} a trailer of {hdr.samples_per_pixel} bands and {hdr.time_count} steps can hold; "
                        "the blob belongs to another file")
    try:
        return parse_trailer(data, hdr.samples_per_pixel, hdr.time_count, path=store.name)
    except FormatError as exc:
        raise BlobError(f"{exc}; or the header blob belongs to another file") from None


def _check_blob(file: LocalStore, hdr: Header, path: StrPath) -> int:
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
    assert magic0 is not None  # None only for a file that ends before frame 0, refused by the size check
    return magic0


def _size_error(size: int, hdr: Header, path: StrPath) -> NoReturn:
    end = hdr.file_size
    kind = "truncated, or the blob belongs to another file" if size < end else "the blob belongs to another file"
    raise BlobError(f"{where(path)}file has {size} bytes but the header blob's frames end at byte {end}; {kind}")


def frame_source(img: Image) -> engine.FrameSource:
    """The frame source an open image is read through (``engine.FrameSource``); RumiError once it is closed."""
    src = _SOURCES.get(img)
    if src is None:
        raise RumiError(f"{where(img.path)}image is closed")
    return src


def read_block(img: Image, bands: np.ndarray, y: Run, x: Run, out: NDArray[Any] | None,
               view: bool = False) -> np.ndarray:
    """Decode the (len(bands), y.count, x.count) block of ``img`` into ``out`` or a new array.

    ``bands`` are the grid's bands: for a spec 0.2 file its virtual bands (``format.units``).
    ``view``: a window inside one cached frame may come back as a read-only view of it.
    """
    grid = img.header.grid
    if isinstance(grid, Grid2) and grid.interleaved:
        return layouts.read_interleaved(frame_source(img), bands, y, x, out)
    return engine.read_window(frame_source(img), bands, y, x, out, view=view)


def _read_into(img: Image, sel: Selection, out: NDArray[Any] | None, view: bool = False) -> NDArray[Any]:
    """Read a selection, applying its remap, into ``out`` when given (``view``: see ``read_block``)."""
    bands = sel.lists[0]
    shape = (bands.shape[0], sel.y.count, sel.x.count)
    if out is None:
        block = read_block(img, bands, sel.y, sel.x, None, view=view)
        return block if sel.remap is None else block[sel.remap]
    if not isinstance(out, np.ndarray):
        raise TypeError(f"out must be a numpy array, got {type(out).__name__}")
    want = shape if sel.remap is None else np.empty(shape, np.uint8)[sel.remap].shape
    if out.shape != want or out.dtype != img.dtype:
        raise ValueError(f"out must have shape {want} and dtype {img.dtype}, got {out.shape} and {out.dtype}")
    if not out.flags.writeable:
        raise ValueError("out must be writable")
    if sel.remap is None and out.flags.c_contiguous:
        read_block(img, bands, sel.y, sel.x, out)
    else:
        block = read_block(img, bands, sel.y, sel.x, None)
        out[...] = block if sel.remap is None else block[sel.remap]
    return out


def _reopen(path: str, blob: bytes, cache_bytes: int | None, verify: bool, closed: bool = False, spec: SpecName = "0.1",
            trailer: Trailer | None = None, storage_options: dict[str, Any] | None = None,
            georef: bytes | None = None) -> Image:
    if not closed:
        img = Image(path, blob, cache_bytes=cache_bytes, verify=verify, spec=spec, storage_options=storage_options)
    else:
        img = Image.__new__(Image)  # a closed image stays closed: no file is opened
        img.__setstate__((path, blob, cache_bytes, verify, spec, trailer, storage_options))
    if georef is not None:  # a stated georef block travels with the image (rumimm.stac.load)
        state_georef(img, georef)
    return img


def open(path: StrPath, header: BlobArg | StrPath | None = None, *, cache_bytes: int | None = None,
         verify: bool = True, spec: SpecName | None = None, storage_options: Mapping[str, Any] | None = None,
         format: Any = UNSET) -> Image:
    """Open a rumi file for reading: spec 0.1.0 or spec 0.2 (rumi-eo 0.18 and later).

    The two are told apart by the file's first bytes (a BigTIFF header or ``RUMI``).

    Parameters
    ----------
    path : str or os.PathLike
        The ``.rumi`` file, or a remote URI: ``s3://bucket/key``, ``gs://``, ``az://``
        or ``http(s)://`` (the ``remote`` extra, ``docs/remote.md``).
        With a blob a remote open sends no request; each read fetches the frames it
        needs with one ranged GET per run of nearby frames, all in flight together.
    header : bytes or Header, optional
        Its header blob, as returned by ``rumimm.write`` (or rumi-eo's ``write`` and
        ``info(source=...).header``).  With it the IFD is not walked (fast, e.g. for a
        data loader opening many files): the file size and the header and IFD
        bytes are checked against the blob (spec 0.2: and the trailer parsed).
        Without it the whole file profile is checked and the blob rebuilt.
    cache_bytes : int, optional
        Decoded-frame cache: None shares the process-wide cache (64 MiB by
        default, ``RUMIMM_CACHE_BYTES``), 0 disables it, n > 0 gives this image
        a private cache of n bytes.
    verify : bool
        Verify OpenZL checksums while decoding (default True).
    spec : {None, "0.1", "0.2"}
        The specification the file must follow; None accepts either.
    storage_options : dict, optional
        Remote URIs only: credentials, endpoint and client settings on top of what the
        client reads from the environment (``AWS_ENDPOINT_URL``, ``AWS_ACCESS_KEY_ID``,
        ...), and rumimm's ``coalesce``, ``max_concurrency``, ``timeout``,
        ``max_retries`` (``store.remote.RemoteStore``).

    Returns
    -------
    Image
        A lazy (B, Y, X) array, or (T, B, Y, X) for a spec 0.2 file of T > 1 time
        steps: ``img[:, y0:y1, x0:x1]`` decodes only the frames the window touches.
        Spec 0.2 band texts and time are ``img.descriptions`` and ``img.time``.
        A context manager; picklable (reopens in the child).

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
    spec = renamed_keyword("open", "format", "spec", format, spec)
    return Image(path, header, cache_bytes=cache_bytes, verify=verify, spec=spec, storage_options=storage_options)


def raw_frame(img: Image, k: int) -> bytes:
    """Frame ``k`` as stored in the file: its OpenZL bytes, not decoded (``rumimm info`` reads frame 0)."""
    fs = frame_source(img)
    if not 0 <= int(k) < fs.n_frames:
        raise IndexError(f"frame {k} is outside 0..{fs.n_frames - 1}")
    return bytes(fs.read_frame(int(k)))


_STATED_GEOREF: weakref.WeakKeyDictionary[Image, bytes] = weakref.WeakKeyDictionary()  # stated georef blocks


def state_georef(img: Image, block: bytes) -> None:
    """Give ``img`` the georeferencing block a catalog entry states (a STAC Item's projection fields),
    so a remote file's georeferencing costs no request; the file's own copy is then not read."""
    _STATED_GEOREF[img] = bytes(block)


def georef_block(img: Image) -> bytes:
    """The stored bytes of the two georeferencing tag values (matrix, key directory), right before frame 0."""
    stated = _STATED_GEOREF.get(img)  # given by a catalog entry (rumimm.stac.load): no request
    if stated is not None:
        return stated
    base = img.header.grid.base_frame_offset
    return bytes(frame_source(img).live_store().read(base - GEOREF_BYTES, GEOREF_BYTES))


def read_frames(img: Image, frames: Iterable[int]) -> list[np.ndarray]:
    """Decode whole frames of an image (frame indices) into new arrays of their shape.

    Returns one ndarray per frame, shaped (h, w) for tile frames and (B, h, w) for
    cell frames, in the image's dtype; a spec 0.2 cell frame in its layout's axes
    (``(T, B, h, w)`` for ``t b h w``, ``(h, w, B)`` for ``h w b``).  Mostly for tests and tools.
    """
    src = frame_source(img)
    ks = [int(k) for k in frames]
    for k in ks:
        if not 0 <= k < img.n_frames:
            raise WindowError(f"frame {k} is out of range for {img.n_frames} frames")
    out = engine.decode_frames(src, ks)
    grid = img.header.grid
    if isinstance(grid, Grid2):
        out = [layouts.frame_array(grid, k, f) for k, f in zip(ks, out, strict=True)]
    return out
