"""The two rumi spec versions behind one interface, chosen once per file or blob.

rumimm reads and writes spec 0.1.0 (a BigTIFF with one fixed IFD and a 28-byte header
blob; rumi-eo 0.16 is its reference) and spec 0.2.0-draft (a file starting with ``RUMI``,
13 tags, a 32-byte blob and a ``TAIL`` trailer; rumi-eo 0.18 and later).  Everything the
two differ in is an attribute or a method of a :class:`Spec`, so the rest of the package
asks the file's spec instead of comparing version strings.  :func:`spec_of` picks it from
a file's first bytes, :func:`spec_of_blob` from a header blob (its length and fields);
each spec is picked once, when a file or blob is first seen, and travels with its
header (``Header.format_spec``).

The header classes live in ``format.blob`` and ``format.v2``, which import this module
and register themselves (:func:`register_header_type`): a spec parses and builds its
blobs through its header class.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, cast

import numpy as np

from rumimm.errors import BlobError, FormatError, where
from rumimm.format.dtypes import SPEC_ENCODINGS, Encoding, encoding, spec_qualifier
from rumimm.format.grid import FrameUnit
from rumimm.format.tiff import PROFILE_V1, PROFILE_V2, Profile

if TYPE_CHECKING:
    from rumimm._typing import BlobArg, SpecName, StrPath, Unit
    from rumimm.format.grid import Grid

__all__ = ["SPECS", "V01", "V02", "HeaderRecord", "Spec", "Spec01", "Spec02", "parse_any", "register_header_type",
           "spec_named", "spec_of", "spec_of_blob"]

#: The 4 bytes a spec 0.1 file starts with (a little-endian BigTIFF header).
BIGTIFF_FIRST = b"II\x2b\x00"
#: The 4 bytes a spec 0.2 file starts with.
RUMI_FIRST = b"RUMI"


@dataclass(frozen=True, eq=False)
class Spec:
    """One rumi spec version: what a file and a blob of it look like, and how its frames are read.

    Compare specs by identity (``hdr.format_spec is V02``) or by ``name``; ``str(spec)``
    is the name (``"0.1"`` or ``"0.2"``), the public report (``Image.spec``).
    """

    #: ``"0.1"`` or ``"0.2"``.
    name: SpecName
    #: The 4 bytes its files start with.
    first_bytes: bytes
    #: How a message names those bytes.
    starts_with: str
    #: Fixed bytes at the start of its header blob (the packed frame sizes follow).
    blob_header_size: int
    #: The file header and the fixed tags of its one IFD.
    profile: Profile
    #: Whether a ``TAIL`` trailer (band texts, time) follows the frames.
    has_trailer: bool
    #: Whether files hold T time steps and name their frame layout (``format.units``).
    has_time: bool
    #: Whether its frames may hold a complex128 image as float64 components (rumi-eo reads them so).
    components: bool
    #: What ``validate`` lists in ``Report.checked`` for its file profile.
    checked_profile: str

    def __str__(self) -> str:
        return self.name

    def __repr__(self) -> str:
        return f"<rumimm spec {self.name}>"

    def __reduce__(self) -> tuple[Any, ...]:
        return (spec_named, (self.name,))  # one object per version, in every process

    # -- wording -----------------------------------------------------------------------
    @property
    def qualifier(self) -> str:
        """``" in spec 0.2"`` for messages about 0.2 rules, ``""`` for 0.1 (the default spec)."""
        return spec_qualifier(self.name)

    @property
    def other(self) -> Spec:
        """The other version (what converting a file's frames as they are produces)."""
        return V02 if self is V01 else V01

    @property
    def encodings(self) -> dict[tuple[int, int], Encoding]:
        """Its sample types, by (SampleFormat, BitsPerSample)."""
        return SPEC_ENCODINGS[self.name]

    def encoding(self, sample_format: int, bits_per_sample: int, *, path: StrPath | None = None) -> Encoding:
        """The sample type of a pair in this spec; FormatError naming the spec for any other pair."""
        return encoding(sample_format, bits_per_sample, path=path, spec=self.name)

    # -- what a source file of this spec gives a converted one ------------------------
    def band_texts(self, img: Any) -> list[str]:
        """A source image's band texts: its trailer's (0.2), else ``band 1``, ``band 2``, ..."""
        if self.has_trailer:
            return list(img.descriptions)
        return [f"band {i + 1}" for i in range(img.header.samples_per_pixel)]

    def time_of(self, img: Any) -> list | None:
        """A source image's time coordinates: its trailer's (0.2), else None (the caller must give them)."""
        return img.time if self.has_trailer else None

    # -- header blobs --------------------------------------------------------------------
    @property
    def header_type(self) -> type[HeaderRecord]:
        """Its header record class (``blob.Header`` or ``v2.Header2``, registered by their modules)."""
        return _HEADER_TYPES[self]

    def parse_header(self, blob: BlobArg, *, path: StrPath | None = None) -> HeaderRecord:
        """Check ``blob`` against every rule of this spec and return its header record."""
        return self.header_type.parse(blob, path=path)

    def build_header(self, grid: Grid, enc: Encoding, counts: np.ndarray) -> bytes:
        """The canonical blob of a grid (a ``Grid2`` for 0.2), a sample type and the frame byte counts."""
        return self.header_type.build_blob(grid, enc, counts)

    def header_of(self, grid: Grid, enc: Encoding, counts: np.ndarray) -> HeaderRecord:
        """The header record of a file whose IFD was walked: ``grid``, ``enc`` and checked ``counts``.

        Builds the canonical blob (a header keeps its bytes) but does not parse it back:
        the counts are those the walk checked, kept as the header's offsets.
        """
        counts = np.ascontiguousarray(counts, dtype=np.uint64).reshape(-1)
        return self.header_type.from_layout(self.build_header(grid, enc, counts), grid, enc, counts)

    def build_prefix(self, grid: Grid, enc: Encoding, offsets: np.ndarray, counts: np.ndarray,
                     matrix: tuple[float, ...], keys: tuple[int, ...]) -> bytes:
        """Every byte before frame 0: file header, IFD and its external values."""
        return self.header_type.build_file_prefix(grid, enc, offsets, counts, matrix, keys)

    # -- frames ----------------------------------------------------------------------------
    def component_frames(self, itemsize: int) -> bool:
        """Whether frames of samples ``itemsize`` bytes wide may hold float64 components (complex128 in 0.2)."""
        return self.components and itemsize == 16

    def planar_unit(self, hdr: HeaderRecord) -> FrameUnit:
        """The 0.1 frame unit of the frames of ``hdr`` (a header of this spec)."""
        raise NotImplementedError

    def layout_number(self, hdr: HeaderRecord) -> int:
        """The frames of ``hdr`` (a header of this spec) as a 0.2 ``frame_unit`` number."""
        raise NotImplementedError

    def writer_unit(self, hdr: HeaderRecord) -> Unit | int:
        """The ``unit=`` a Writer of this spec takes to re-encode the file of ``hdr`` (either spec)."""
        return "tile" if hdr.format_spec.planar_unit(hdr) == FrameUnit.TILE else "cell"


@dataclass(frozen=True, eq=False, repr=False)
class Spec01(Spec):
    """Spec 0.1.0: tile or cell frames of one (B, Y, X) image."""

    def planar_unit(self, hdr: HeaderRecord) -> FrameUnit:
        return hdr.frame_unit

    def layout_number(self, hdr: HeaderRecord) -> int:
        """Tile frames are 0.2 unit 0, cells of several bands unit 1 (``b h w``)."""
        return 1 if hdr.frame_unit == FrameUnit.CELL and hdr.samples_per_pixel > 1 else 0


@dataclass(frozen=True, eq=False, repr=False)
class Spec02(Spec):
    """Spec 0.2.0-draft: (T, B, Y, X) images whose frames follow one of ten layouts (``format.units``)."""

    def planar_unit(self, hdr: HeaderRecord) -> FrameUnit:
        """Unit 0 is tile frames; units 1 and 2 (one step) are cells."""
        return FrameUnit.TILE if self.layout_number(hdr) == 0 else FrameUnit.CELL

    def layout_number(self, hdr: HeaderRecord) -> int:
        return int(cast("LayeredHeader", hdr).layout)

    def writer_unit(self, hdr: HeaderRecord) -> Unit | int:
        """A 0.2 source keeps its unit; an interleaved one (read, never written) becomes the planar cell."""
        if hdr.format_spec is not self:
            return super().writer_unit(hdr)
        return "cell" if hdr.interleaved else self.layout_number(hdr)


class HeaderRecord(Protocol):
    """What a spec asks of its header record (``blob.Header``, ``v2.Header2``; they register here)."""

    @property
    def blob(self) -> bytes: ...

    @property
    def samples_per_pixel(self) -> int: ...

    @property
    def frame_unit(self) -> FrameUnit: ...

    @property
    def format_spec(self) -> Spec: ...

    @property
    def spec(self) -> str: ...

    @property
    def interleaved(self) -> bool: ...

    @classmethod
    def parse(cls, blob: BlobArg, *, path: StrPath | None = None) -> HeaderRecord: ...

    @classmethod
    def from_layout(cls, blob: bytes, grid: Grid, enc: Encoding, counts: np.ndarray) -> HeaderRecord: ...

    @staticmethod
    def blob_bytes(blob: BlobArg) -> bytes: ...

    @staticmethod
    def build_blob(grid: Grid, enc: Encoding, counts: np.ndarray) -> bytes: ...

    @staticmethod
    def build_file_prefix(grid: Grid, enc: Encoding, offsets: np.ndarray, counts: np.ndarray,
                          matrix: tuple[float, ...], keys: tuple[int, ...]) -> bytes: ...


class LayeredHeader(HeaderRecord, Protocol):
    """A spec 0.2 header record: its ``frame_unit`` field is ``layout`` (0 to 9)."""

    @property
    def layout(self) -> int: ...


V01 = Spec01(
    name="0.1",
    first_bytes=BIGTIFF_FIRST,
    starts_with="a BigTIFF header",
    blob_header_size=28,
    profile=PROFILE_V1,
    has_trailer=False,
    has_time=False,
    components=False,
    checked_profile="file profile: BigTIFF header, the one IFD, tag types, counts and values, frame layout",
)
V02 = Spec02(
    name="0.2",
    first_bytes=RUMI_FIRST,
    starts_with="RUMI",
    blob_header_size=32,
    profile=PROFILE_V2,
    has_trailer=True,
    has_time=True,
    components=True,
    checked_profile=("file profile (spec 0.2): RUMI header, the 13-tag IFD, tag types, counts and values, frame "
                     "layout, trailer (band texts, time)"),
)
#: Every spec by name, oldest first.
SPECS: dict[str, Spec] = {V01.name: V01, V02.name: V02}
#: The header record class of each spec: ``format.blob`` and ``format.v2`` register theirs on import.
_HEADER_TYPES: dict[Spec, type[HeaderRecord]] = {}


def register_header_type(spec: Spec, header_type: type[HeaderRecord]) -> None:
    """Make ``header_type`` the header record of ``spec`` (the header modules sit above this one)."""
    _HEADER_TYPES[spec] = header_type


def spec_named(name: Any, *, what: str = "spec") -> Spec:
    """The spec called ``name`` (``"0.1"`` or ``"0.2"``; a Spec is returned as is); ValueError otherwise.

    ``what`` is the argument's name in the message (``format`` for the public API).
    """
    if isinstance(name, Spec):
        return name
    try:
        return SPECS[name]
    except (KeyError, TypeError):
        raise ValueError(f"{what} must be '0.1' or '0.2', got {name!r}") from None


def spec_of(first_bytes: bytes, *, path: StrPath | None = None, fallback: Spec | None = None) -> Spec:
    """The spec of a file from its first 4 bytes: ``RUMI`` is 0.2, a little-endian BigTIFF header 0.1.

    Anything else is a FormatError naming what was found, unless ``fallback`` is given:
    then that spec is returned, for a checker whose own rules say what is wrong (a
    big-endian or classic TIFF is then reported as such, not only as "not rumi").
    """
    head = bytes(first_bytes[:4])
    for spec in (V02, V01):
        if head == spec.first_bytes:
            return spec
    if fallback is not None:
        return fallback
    raise FormatError(f"{where(path)}file starts with {head.hex(' ') or 'nothing'}; a rumi file starts with "
                      f"{V01.starts_with} (49 49 2b 00, spec 0.1) or RUMI (52 55 4d 49, spec 0.2)")


def spec_of_blob(blob: BlobArg, *, path: StrPath | None = None) -> Spec:
    """The spec of a header blob: the one whose rules it meets (its length and fields decide).

    A 0.1 blob is 28 bytes plus its packed frame sizes, a 0.2 blob 32 plus its own; in
    practice one layout alone gives a consistent length (a 0.1 blob read as 0.2 takes its
    tile size as the time count, a 0.2 blob read as 0.1 a zero tile length).  BlobError
    when the blob meets the rules of neither (each one's first broken rule is named) or,
    in theory, of both.
    """
    return _detect(blob, path).format_spec


def _detect(blob: BlobArg, path: StrPath | None) -> HeaderRecord:
    """The header of a blob of either spec (``spec_of_blob``), each spec's rules checked once."""
    if isinstance(blob, V01.header_type):  # a header record: its spec is known
        return blob
    data = V01.header_type.blob_bytes(blob)
    found: dict[Spec, HeaderRecord] = {}
    broken: dict[Spec, str] = {}
    for spec in (V01, V02):
        try:
            found[spec] = spec.parse_header(data)
        except BlobError as exc:
            broken[spec] = str(exc).removeprefix(f"header blob (spec {spec.name}): ").removeprefix("header blob: ")
    if len(found) == 2:
        raise BlobError(f"{where(path)}header blob is valid as both spec 0.1 (28-byte header) and spec 0.2 "
                        "(32-byte header); pass spec='0.1' or spec='0.2'")
    if found:
        return next(iter(found.values()))
    raise BlobError(f"{where(path)}header blob is neither spec 0.1 ({broken[V01]}) nor spec 0.2 ({broken[V02]})")


def parse_any(blob: BlobArg, *, spec: Spec | str | None = None, path: StrPath | None = None) -> HeaderRecord:
    """``blob`` parsed as ``spec`` (a Spec or its name), or as whichever spec it meets when None."""
    if spec is None:
        return _detect(blob, path)
    want = spec_named(spec)
    if isinstance(blob, V01.header_type) and blob.format_spec is not want:
        raise BlobError(f"{where(path)}header blob is spec {blob.spec}, but spec {want.name} was asked for")
    return want.parse_header(blob, path=path)
