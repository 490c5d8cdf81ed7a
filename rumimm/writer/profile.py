"""Profile frame recipes on the user's own data: a rumi file, a ``.npy`` file, a GeoTIFF or an array.

:func:`profile_codecs` cuts a few frames out of the source at seeded grid positions (frames
of a rumi file are decoded; an array is cut into tiles of ``tile``) and hands them to
:func:`rumimm.codec.profile.measure`, which times every preset and geozl recipe on
them.  A small sample (8 frames by default), a time budget and a fixed seed keep it
bounded and repeatable: the same source and arguments pick the same frames, in the
same order.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Protocol, cast

import numpy as np

from rumimm.codec.profile import DEFAULT_TOLERANCE, Profile, measure
from rumimm.errors import where
from rumimm.writer.args import resolve_tile

__all__ = ["profile_codecs", "sample_frames"]

if TYPE_CHECKING:
    from numpy.typing import ArrayLike, NDArray

    from rumimm._typing import StrPath, Tile, Unit


class FrameSource(Protocol):
    """What :func:`sample_frames` slices: an ndarray, a memmap, a :class:`rumimm.Image`, a GeoTIFF's bands."""

    @property
    def shape(self) -> tuple[int, ...]: ...

    def __getitem__(self, key: Any) -> Any: ...


class _GeoTIFFBands:
    """A GDAL raster as the (B, Y, X) array :func:`sample_frames` slices: each slice one windowed read."""

    def __init__(self, path: str) -> None:
        try:
            import rasterio
        except ImportError as exc:
            raise ImportError(f"{path}: profiling a GeoTIFF needs rasterio; install rumimm[geotiff], or pass a rumi "
                              "file, a .npy file or an array") from exc
        self.ds = rasterio.open(path)
        self.shape = (self.ds.count, self.ds.height, self.ds.width)
        self.dtype = np.dtype(self.ds.dtypes[0])

    def __getitem__(self, key: tuple[int | slice, slice, slice]) -> NDArray[Any]:
        from rasterio.windows import Window

        band, rows, cols = key
        window = Window(cols.start, rows.start, cols.stop - cols.start, rows.stop - rows.start)
        if isinstance(band, slice):
            return self.ds.read(window=window)
        return self.ds.read(int(band) + 1, window=window)

    def close(self) -> None:
        self.ds.close()


def _is_rumi(path: str) -> bool:
    """Whether ``path`` holds a rumi file (either spec), not some other TIFF (a GeoTIFF for GDAL)."""
    with open(path, "rb") as fh:
        head = fh.read(4)
    if head != b"II+\x00":  # BigTIFF: a rumi 0.1.0 file, or a GeoTIFF
        return head == b"RUMI" or head[:2] not in (b"II", b"MM")
    from rumimm.errors import FormatError
    from rumimm.reader.validate import build_blob

    try:
        build_blob(path)
    except FormatError:
        return False
    return True


def _open_source(source: StrPath | ArrayLike | FrameSource, storage_options: Mapping[str, Any] | None = None,
                 ) -> tuple[FrameSource, str, Tile | None, Unit | None, Callable[[], None] | None]:
    """(array-like, label, tile default, unit default, closer) for a path or an array."""
    if isinstance(source, (str, os.PathLike)):
        path = os.fspath(source)
        remote = "://" in path
        if path.lower().endswith(".npy") and not remote:
            return np.load(path, mmap_mode="r", allow_pickle=False), path, None, None, None
        if not remote and not _is_rumi(path):
            tiff = _GeoTIFFBands(path)
            return tiff, path, None, None, tiff.close
        from rumimm.reader.image import open as open_rumi

        img = open_rumi(path, cache_bytes=0, storage_options=storage_options)
        label = img.path if remote else path  # a URI as the reader words it (no query string)
        # spec 0.2: unit 0 ("h w") is one band per frame; every other unit holds the bands of a position
        unit: Unit = "tile" if img.frame_unit in ("tile", "h w") else "cell"
        return img, label, img.tile, unit, img.close
    if all(hasattr(source, a) for a in ("shape", "dtype", "__getitem__")):
        return cast(FrameSource, source), "array", None, None, None
    return np.asarray(source), "array", None, None, None


