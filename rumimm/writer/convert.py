"""Convert a rumi file between spec 0.1.0 and spec 0.2, or re-encode its frames with another codec.

A spec 0.1.0 file and a spec 0.2 file of one time step store the same frames in the
same order: tile frames (0.1 ``tile``, 0.2 unit 0) and planar cell frames (0.1
``cell``, 0.2 unit 1, ``b h w``).  Only the envelope differs: the BigTIFF header and
11-tag IFD against the ``RUMI`` header and 13-tag IFD, the 28-byte against the 32-byte
blob, and the 0.2 trailer of band texts and time.  :func:`convert` writes the new
envelope around the frame bytes it copies as they are (atomically, like every write).

A frame is decoded and encoded again only where its bytes cannot serve the other
reader: complex128 frames (0.1 stores them as 16-byte structs, rumi-eo 0.18+ reads
float64 components) and interleaved 0.2 cells (``h w b``), which spec 0.1 has no
layout for.  Sample types one spec lacks (0.1's sub-byte and complex-integer types,
0.2's fnuz floats) and 0.2 files of several time steps cannot be converted.

With ``codec=`` every frame is decoded and encoded again with that preset instead: the
source is read one row of tiles at a time and streamed through :class:`Writer` (so
frames compress in parallel, and the file is replaced atomically, as ``write`` does),
with the source's grid, frame unit, georeferencing tags (as stored), band texts, time
and PAM sidecar metadata.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from rumimm._deprecation import UNSET, renamed_keyword
from rumimm.errors import RumiError, where
from rumimm.format.georef import split_georef_block
from rumimm.format.grid import Grid
from rumimm.format.spec import V02, Spec, spec_named
from rumimm.format.trailer import build_trailer
from rumimm.format.v2 import Grid2
from rumimm.store import open_writer
from rumimm.store.uri import is_remote
from rumimm.writer.args import resolve_descriptions, resolve_path, resolve_spec, resolve_time

if TYPE_CHECKING:
    from _typeshed import SupportsWrite

    from rumimm._typing import ProgressArg, SpecName, StrPath, TimeArg
    from rumimm.codec.presets import CodecArg
    from rumimm.format.blob import Header
    from rumimm.reader.image import Image

__all__ = ["convert"]

_COPY_CHUNK = 8 << 20  # bytes of frames copied at a time


def convert(source: StrPath, dest: StrPath, *, spec: SpecName | None = None, codec: CodecArg = None,
            descriptions: Sequence[str] | None = None, time: TimeArg = None, header: bytes | None = None,
            threads: int | None = None, progress: ProgressArg = None, storage_options: Mapping[str, Any] | None = None,
            dest_storage_options: Mapping[str, Any] | None = None, overwrite: bool = True,
            format: object = UNSET, bands: object = UNSET) -> bytes:
    """Write ``source`` (a rumi file of either spec) as a rumi file of spec ``spec``; return its header blob.

    Without ``codec`` the frames are copied as they are (only the file's envelope
    changes); with ``codec`` every frame is decoded and encoded again with that preset,
    in either spec (``convert("a.rumi", "b.rumi", codec="fast")`` keeps the spec).

    Parameters
    ----------
    source, dest : str or os.PathLike
        The rumi file to read and the file to write (replaced atomically; may not be
        ``source``); either may be a remote URI (``docs/remote.md``): a bucket to a
        bucket streams the frames through this process, with no local copy of the source.
    spec : {None, "0.2", "0.1"}
        The specification of ``dest``.  Default: the source's with ``codec``, else "0.2".
    codec : str or rumimm.codec.Codec, optional
        Re-encode every frame with this preset (a name of ``rumimm.PRESETS``, ``"auto"``
        for the dtype's default).  The pixels, grid, frame unit, georeferencing, band
        texts, time and sidecar metadata (nodata, descriptions, ...) are kept.
    descriptions : sequence of str, optional
        Spec 0.2 band texts, one per band.  Default: the source's texts (a 0.2
        source), else ``"band 1"``, ``"band 2"``, ...
    time : sequence, optional
        Spec 0.2 time coordinates, one per step (as ``rumimm.write`` takes them).
        Default: the source's (a 0.2 source); required for a 0.1 source, which has no time.
    header : bytes, optional
        The source's header blob (skips the IFD walk of the source, as ``rumimm.open`` does).
    threads, progress
        With ``codec``: as for :func:`rumimm.write` (processes that compress; a progress
        bar or callback per row of tiles).
    storage_options : dict, optional
        A remote source's client settings (see :func:`rumimm.open`); a remote ``dest``'s too,
        unless ``dest_storage_options`` is given.
    dest_storage_options : dict, optional
        A remote ``dest``'s client settings (``part_size`` among them, docs/remote.md).
    overwrite : bool
        False: refuse to replace an existing ``dest`` (``FileExistsError``).
    format, bands
        Deprecated names of ``spec`` and ``descriptions``.

    Returns
    -------
    bytes
        The header blob of ``dest`` (what ``rumimm.build_blob(dest)`` returns).

    Raises
    ------
    RumiError
        A sample type or layout the target spec lacks, several time steps for spec
        0.1, or a bad ``descriptions``/``time``.
    ValueError
        ``codec`` names no preset, or one that does not take the file's sample type.

    Examples
    --------
    >>> rumimm.convert("scene.rumi", "scene_v02.rumi", time=["2026-06-01"])   # doctest: +SKIP
    >>> rumimm.convert("scene.rumi", "scene_fast.rumi", codec="delta")        # doctest: +SKIP
    """
    from rumimm.reader.image import Image, frame_source
    from rumimm.reader.inputs import not_the_source

    if codec is None and (threads is not None or progress is not None):
        raise ValueError("threads= and progress= apply to re-encoding; pass codec= too, or leave them unset")
    spec = renamed_keyword("convert", "format", "spec", format, spec)
    descriptions = renamed_keyword("convert", "bands", "descriptions", bands, descriptions)
    if spec is not None:
        resolve_spec(spec)  # a bad spec is refused before the source is opened
    remote = is_remote(source)
    src_path = source if remote else os.fspath(source)
    dest_remote = is_remote(dest)
    dest = cast(str, dest) if dest_remote else resolve_path(dest)
    out_options = (dest_storage_options if dest_storage_options is not None else storage_options) \
        if dest_remote else None
    not_the_source(src_path, dest)
    # storage_options are a remote source's (and a remote dest's unless dest_storage_options): a local
    # source takes none
    with Image(src_path, header, cache_bytes=0, storage_options=storage_options if remote else None) as img:
        src_path = img.path  # a URI without its query string: what messages name
        hdr = img.header
        src = hdr.format_spec
        # re-encoding keeps the spec; copying frames defaults to the newer one
        target = spec_named(resolve_spec(spec if spec is not None else src.name if codec is not None else V02.name))
        enc = hdr.encoding
        if (enc.sample_format, enc.bits_per_sample) not in target.encodings:
            raise RumiError(f"{where(src_path)}sample type {enc.name} has no encoding in rumi spec {target}; "
                            "it cannot be converted")
        matrix, keys = _georef_values(img)
        if codec is not None:
            return _reencode(img, dest, target, codec, (matrix, keys), descriptions, time, threads, progress,
                             out_options, overwrite)
        b, y, x = hdr.samples_per_pixel, hdr.image_length, hdr.image_width
        tw, tl = hdr.tile_width, hdr.tile_length
        grid: Grid  # a Grid2 for spec 0.2
        if target.has_time:
            texts = resolve_descriptions(descriptions if descriptions is not None else src.band_texts(img), b)
            if time is None and src.has_trailer:  # the source's own time coordinates
                assert img.trailer is not None  # a spec 0.2 image has one
                kind, seconds = img.trailer.kind, img.trailer.seconds
            else:
                kind, seconds = resolve_time(time, hdr.time_count)
            trailer = build_trailer(texts, kind, seconds)
            grid = Grid2.of(x, y, tw, tl, b, hdr.time_count, src.layout_number(hdr))
        else:
            if descriptions is not None or time is not None:
                raise ValueError("spec 0.1 stores no band texts or time; leave descriptions and time unset")
            if hdr.time_count > 1:
                raise RumiError(f"{where(src_path)}has {hdr.time_count} time steps; spec 0.1 holds one (B, Y, X) "
                                "image, so only files of one step convert to it")
            trailer = b""
            # 0.2 units 0/1/2 of one step: tile frames, or cells (b h w; h w b is made planar below)
            grid = Grid(x, y, tw, tl, b, src.planar_unit(hdr))
        recode = _recode_plan(hdr, target)
        file = frame_source(img).live_store()
        counts = np.array(hdr.frame_byte_counts, dtype=np.uint64)
        out = open_writer(dest, out_options, overwrite=overwrite)
        try:
            fh = out
            fh.seek(grid.base_frame_offset)
            if recode is None:  # the frames as they are, in chunks
                start, end = hdr.base_frame_offset, hdr.offset(hdr.n_frames)
                for at in range(start, end, _COPY_CHUNK):
                    fh.write(bytes(file.read(at, min(_COPY_CHUNK, end - at))))
            else:
                counts = recode(img, fh)
            fh.write(trailer)
            offsets = np.empty(grid.n_frames, np.uint64)
            offsets[0] = grid.base_frame_offset
            np.cumsum(counts[:-1], out=offsets[1:])
            offsets[1:] += np.uint64(grid.base_frame_offset)
            prefix = target.build_prefix(grid, enc, offsets, counts, matrix, keys)
            blob = target.build_header(grid, enc, counts)
            fh.seek(0)
            fh.write(prefix)
            out.commit()
        except BaseException:
            out.abort()
            raise
    return blob


def _georef_values(img: Image) -> tuple[tuple[float, ...], tuple[int, ...]]:
    """The 16 doubles and 16 shorts of the two georeferencing tags, as the source stores them."""
    from rumimm.reader.image import georef_block

    matrix, keys = split_georef_block(georef_block(img))
    return tuple(float(v) for v in matrix), tuple(int(v) for v in keys)


def _reencode(img: Image, dest: str, spec: Spec, codec: CodecArg, georef: tuple[tuple[float, ...], tuple[int, ...]],
              descriptions: Sequence[str] | None, time: TimeArg, threads: int | None, progress: ProgressArg,
              storage_options: Mapping[str, Any] | None = None, overwrite: bool = True) -> bytes:
    """Decode ``img`` one row of tiles at a time and write it to ``dest`` with ``codec`` (a Writer does the rest)."""
    from rumimm.writer.writer import Writer

    hdr = img.header
    steps = hdr.time_count
    shape = img.shape
    src = hdr.format_spec
    unit = spec.writer_unit(hdr)
    if spec.has_time:
        texts = descriptions if descriptions is not None else src.band_texts(img)
        when = time if time is not None else src.time_of(img)
        extra: dict[str, Any] = {"descriptions": texts, "time": when}
    else:
        if descriptions is not None or time is not None:
            raise ValueError("spec 0.1 stores no band texts or time; leave descriptions and time unset")
        if steps > 1:
            raise RumiError(f"{where(img.path)}has {steps} time steps; spec 0.1 holds one (B, Y, X) image, so only "
                            "files of one step convert to it")
        shape = shape[-3:]
        extra = {}
    meta = img.metadata
    with Writer(dest, shape, img.dtype, tile=img.tile, unit=unit, codec=codec, georef=georef, threads=threads,
                progress=progress, metadata=None if meta.is_empty() else meta, spec=spec.name,
                storage_options=storage_options, overwrite=overwrite, **extra) as w:
        for r in range(w.rows):
            y0, y1 = w.row_span(r)
            block = img[:, :, y0:y1, :] if len(img.shape) == 4 else img[:, y0:y1, :]
            if len(w.shape) == 3 and block.ndim == 4:
                block = block[0]
            w.write_row(r, block)
            del block
    assert w.header is not None
    return w.header


def _recode_plan(hdr: Header, spec: Spec) -> Callable[[Image, SupportsWrite[bytes]], np.ndarray] | None:
    """None when every frame keeps its bytes, else a function writing re-encoded frames (returns their sizes).

    Complex128 frames change representation between the specs (0.1 structs, 0.2 float64
    components), and interleaved 0.2 cells become planar 0.1 cells.
    """
    complex128 = hdr.encoding.itemsize == 16
    interleaved = hdr.interleaved and not spec.has_time  # spec 0.1 has no interleaved layout
    if not (complex128 and hdr.format_spec.components != spec.components) and not interleaved:
        return None

    def recode(img: Image, fh: SupportsWrite[bytes]) -> np.ndarray:
        from rumimm.codec import FrameEncoder
        from rumimm.reader.image import read_frames
        from rumimm.reader.layouts import frame_planes

        enc = hdr.encoding
        to_components = spec.component_frames(enc.itemsize)
        encoder = FrameEncoder(None, np.float64 if to_components else enc.dtype)
        counts = np.empty(hdr.n_frames, np.uint64)
        for k in range(hdr.n_frames):
            (frame,) = read_frames(img, [k])
            if interleaved:
                frame = frame_planes(cast(Grid2, img.header.grid), k, frame)  # a 0.2 cell
            frame = np.ascontiguousarray(frame)
            data = bytes(encoder.encode(frame.view(np.float64) if to_components else frame))
            fh.write(data)
            counts[k] = len(data)
        return counts

    return recode
