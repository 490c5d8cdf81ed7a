"""The frame layouts of rumi spec 0.2: what one frame holds and where it sits in the file.

Spec 0.2 stores ``frame_unit`` (IFD tag 65000 and the header blob) from an append-only
registry of ten layouts over the band axis (B), the time axis (T) and a tile (h, w).
Units 0 and 9 are *tile frames*, one (h, w) plane per (band, step); units 1 to 8 are
*cell frames*, every band and step of one grid position in one frame, the non-tile
axes either planar (before ``h w``) or interleaved per pixel (after it).

rumimm reads every layout through the spec 0.1 machinery by numbering the (step, band)
pairs as *virtual bands* ``v`` in the order the frames hold them: band-major
(``v = b * T + t``) or time-major (``v = t * B + b``).  Tile frames are then the 0.1
tile layout with ``B * T`` bands, and planar cell frames the 0.1 cell layout with
``(B * T, h, w)`` frames; an interleaved frame decodes to a transpose of that.
"""

from __future__ import annotations

import enum

__all__ = [
    "UNIT_NAMES",
    "Unit",
    "band_major",
    "check_unit",
    "frame_axes",
    "interleaved",
    "is_tile",
    "n_frames",
    "unit_axes",
    "valid_units",
    "virtual_band",
]


class Unit(enum.IntEnum):
    """The spec 0.2 ``frame_unit`` registry (append-only)."""

    HW = 0
    """One (h, w) tile per band and step; the frame index walks bands, then steps."""
    XHW = 1
    """(B, h, w) or (T, h, w): the one axis above 1, planar; one frame per grid position."""
    HWX = 2
    """(h, w, B) or (h, w, T): the one axis above 1, interleaved per pixel."""
    BTHW = 3
    """(B, T, h, w), planar."""
    TBHW = 4
    """(T, B, h, w), planar."""
    BHWT = 5
    """(B, h, w, T): band planes, steps interleaved."""
    THWB = 6
    """(T, h, w, B): step planes, bands interleaved."""
    HWBT = 7
    """(h, w, B, T): both interleaved, steps fastest."""
    HWTB = 8
    """(h, w, T, B): both interleaved, bands fastest."""
    HW_TB = 9
    """One (h, w) tile per band and step; the frame index walks steps, then bands."""


#: The decoded axes of each unit, outermost first; ``x`` is whichever of b, t is above 1.
_AXES = {0: "h w", 1: "x h w", 2: "h w x", 3: "b t h w", 4: "t b h w", 5: "b h w t",
         6: "t h w b", 7: "h w b t", 8: "h w t b", 9: "h w"}

#: Names rumi-eo reports as ``frame_layout`` (with x resolved) and rumimm shows.
UNIT_NAMES = {int(u): _AXES[int(u)] for u in Unit}


def unit_axes(unit: int, bands: int, times: int) -> str:
    """The decoded frame's axes, e.g. ``"t b h w"``; ``x`` resolved to ``b`` or ``t``."""
    axes = _AXES[int(unit)]
    if "x" in axes:
        axes = axes.replace("x", "t" if times > 1 else "b")
    return axes


def valid_units(bands: int, times: int) -> tuple[int, ...]:
    """The units a file of ``bands`` bands and ``times`` steps may record."""
    if bands > 1 and times > 1:
        return (0, 3, 4, 5, 6, 7, 8, 9)
    if bands > 1 or times > 1:
        return (0, 1, 2)
    return (0,)


def check_unit(unit: int, bands: int, times: int) -> str | None:
    """None when ``unit`` is registered and valid for B and T, else the rule broken (lowercase)."""
    if unit not in _AXES:
        return f"frame_unit {unit} is not registered (0 to 9)"
    if unit not in valid_units(bands, times):
        if unit in (1, 2):
            return (f"frame_unit {unit} ({_AXES[unit]}) needs exactly one of B and T above 1, "
                    f"got B = {bands}, T = {times}")
        return f"frame_unit {unit} ({_AXES[unit]}) needs B > 1 and T > 1, got B = {bands}, T = {times}"
    return None


def is_tile(unit: int) -> bool:
    """Units 0 and 9: one frame per (band, step) and grid position."""
    return unit in (0, 9)


def n_frames(unit: int, positions: int, bands: int, times: int) -> int:
    """N: frames of a grid of ``positions`` cells."""
    return positions * bands * times if is_tile(unit) else positions


def band_major(unit: int, bands: int, times: int) -> bool:
    """Whether frames hold (step, band) pairs band-major: virtual band ``v = b * T + t``.

    Otherwise time-major, ``v = t * B + b``.  With B or T equal to 1 both orders agree.
    """
    if bands == 1 or times == 1:
        return True
    axes = [a for a in _AXES[int(unit)].split() if a in "bt"]
    if not axes:  # tile frames: the frame index order
        return unit == 0
    return axes[0] == "b"


def interleaved(unit: int) -> bool:
    """Whether a band or time axis follows ``h w`` inside the frame (a per-pixel interleave)."""
    return _AXES[int(unit)].split()[-1] not in ("w",)


def frame_axes(unit: int, bands: int, times: int, h: int, w: int) -> tuple[tuple[str, ...], tuple[int, ...]]:
    """(axis names, sizes) of a decoded frame at a position of ``h`` x ``w`` pixels.

    Tile frames are ``(h, w)``; a cell frame lists its band and time axes that are above 1
    (and, when both are 1, nothing but the tile).
    """
    size = {"b": bands, "t": times, "h": h, "w": w}
    names = tuple(a for a in unit_axes(unit, bands, times).split() if a in "hw" or size[a] > 1)
    return names, tuple(size[a] for a in names)


def virtual_band(unit: int, bands: int, times: int, t: int, b: int) -> int:
    """The virtual band of step ``t`` and band ``b`` (see the module notes)."""
    return b * times + t if band_major(unit, bands, times) else t * bands + b