def sample_frames(array: FrameSource, tile: Tile = 512, unit: Unit = "tile", samples: int = 8, seed: int = 0,
                  ) -> tuple[list[NDArray[Any]], list[tuple[int, int | None, int, int]]]:
    """Cut up to ``samples`` frames out of ``array`` at seeded grid positions.

    Parameters
    ----------
    array : array-like, shape (Y, X), (B, Y, X) or (T, B, Y, X)
        Anything with ``shape``, ``dtype`` and numpy slicing (an ndarray, a memmap, a
        :class:`rumimm.Image`).
    tile : int or (int, int)
        Frame height and width.
    unit : {"tile", "cell"}
        ``"tile"``: (h, w) frames of one band; ``"cell"``: (B, h, w) frames of every band.
    samples : int
        Frames to take at most.
    seed : int
        Seed of ``numpy.random.default_rng`` that picks the positions.

    Returns
    -------
    frames : list of numpy.ndarray
    where : list of tuple
        ``(t, b, y, x)`` of each frame's first sample (``b`` is None for a cell).

    Notes
    -----
    Positions whose frame is whole (not clipped by the image's right or bottom edge)
    are preferred; an image smaller than one tile gives its clipped frames.  The
    positions are sorted, so frames come in file order.
    """
    if unit not in ("tile", "cell"):
        raise ValueError(f"unit must be 'tile' or 'cell', got {unit!r}")
    if isinstance(samples, bool) or int(samples) != samples or samples < 1:
        raise ValueError(f"samples must be an int >= 1, got {samples!r}")
    shape = tuple(int(n) for n in array.shape)
    if len(shape) not in (2, 3, 4) or 0 in shape:
        raise ValueError(f"expected an array of shape (Y, X), (B, Y, X) or (T, B, Y, X) with samples, got {shape}")
    t_n, b_n = (shape[0], shape[1]) if len(shape) == 4 else (1, shape[0] if len(shape) == 3 else 1)
    y_n, x_n = shape[-2:]
    tl, tw = resolve_tile(tile)
    down, across = -(-y_n // tl), -(-x_n // tw)
    full_down, full_across = y_n // tl, x_n // tw
    if full_down and full_across:
        down, across = full_down, full_across
    bands = b_n if unit == "tile" else 1
    n = t_n * bands * down * across
    rng = np.random.default_rng(seed)
    picked = np.sort(rng.choice(n, size=min(int(samples), n), replace=False))
    frames, places = [], []
    for k in picked.tolist():
        t, b, ty, tx = np.unravel_index(k, (t_n, bands, down, across))
        y0, x0 = int(ty) * tl, int(tx) * tw
        rows, cols = slice(y0, min(y0 + tl, y_n)), slice(x0, min(x0 + tw, x_n))
        if len(shape) == 2:
            frame = array[rows, cols]
        elif len(shape) == 3:
            frame = array[int(b), rows, cols] if unit == "tile" else array[:, rows, cols]
        else:
            frame = array[int(t), int(b), rows, cols] if unit == "tile" else array[int(t), :, rows, cols]
        frames.append(np.ascontiguousarray(np.asarray(frame)))
        places.append((int(t), int(b) if unit == "tile" else None, y0, x0))
    return frames, places


def profile_codecs(source: StrPath | ArrayLike | FrameSource, *, tile: Tile | None = None, unit: Unit | None = None,
                   samples: int = 8, seed: int = 0, presets: Iterable[str] | None = None, geozl: bool = True,
                   reps: int = 3, budget: float | None = 60.0, tolerance: float = DEFAULT_TOLERANCE,
                   require: Iterable[str] = (), verify: bool = True, storage_options: Mapping[str, Any] | None = None,
                   ) -> Profile:
    """Measure every frame recipe on sample frames of ``source`` and recommend one for training reads.

    Parameters
    ----------
    source : str, os.PathLike or array-like
        A rumi file (its frames are decoded; a remote URI as ``rumimm.open`` takes it), a
        ``.npy`` file (memory-mapped), a GeoTIFF (windows read with rasterio), or an
        array of shape (Y, X), (B, Y, X) or (T, B, Y, X).
    tile : int or (int, int), optional
        Frame size; default: the rumi file's tile, else 512.
    unit : {"tile", "cell"}, optional
        Default: the rumi file's frame unit, else ``"tile"``.
    samples : int
        Frames measured, at most (default 8), at positions ``seed`` picks.
    seed : int
        Seed of the positions (``numpy.random.default_rng``).
    presets : iterable of str, optional
        Presets to measure; default: every preset of ``rumimm.PRESETS`` that takes the dtype.
    geozl : bool
        Also measure the candidate recipes geozl's profiler lists.
    reps : int
        Decodes per frame; each frame's fastest counts.
    budget : float or None
        Seconds of measuring, after which the sample frames not yet started are left out
        (``frames_skipped``; the first is always measured); None: no limit.
    tolerance : float
        The recommendation is the fastest decoder within ``tolerance`` x the smallest size.
    require : iterable of str
        Readers the recommendation must suit, e.g. ``("rumi-eo 0.16.0",)``.
    verify : bool
        Decode with checksum checks, as ``rumimm.open`` reads by default.
    storage_options : dict, optional
        For a remote rumi file, as ``rumimm.open`` takes them.

    Returns
    -------
    rumimm.codec.profile.Profile
        Rows of :class:`~rumimm.codec.profile.Candidate` (``name``, ``kind``, ``size``,
        ``encode_mibs``, ``decode_mibs``, ``readers``), ``recommended`` (a preset),
        ``best`` (any row), ``rule``; ``print(p)`` shows the table.

    Raises
    ------
    RumiError
        ``source`` is not a readable rumi file.
    ValueError
        A bad argument (``samples``, ``tile``, ``unit``, a preset name).

    Examples
    --------
    >>> p = rumimm.profile_codecs("scene.rumi")               # doctest: +SKIP
    >>> p.recommended.name, p.rule                            # doctest: +SKIP
    >>> rumimm.convert("scene.rumi", "fast.rumi", codec=p.recommended.name)   # doctest: +SKIP
    """
    array, label, file_tile, file_unit, close = _open_source(source, storage_options)
    spec = getattr(array, "spec", None)  # a rumi file's: its default preset and the readers that open it
    try:
        frames, places = sample_frames(array, tile if tile is not None else (file_tile or 512),
                                       unit if unit is not None else (file_unit or "tile"), samples, seed)
    except ValueError as exc:
        if close is None:
            raise
        raise ValueError(f"{where(label)}{exc}") from None
    finally:
        if close is not None:
            close()
    t0 = time.perf_counter()
    result = measure(frames, presets=presets, geozl=geozl, reps=reps, budget=budget, tolerance=tolerance,
                     require=require, verify=verify, spec=spec)
    result.seconds = time.perf_counter() - t0
    result.frames = places[:len(places) - result.frames_skipped]
    result.source = label
    return result
