"""What ``rumimm info`` prints, computed: one JSON-safe summary of a rumi file.

The command line renders this dictionary (text or ``--json``); scripts can call
:func:`describe` directly.  The file is opened once: opening checks the whole file
profile, a given header blob is compared with the one the IFD walk rebuilt, and the codec
preset is recognised by re-encoding the first frame with each preset.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from rumimm.errors import BlobError, where

if TYPE_CHECKING:
    from rumimm._typing import StrPath
    from rumimm.format.blob import Header

__all__ = ["describe", "recognise_preset"]


def describe(path: StrPath, header: bytes | None = None) -> dict[str, Any]:
    """JSON-safe summary of a compliant file (raises FormatError/BlobError otherwise).

    ``spec`` is ``"0.1"`` or ``"0.2"`` and ``frame_unit`` a string, as ``Image.frame_unit``
    gives it: ``"tile"`` or ``"cell"``, or a spec 0.2 file's decoded frame axes (``"t b h w"``,
    also ``frame_layout``) with the registry number it stores as ``frame_unit_number``.

    The file is opened once, as one Image: opening it checks the whole file profile
    (the IFD walk of ``rumimm.build_blob``), ``header`` is then compared with the blob that
    walk rebuilt, and the codec is recognised from the Image's first frame.
    """
    from rumimm.codec import frame_format_version
    from rumimm.format.profile_checks import compare_header
    from rumimm.reader.image import open as open_image
    from rumimm.reader.image import raw_frame
    from rumimm.reader.validate import file_readers, sample_frames

    with open_image(path, cache_bytes=0) as img:
        h = img.header
        if header is not None:
            mismatch = compare_header(header, h.blob, img.path, spec=img.spec)
            if mismatch:
                raise BlobError(f"{where(img.path)}{mismatch[0]}")
        g = img.georef
        frame0 = raw_frame(img, 0)  # as stored: a preset must re-make these bytes
        sampled = sample_frames(h.n_frames)  # which readers decode it: the codecs of a few frames
        codecs, readers = file_readers([raw_frame(img, k) for k in sampled], img.spec,
                                       [h.grid.frame_samples(k) * h.encoding.itemsize for k in sampled],
                                       h.encoding.name)
        geo = g.epsg is not None
        # the same keys and types for both specs: "spec" always, "frame_unit" a string (Image.frame_unit)
        out: dict[str, Any] = {"path": img.path}  # a URI without its query string
        out.update(h.to_dict())
        out["frame_unit"] = img.frame_unit
        if "frame_layout" in out:  # spec 0.2: the registry number the file stores (0 to 9)
            out["frame_unit_number"] = h.format_spec.layout_number(h)
        if h.format_spec.has_trailer:  # band texts and time
            whole = img.to_dict()
            out.update(bands=whole["bands"], time_kind=whole["time_kind"], time=whole["time"])
        raw = h.time_count * h.samples_per_pixel * h.image_length * h.image_width * h.encoding.itemsize
        size = img.file_size  # spec 0.2: the frames and the trailer
        out.update(
            crs=g.crs,
            crs_name=_crs_name(g.epsg) if g.epsg is not None else None,
            bounds=list(cast("tuple[float, ...]", img.bounds)) if geo else None,
            res=list(cast("tuple[float, float]", img.res)) if geo else None,
            geographic=g.geographic,
            transform=None if g.transform is None else list(g.transform),
            pixel_is_point=g.pixel_is_point,
            codec=recognise_preset(frame0, h),
            readers=list(readers),
            codecs=sorted(codecs),
            sampled_frames=sampled,
            file_size=size,  # the IFD walk checked that the frames (0.2: and the trailer) end the file
            raw_size=raw,
            ratio=raw / size,
            blob_size=len(h.blob),
            format_version=frame_format_version(frame0),  # every frame's: the walk checked that they agree
            nodata=[_json_number(v) for v in img.nodatavals],  # from the PAM sidecar, NAME.rumi.aux.xml
            descriptions=list(img.descriptions),
        )
    return out


def _json_number(v: float | None) -> float | str | None:
    """A nodata value JSON can hold: NaN and infinities as the strings GDAL writes for them."""
    if isinstance(v, float) and (v != v or v in (float("inf"), float("-inf"))):
        return "nan" if v != v else ("inf" if v > 0 else "-inf")
    return v


def _crs_name(epsg: int) -> str:
    import pyproj  # only a georeferenced file pays the import

    return pyproj.CRS.from_epsg(epsg).name


def recognise_preset(frame: bytes, hdr: Header) -> str | None:
    """The codec preset whose encoding of ``frame``'s samples is ``frame``, byte for byte; else None.

    ``frame`` is frame 0 of the file ``hdr`` describes.  Frames do not name their codec;
    re-encoding one frame with each preset (at the frame's own format version) is how a
    preset is recognised.
    """
    import math

    from rumimm.codec import PRESETS, FrameDecoder, FrameEncoder, frame_format_version

    enc = hdr.encoding
    shape = hdr.grid.frame_shape(0)
    samples = FrameDecoder().decode(frame, enc, math.prod(shape), components=hdr.format_spec.components)
    samples = samples.view(enc.dtype).reshape(shape)
    version = frame_format_version(frame)
    for name, codec in PRESETS.items():
        if name == "auto" or not codec.supports(enc):  # "auto" is one of the others, chosen by dtype
            continue
        try:
            if FrameEncoder(name, enc, version).encode(samples) == frame:
                return name
        except (ImportError, ValueError):  # a geozl preset without geozl, a graph this frame cannot take
            continue
    return None
