"""Check a rumi file (and optionally its blob) against the spec; rebuild its blob.

The plumbing around the profile checks of ``format/profile_checks.py``: a local file is
opened once, measured and mapped through that one descriptor, a remote object read by
ranged requests (its first bytes, then its frames in spans); then what the frames hold is
checked, as far as asked, up to decoding every frame.  One walk serves two callers:
:func:`build_blob` stops at the first rule broken and raises :class:`FormatError`;
:func:`validate` keeps going and returns every violation it can find.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, TypeAlias, cast

import numpy as np

from rumimm._deprecation import renamed
from rumimm.errors import BlobError, FormatError, RumiError, where
from rumimm.format.blob import Header
from rumimm.format.georef import Georef
from rumimm.format.profile_checks import (
    Findings,
    Parsed,
    Stop,
    check_bigtiff_header,
    check_file,
    check_frame_magic,
    check_ifd,
    check_image,
    check_image_v2,
    check_rumi_header,
    compare_header,
)
from rumimm.format.spec import V01, V02, Spec, spec_of
from rumimm.format.tiff import PROFILE_V2
from rumimm.format.trailer import Trailer, max_trailer_bytes
from rumimm.format.v2 import Grid2
from rumimm.store import LocalStore, Store, is_remote, open_store

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

    from rumimm._typing import StrPath
    from rumimm.format.profile_checks import FileBytes, Tail

#: How far :func:`inspect_file` checks the frames: not at all, their magics, their OpenZL headers, or a decode.
FrameChecks: TypeAlias = Literal["none", "magic", "headers", "decode"]

__all__ = [
    "PREFIX_BYTES",
    "Report",
    "build_blob",
    "index_mapping",
    "inspect_file",
    "inspect_mapping",
    "inspect_store",
    "validate",
]


#: What a Report's ``checked`` may list.
CHECKED_PROFILE = V01.checked_profile
CHECKED_PROFILE_V2 = V02.checked_profile
CHECKED_MAGIC = "frame magics: every frame starts with OpenZL's magic, one format version"
CHECKED_HEADERS = "frame headers: one output of the sample type and the byte size of the frame's position"
CHECKED_DECODE = "frame payloads: every frame decoded, checksums verified, type, element width and size checked"
CHECKED_BLOB = "header blob: valid and equal to the file's canonical blob"


@dataclass
class Report:
    """What a check found: violations (empty when compliant) and what was parsed."""

    path: str
    violations: list[str] = field(default_factory=list)
    blob: bytes | None = None
    georef: Georef | None = None
    #: The OpenZL frame format version of the frames (not the file's ``spec``).
    frame_format_version: int | None = None
    header_violations: list[str] = field(default_factory=list)
    #: The specification the file follows, ``"0.1"`` or ``"0.2"`` (None when not even that is clear).
    spec: str | None = None
    #: Spec 0.2: the band texts and time coordinates.
    trailer: Trailer | None = None
    #: What was checked, in order (``CHECKED_*``); a check is listed once it ran over the whole file.
    checked: list[str] = field(default_factory=list)
    #: The readers (``rumimm.codec.READERS``) that decode the file: its spec and the codecs its
    #: sampled frames reference (None when the frames were not looked at).
    readers: tuple[str, ...] | None = None
    #: The geozl codecs the sampled frames reference (empty: OpenZL built-ins only).
    codecs: frozenset | None = None
    #: The frame indices sampled to find ``readers`` and ``codecs``.
    sampled_frames: tuple[int, ...] = ()

    @property
    def format_version(self) -> int | None:
        """Deprecated: ``frame_format_version`` (``spec`` is the file's format)."""
        renamed("Report.format_version", "Report.frame_format_version")
        return self.frame_format_version

    @property
    def ok(self) -> bool:
        return not self.violations and not self.header_violations

    #: The header record of ``blob``, made from the IFD walk (not parsed back from the blob).
    header: Header | None = field(default=None, repr=False)

    @property
    def format_spec(self) -> Spec | None:
        """The spec object of ``spec`` (None when not even that is clear)."""
        return None if self.header is None else self.header.format_spec

    def __str__(self) -> str:
        if self.ok:
            return f"{self.path}: compliant"
        return "\n".join(f"{self.path}: {v}" for v in self.violations + self.header_violations)


def inspect_file(path: StrPath, *, strict: bool, frames: FrameChecks = "magic", header: bytes | Header | None = None,
                 storage_options: Mapping[str, Any] | None = None) -> Report:
    """Walk ``path`` and check every rule; see :func:`validate` and :func:`build_blob`.

    The file is opened once and measured and mapped through that one descriptor.  A
    remote URI (``store.remote``) is read by ranged requests: the first bytes for the
    profile, then the frames in spans when ``frames`` asks for them.
    """
    if is_remote(path):
        rep = inspect_remote(open_store(path, storage_options), strict=strict, frames=frames)
        return _with_header(rep, header, strict)
    if storage_options:
        raise ValueError(f"storage_options apply to remote URIs only, got a local path {os.fspath(path)!r}")
    path = os.fspath(path)
    try:
        file = LocalStore(path)
    except FormatError as exc:  # an empty file
        if strict:
            raise
        rep = Report(path, violations=[str(exc).removeprefix(where(path))])
    except OSError as exc:
        raise RumiError(f"{where(path)}cannot read file: {exc.strerror or exc}") from exc
    else:
        try:
            rep = inspect_mapping(file.mapping(), path, strict=strict, frames=frames)
        finally:
            file.close()  # the map goes now, or with the last view a traceback still holds
    return _with_header(rep, header, strict)


def _with_header(rep: Report, header: bytes | Header | None, strict: bool) -> Report:
    if header is not None:
        rep.header_violations = compare_header(header, rep.blob, rep.path, spec=rep.spec)
        rep.checked.append(CHECKED_BLOB)
        if strict and rep.header_violations:
            raise BlobError(f"{where(rep.path)}{rep.header_violations[0]}")
    return rep


def inspect_mapping(buf: np.ndarray, path: StrPath, *, strict: bool, frames: FrameChecks = "magic") -> Report:
    """:func:`inspect_file` on a file already mapped (``buf``, uint8, the whole file)."""
    rep = Report(os.fspath(path))
    f = Findings(rep.path, strict)
    try:
        _check(buf, buf.shape[0], f, rep, frames)
    except Stop:
        pass
    rep.violations = f.items
    return rep


#: A remote object's first request asks for this many bytes: the BigTIFF header, the IFD and
#: the external values of a file of up to ~5,400 frames (more frames: one more request).
PREFIX_BYTES = 64 << 10


def inspect_store(store: Store, *, strict: bool, trailer: bool = False) -> Report:
    """The file profile of a store's object (``store.Store``) from its first bytes.

    One request for ``PREFIX_BYTES`` (a second one when the external values run past
    them); the object's size comes with that answer.  Frames are not read, so only the
    profile is listed in ``checked``.  Nothing is fetched past the object's size,
    whatever the IFD claims.  A spec 0.2 object's ``TAIL`` trailer (band texts and time,
    after the frames) comes with the first request when the object is that small;
    otherwise ``trailer=True`` fetches it with one more request, and without it
    ``report.trailer`` is left None for the caller to fetch when it is asked for
    (``Image`` does).
    """
    head = np.frombuffer(store.read(0, PREFIX_BYTES), np.uint8)
    size = store.size
    v2 = spec_of(bytes(head[:4]), fallback=V01) is V02
    rep = Report(store.name)
    f = Findings(rep.path, strict)
    buf = head
    if head.shape[0] < size:
        try:  # where do the external values end?  A broken IFD is reported by _check below
            peek = Findings(rep.path, False)
            if v2:
                check_rumi_header(head, size, peek)
                base = check_image_v2(check_ifd(head, size, peek, PROFILE_V2), peek).base_frame_offset
            else:
                check_bigtiff_header(head, size, peek)
                base = check_image(check_ifd(head, size, peek), peek).base_frame_offset
        except (Stop, FormatError):
            base = 0
        if head.shape[0] < base <= size:
            buf = np.concatenate([head, store.get_ranges([(head.shape[0], base - head.shape[0])])[0]])

    def tail(end: int, grid: Grid2) -> np.ndarray | None:
        """The trailer's bytes ``end..size``: from the first answer, fetched (``trailer``), or None (left for later)."""
        if size <= buf.shape[0]:
            return buf[end:size]
        if not trailer:
            return None
        most = max_trailer_bytes(grid.bands, grid.times)
        if size - end > most:
            f.add(f"trailer is {size - end} bytes (from byte {end} to the end), more than the {most} a trailer of "
                  f"{grid.bands} band texts and {grid.times} time steps can hold", stop=True)
        return store.get_ranges([(end, size - end)])[0]

    try:
        _check(buf, size, f, rep, "none", tail=tail if v2 else None)
    except Stop:
        pass
    rep.violations = f.items
    return rep


class _Spans:
    """A store's object read in spans of ``SPAN_BYTES`` as a frame check walks it in order.

    Stands in for the mapping in the frame checks (``buf[a:b]`` and ``buf[index_array]``):
    one request a span, at most one span held, so a remote object is checked without
    holding it whole.
    """

    SPAN_BYTES = 32 << 20

    def __init__(self, store: Store, size: int) -> None:
        self.store, self.size = store, size
        self.start, self.data = 0, np.empty(0, np.uint8)

    def _span(self, a: int, b: int) -> np.ndarray:
        """Bytes a..b (b - a <= SPAN_BYTES, or a whole frame) from the span held, fetching one if needed."""
        if not (self.start <= a and b <= self.start + self.data.shape[0]):
            end = min(self.size, max(b, a + self.SPAN_BYTES))
            self.start, self.data = a, self.store.get_ranges([(a, end - a)])[0]
        return self.data[a - self.start:b - self.start]

    def __getitem__(self, key: slice | ArrayLike) -> np.ndarray:
        if isinstance(key, slice):
            return self._span(key.start, key.stop)
        idx = np.asarray(key, np.int64)  # rising offsets (the frame magics)
        out = np.empty(idx.shape, np.uint8)
        flat, dst = idx.reshape(-1), out.reshape(-1)
        i = 0
        while i < flat.shape[0]:
            a = int(flat[i])
            j = int(np.searchsorted(flat, a + self.SPAN_BYTES, side="left"))
            j = max(j, i + 1)
            dst[i:j] = self._span(a, int(flat[j - 1]) + 1)[flat[i:j] - a]
            i = j
        return out


def inspect_remote(store: Store, *, strict: bool, frames: FrameChecks) -> Report:
    """:func:`inspect_store`, then the frame checks ``frames`` asks for, over the object in spans."""
    rep = inspect_store(store, strict=strict, trailer=True)
    if rep.violations or rep.blob is None:
        return rep
    f = Findings(rep.path, strict)
    try:
        _check_frames(_Spans(store, store.size), f, rep, frames)
    except Stop:
        pass
    rep.checked = list(dict.fromkeys(rep.checked))  # the profile is listed once
    rep.violations = f.items
    return rep


def index_mapping(buf: np.ndarray, path: StrPath) -> bytes:
    """:func:`build_blob` of a file already mapped: its canonical blob, or FormatError."""
    return _strict_blob(inspect_mapping(buf, path, strict=True))


def _check(buf: FileBytes, size: int, f: Findings, rep: Report, frames: FrameChecks, tail: Tail | None = None) -> None:
    """The file profile (``format.profile_checks.check_file``), then the frames as far as ``frames`` asks."""
    parsed = Parsed()
    try:
        check_file(buf, size, f, parsed, tail)
    finally:  # a check that stops keeps what those before it parsed
        rep.spec, rep.blob, rep.georef, rep.trailer = parsed.spec, parsed.blob, parsed.georef, parsed.trailer
        rep.header = cast(Header, parsed.header)
    _check_frames(buf, f, rep, frames)


def _check_frames(buf: FileBytes, f: Findings, rep: Report, frames: FrameChecks) -> None:
    """What each frame holds, as far as ``frames`` asks: magics, headers or whole payloads."""
    hdr = rep.header
    assert hdr is not None  # the walk made it
    offsets, counts, grid = hdr.frame_offsets[:-1], hdr.frame_byte_counts, hdr.grid
    rep.checked.append(hdr.format_spec.checked_profile)
    if frames in ("magic", "headers", "decode"):
        version = check_frame_magic(buf, offsets, counts, grid, f)
        if version is None:
            return
        rep.frame_format_version = version
        rep.checked.append(CHECKED_MAGIC)
    if frames == "headers":
        _check_frame_headers(buf, hdr, f)
        rep.checked.append(CHECKED_HEADERS)
    if frames == "decode":
        _check_frame_decode(buf, hdr, f)
        rep.checked.append(CHECKED_DECODE)
    if frames in ("headers", "decode") and not f.items:
        ks = sample_frames(hdr.n_frames)
        offs = hdr.frame_offsets
        spans = [(int(offs[k]), int(offs[k + 1]) - int(offs[k])) for k in ks]
        # a remote object: just these frames, in one call (a span each would be 32 MiB)
        sampled = buf.store.get_ranges(spans) if isinstance(buf, _Spans) else [buf[a:a + n] for a, n in spans]
        rep.codecs, rep.readers = file_readers(sampled,
                                               hdr.spec,
                                               [hdr.grid.frame_samples(k) * hdr.encoding.itemsize for k in ks],
                                               hdr.encoding.name)
        rep.sampled_frames = tuple(ks)


#: Frames sampled to find which readers decode a file (the first, middle and last).
READER_SAMPLE = 3


def sample_frames(n_frames: int) -> list[int]:
    """Up to :data:`READER_SAMPLE` distinct frame indices spread over ``n_frames`` (first, middle, last)."""
    return sorted({0, n_frames // 2, n_frames - 1}) if n_frames > 0 else []


def file_readers(frames: Iterable[bytes | memoryview | np.ndarray], spec: str,
                 frame_bytes: Iterable[int], encoding: str | None = None) -> tuple[frozenset[str], tuple[str, ...]]:
    """(geozl codecs referenced, readers that decode a file of ``spec``) from some of its frames.

    Each frame's codecs are found by trial decodes (``rumimm.codec.frame_codecs``, ~1-30 ms a
    frame), none declaring more than its ``frame_bytes`` entry; a reader is listed when it
    opens files of ``spec``, reads the ``encoding`` (its name) at all and decodes every frame given.
    """
    from rumimm.codec import READER_SPECS, READERS, frame_codecs
    from rumimm.codec.compat import reads_sample_type

    codecs: set[str] = set()
    ok = {r for r in READERS if spec in READER_SPECS[r] and (encoding is None or reads_sample_type(r, encoding))}
    for frame, nbytes in zip(frames, frame_bytes, strict=True):
        found = frame_codecs(frame, max_bytes=int(nbytes))
        codecs |= found.codecs
        ok &= set(found.readers)
    return frozenset(codecs), tuple(r for r in READERS if r in ok)


def _check_frame_headers(buf: FileBytes, hdr: Header, f: Findings) -> None:
    """Each frame's OpenZL header declares one output of the right type and byte size.

    Reads only the header (~5 us a frame): no payload is decoded, so checksums and
    the element width are left to ``decode=True``.
    """
    from rumimm.codec import check_frame_header

    offs, grid = hdr.frame_offsets, hdr.grid
    for k in range(hdr.n_frames):
        row, col, band = grid.frame_position(k)
        label = f"frame {k} (row {row}, col {col}, band {band})"
        try:
            check_frame_header(buf[int(offs[k]):int(offs[k + 1])], hdr.encoding, grid.frame_samples(k), label=label,
                               components=hdr.format_spec.components)
        except RumiError as exc:
            f.add(str(exc))


def _check_frame_decode(buf: FileBytes, hdr: Header, f: Findings) -> None:
    from rumimm.codec import FrameDecoder

    dec = FrameDecoder()
    offs = hdr.frame_offsets
    for k in range(hdr.n_frames):
        frame = np.asarray(buf[int(offs[k]) : int(offs[k + 1])])
        try:
            dec.decode(frame, hdr.encoding, hdr.grid.frame_samples(k), index=k, components=hdr.format_spec.components)
        except RumiError as exc:
            f.add(str(exc))


def validate(path: StrPath, header: bytes | Header | None = None, *, decode: bool = False,
             storage_options: Mapping[str, Any] | None = None) -> Report:
    """Check a file against every rule of the spec and report all violations.

    Parameters
    ----------
    path : str or os.PathLike
        The rumi file, or a remote URI (``s3://``, ``gs://``, ``az://``,
        ``http(s)://``): then the whole object is read, in spans of 32 MiB
        (``docs/remote.md``).
    header : bytes or Header, optional
        A blob to check too: it must be valid and equal the file's canonical blob.
    decode : bool
        Also decode every frame: checksums, element width, type and size (slow).
        By default each frame's OpenZL header is read (declared outputs, type
        and byte size), which is cheap.
    storage_options : dict, optional
        Remote URIs only: client settings (``store.remote.RemoteStore``).

    Returns
    -------
    Report
        ``report.ok`` is True when compliant; ``report.violations`` lists each rule
        broken, ``report.blob`` the canonical blob when the frame layout is sound,
        ``report.checked`` what was checked.
    """
    return inspect_file(path, strict=False, frames="decode" if decode else "headers", header=header,
                        storage_options=storage_options)


def build_blob(path: StrPath, *, storage_options: Mapping[str, Any] | None = None) -> bytes:
    """Parse a file's IFD, check the whole file profile and return its canonical blob.

    A remote URI costs one ranged request (two for files of more than ~5,400 frames);
    its frames are not read, so their magics are left to the first read or
    :func:`validate`, and so is a spec 0.2 object's trailer unless the object fits in
    that first request.  ``storage_options`` as for :func:`validate`.

    Raises
    ------
    FormatError
        At the first rule the file breaks, naming the file, the field and the rule.
    """
    if is_remote(path):
        return _strict_blob(inspect_store(open_store(path, storage_options), strict=True))
    return _strict_blob(inspect_file(path, strict=True, storage_options=storage_options))


def _strict_blob(rep: Report) -> bytes:
    assert rep.blob is not None  # a strict inspection raises FormatError where it would leave none
    return rep.blob


