"""Compatibility facts: which reader decodes which frames, and at which OpenZL frame format.

Measured, not assumed: the tests decode frames in each reader's own environment
(``tests/test_codec_readers.py``) to hold these tables true.  The presets
(``presets.py``) and the frame inspection (``readers.py``) both read them.
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = [
    "C_ONLY",
    "EVERY_READER",
    "READERS",
    "READER_RUMIMM",
    "READER_RUMI_016",
    "READER_RUMI_026",
    "READER_SPECS",
    "RECIPE_PREFIX",
    "REFERENCE_CODECS",
    "REFERENCE_MAX_FORMAT_VERSION",
    "UNREAD_SAMPLE_TYPES",
    "readers_of",
    "reads_sample_type",
    "recipe_codecs",
]

#: The readers a codec's frames are checked against (tests decode them in each one's own venv).
READER_RUMIMM = "rumimm"
READER_RUMI_016 = "rumi-eo 0.16.0"
READER_RUMI_026 = "rumi-eo 0.26.1"
READERS: tuple[str, ...] = (READER_RUMIMM, READER_RUMI_016, READER_RUMI_026)
EVERY_READER = frozenset(READERS)
#: The file specifications each reader opens (measured: each reference refuses the other's
#: files with "invalid sample format").
READER_SPECS: dict[str, tuple[str, ...]] = {
    READER_RUMIMM: ("0.1", "0.2"),
    READER_RUMI_016: ("0.1",),
    READER_RUMI_026: ("0.2",),
}

#: The newest OpenZL frame format both reference readers decode.
REFERENCE_MAX_FORMAT_VERSION = 24
#: Stands for the codecs only geozl 0.19's C library decodes (``pivco``); frames using
#: them are written at frame format 27.
C_ONLY = "geozl 0.19 C codecs (pivco)"
#: The geozl codecs each reference decodes besides OpenZL's built-ins, as measured by
#: decoding frames in each one's own environment (tests/test_codec_readers.py):
#: rumi-eo 0.16.0's own library carries some geozl codecs, rumi-eo 0.26.1 registers
#: geozl 0.18's.  Codecs not measured (deinterleave, nodata, planar, med) are left out.
REFERENCE_CODECS: dict[str, frozenset] = {
    READER_RUMI_016: frozenset({"delta_w", "delta_n", "average", "wp_static", "pfor"}),
    READER_RUMI_026: frozenset({"delta_w", "delta_n", "average", "wp_static", "pfor", "planar_zigzag",
                                "planar_zigzag_pfor", "med_zigzag"}),
}


#: Sample types (encoding names) a reader decodes with no codec (measured, docs/interop.md):
#: rumi-eo 0.16.0 expects a ``Numeric`` output of width 16 for complex128, which OpenZL cannot
#: make ("unexpected frame output (type 2, width 16 ...)"), and has no complex integers.
UNREAD_SAMPLE_TYPES: dict[str, frozenset] = {
    READER_RUMI_016: frozenset({"complex128", "complex_int16", "complex_int32"}),
}


def reads_sample_type(reader: str, name: str) -> bool:
    """Whether ``reader`` decodes samples of the encoding named ``name`` at all, whatever their frames' codecs."""
    return name not in UNREAD_SAMPLE_TYPES.get(reader, frozenset())


def readers_of(codecs: Iterable[str], format_version: int) -> frozenset:
    """The readers that decode a frame of ``format_version`` referencing geozl ``codecs``."""
    codecs = frozenset(codecs)
    out = {READER_RUMIMM}
    if format_version <= REFERENCE_MAX_FORMAT_VERSION:
        out |= {reader for reader, known in REFERENCE_CODECS.items() if codecs <= known}
    return frozenset(out)


# --------------------------------------------------------------- geozl recipes

#: Prefix of a codec name that is a geozl 2D recipe: ``"geozl:planar>zigzag>pfor"``.
RECIPE_PREFIX = "geozl:"
# geozl's fused codecs: a recipe's "<predictor>>zigzag" or "planar>zigzag>pfor" is one codec
_FUSED = (("planar", "zigzag", "pfor"), ("planar", "zigzag"), ("med", "zigzag"))
_PREDICTOR_CODECS = {"delta_w": "delta_w", "delta_n": "delta_n", "average": "average", "wp_static": "wp_static",
                     "planar": "planar", "med": "med", "pfor": "pfor"}  # id, delta_1d, zigzag, ...: built-ins
_V27_PARTS = frozenset({"pivco", "sparse"})  # written at frame format 27 (measured)


def recipe_codecs(recipe: str) -> tuple[frozenset, int]:
    """(geozl codecs a recipe's frames reference, their frame format version), from the recipe's name.

    The tests check this against :func:`rumimm.codec.frame_codecs` on real frames.
    """
    parts = recipe.split(">")
    codecs = set()
    i = 0
    while i < len(parts):
        for fused in _FUSED:
            if tuple(parts[i:i + len(fused)]) == fused:
                codecs.add("_".join(fused))
                i += len(fused)
                break
        else:
            if parts[i] == "pivco":
                codecs.add(C_ONLY)
            elif parts[i] in _PREDICTOR_CODECS:
                codecs.add(_PREDICTOR_CODECS[parts[i]])
            i += 1
    version = 27 if _V27_PARTS & set(parts) else REFERENCE_MAX_FORMAT_VERSION
    return frozenset(codecs), version
