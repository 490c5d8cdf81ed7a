"""Measure frame recipes on sample frames: size, encode and decode speed, who reads them.

:func:`measure` compresses each sample frame with every preset of :data:`PRESETS` that
takes the frames' dtype, and with every candidate graph geozl's own profiler lists
(``geozl.profile(tile, prior=None)``: about 40 to 75 predictor > coder recipes), and
decodes each frame through :mod:`rumimm.codec.geozl_lib`, the C decoder rumimm reads
with, so the decode speed is the one reads will see.  geozl's profiler supplies the
candidate list and the encode speeds of its recipes (timed inside its C library, no
Python in the loop); the frames are made again with ``geozl.compress`` to be decoded
through rumimm's decoder, because geozl's own decode timing does not go through it.
Decodes are timed in rounds across the candidates, frame by frame, so a slow spell of a
busy machine falls on all of them alike.

Every frame is decoded and compared with its samples before it counts, and a geozl
frame counts as read by rumimm only when its header declares what a rumi frame must
(:func:`check_frame_header`).  :class:`Profile` holds the rows and picks the
recommendation; the sampling of frames from a file or an array lives above this layer
(``rumimm.writer.profile``).
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from types import ModuleType
from typing import TYPE_CHECKING

import numpy as np

from rumimm.codec import geozl_lib
from rumimm.codec.compat import READER_SPECS, reads_sample_type
from rumimm.codec.frames import STRUCT_WIDTH, as_encoding, check_frame_header
from rumimm.codec.presets import DEFAULT_PRESET_BY_SPEC, PRESETS, Codec, resolve_codec
from rumimm.codec.wrapper import FrameEncoder
from rumimm.errors import CodecError
from rumimm.format.dtypes import Encoding

if TYPE_CHECKING:
    from numpy.typing import DTypeLike, NDArray

__all__ = [
    "DEFAULT_TOLERANCE",
    "READERS",
    "RUMIMM",
    "RUMI_EO_016",
    "RUMI_EO_026",
    "Candidate",
    "Profile",
    "measure",
    "preset_readers",
]

RUMIMM = "rumimm"
RUMI_EO_016 = "rumi-eo 0.16.0"
RUMI_EO_026 = "rumi-eo 0.26.1"
#: The readers a row may name, in the order tables print them.
READERS = (RUMIMM, RUMI_EO_016, RUMI_EO_026)
#: A recommendation may be this many times the smallest size measured.  Training reads from
#: local storage are decode-bound (a chip decodes 2-8x the bytes it returns), so a recipe that
#: decodes several times faster is worth up to a tenth more bytes on disk (the ``fast`` preset
#: is 5-9 % larger than the smallest on the synthetic scene and decodes 4-5x faster).
DEFAULT_TOLERANCE = 1.10
_MIB = float(1 << 20)


@dataclass(frozen=True)
class Candidate:
    """One recipe measured on the sample frames.

    Attributes
    ----------
    name : str
        A preset name (``codec=name`` writes with it) or a geozl recipe
        (``"planar>zigzag>pivco"``), which no preset may build.
    kind : {"preset", "geozl"}
    size : float
        Compressed bytes over raw bytes, all sample frames together.
    encode_mibs, decode_mibs : float
        MiB of raw samples per second, one thread.  Decode: each frame's fastest of
        ``reps`` decodes through rumimm's decoder, summed over the frames.
    readers : tuple of str
        Readers known to decode these frames (names from :data:`READERS`).  Presets:
        their declared compatibility, else rumimm plus rumi-eo 0.16.0 when the preset is
        ``portable``.  geozl recipes: rumimm when its checks accept the frames; no
        other reader is claimed.
    compressed : int
        Compressed bytes of all sample frames.
    note : str
        ``"default"`` for the dtype's default preset, else why a row is unusual.
    same_as : str or None
        The earlier row whose frames are byte for byte these (the same recipe on this
        data, e.g. a geozl recipe a preset builds); such a row is never recommended.
    codec : str or None
        The ``codec=`` value that writes these frames: the preset's name, or for a geozl
        recipe the codec the presets module makes of it (when it offers ``recipe_codec``);
        None when no codec writes them.
    """

    name: str
    kind: str
    size: float
    encode_mibs: float
    decode_mibs: float
    readers: tuple[str, ...]
    compressed: int
    note: str = ""
    same_as: str | None = None
    codec: str | None = None

    def to_dict(self) -> dict:
        return {"name": self.name, "kind": self.kind, "size": self.size, "encode_mibs": _finite(self.encode_mibs),
                "decode_mibs": _finite(self.decode_mibs), "readers": list(self.readers), "compressed": self.compressed,
                "note": self.note, "same_as": self.same_as,
                "codec": self.codec}


@dataclass
class Profile:
    """Candidates measured on sample frames and the recommendation for training reads.

    The rule: among the rows whose readers include every name of ``require`` (rumimm
    always), take the smallest size; of the rows at most ``tolerance`` times it, the
    one that decodes fastest.  ``recommended`` applies it to the presets (what
    ``codec=`` accepts), ``best`` to every row, geozl recipes included.

    Attributes
    ----------
    rows : list of Candidate
        Presets first (in :data:`PRESETS` order), then geozl recipes, smallest first.
    dtype : str
        The sample type measured.
    frames : list of tuple
        Where each measured sample frame came from (filled in by the caller:
        ``rumimm.profile_codecs`` gives ``(t, b, y, x)`` of its first sample, ``b`` None for a cell).
    frame_shape : tuple of int
        Shape of the first sample frame.
    raw_bytes : int
        Raw bytes of all sample frames.
    tolerance : float
    require : tuple of str
    frames_skipped : int
        Sample frames left out because the time budget ran out.
    seconds : float
        Time the measurement took.
    source : str
        What was profiled (a path, or ``"array"``).
    """

    rows: list[Candidate]
    dtype: str
    frame_shape: tuple[int, ...]
    raw_bytes: int
    tolerance: float = DEFAULT_TOLERANCE
    require: tuple[str, ...] = ()
    frames_skipped: int = 0
    seconds: float = 0.0
    frames: list[tuple[int, int | None, int, int]] = field(default_factory=list)
    source: str = "array"

    def __len__(self) -> int:
        return len(self.rows)

    def __iter__(self) -> Iterator[Candidate]:
        return iter(self.rows)

    def __getitem__(self, key: str | int) -> Candidate:
        if isinstance(key, str):
            for row in self.rows:
                if row.name == key:
                    return row
            raise KeyError(key)
        return self.rows[key]

    @property
    def rule(self) -> str:
        need = ", ".join((RUMIMM, *(r for r in self.require if r != RUMIMM)))
        return (f"fastest decode within {self.tolerance:g}x the smallest size, among the candidates read by "
                f"{need} (the presets for the recommended preset, every row for the best recipe)")

    def _pick(self, rows: Iterable[Candidate]) -> Candidate | None:
        need = {RUMIMM, *self.require}
        usable = [r for r in rows if need <= set(r.readers) and r.same_as is None]
        if not usable:
            return None
        smallest = min(r.size for r in usable)
        close = [r for r in usable if r.size <= smallest * self.tolerance]
        return max(close, key=lambda r: r.decode_mibs)

    @property
    def recommended(self) -> Candidate | None:
        """The preset the rule picks (``codec=profile.recommended.name``), or None."""
        return self._pick(r for r in self.rows if r.kind == "preset")

    @property
    def best(self) -> Candidate | None:
        """The row the rule picks among every candidate, geozl recipes included."""
        return self._pick(self.rows)

    def to_dict(self) -> dict:
        rec, best = self.recommended, self.best
        return {"source": self.source, "dtype": self.dtype, "frame_shape": list(self.frame_shape),
                "frames": [list(f) for f in self.frames], "raw_bytes": self.raw_bytes,
                "tolerance": self.tolerance, "require": list(self.require), "rule": self.rule,
                "recommended": rec.name if rec else None, "best": best.name if best else None,
                "frames_skipped": self.frames_skipped, "seconds": self.seconds,
                "rows": [r.to_dict() for r in self.rows]}

    def table(self) -> str:
        """The rows as an aligned text table, then the recommendation."""
        n = len(self.frames)
        count = f"{n} frame{'' if n == 1 else 's'}" if n else "sample frames"
        head = (f"{self.source}: {count} of {self.dtype} {tuple(self.frame_shape)}, "
                f"{self.raw_bytes / _MIB:.2f} MiB raw, measured in {self.seconds:.1f} s (one thread)")
        width = max([len("candidate"), *(len(r.name) for r in self.rows)])
        lines = [head, "",
                 f"{'candidate':{width}}  {'kind':6}  {'size/raw':>8}  {'enc MiB/s':>9}  {'dec MiB/s':>9}  readers"]
        for r in self.rows:
            readers = ", ".join(r.readers) or "-"
            notes = [r.note] if r.note else []
            if r.same_as:
                notes.append(f"same frames as {r.same_as}")
            note = f"  ({'; '.join(notes)})" if notes else ""
            lines.append(f"{r.name:{width}}  {r.kind:6}  {r.size:8.3f}  {r.encode_mibs:9.0f}  {r.decode_mibs:9.0f}  "
                         f"{readers}{note}")
        if self.frames_skipped:
            lines.append(f"time budget: {self.frames_skipped} sample frames left out")
        lines.append("")
        lines.append(f"rule: {self.rule}")
        rec, best = self.recommended, self.best
        lines.append(f"recommended preset: {_describe(rec)}" if rec else "recommended preset: none fits the rule")
        if best is not None and best is not rec:
            how = "" if best.kind == "preset" else (f" (write it with codec={best.codec!r})" if best.codec
                                                    else " (no codec writes it)")
            lines.append(f"best recipe overall: {_describe(best)}{how}")
        return "\n".join(lines)

    __str__ = table

    def __repr__(self) -> str:
        rec = self.recommended
        return (f"<Profile {self.dtype} {tuple(self.frame_shape)} x{len(self.frames)}: {len(self.rows)} candidates, "
                f"recommended {rec.name if rec else None!r}>\n{self.table()}")


def _finite(v: float) -> float | None:
    """A speed JSON can hold: None for one too fast for the clock to see."""
    return v if np.isfinite(v) else None


def _describe(row: Candidate) -> str:
    return (f"{row.name}, {row.size:.3f} of raw, decode {row.decode_mibs:.0f} MiB/s, "
            f"read by {', '.join(row.readers)}")


# ------------------------------------------------------------------------ readers


def preset_readers(codec: Codec, encoding: Encoding | DTypeLike) -> tuple[str, ...]:
    """The readers that decode frames of ``codec`` for ``encoding``.

    A preset may declare them with a ``readers_for(encoding)`` method, or as a
    ``readers`` (or ``compatibility``) attribute: a
    callable taking the :class:`Encoding`, a mapping from encoding name to readers, a
    mapping from reader to bool, or reader names.  Names are matched to :data:`READERS`
    by the version they carry (``"rumi-eo==0.16.0"`` is ``"rumi-eo 0.16.0"``).  Without a
    declaration, the ``portable`` flag says rumimm and rumi-eo 0.16.0, else rumimm alone.
    """
    enc = as_encoding(encoding)
    per_dtype = getattr(codec, "readers_for", None)
    if callable(per_dtype):
        return _ordered([_reader_name(str(n)) for n in per_dtype(enc)])
    declared = next((d for d in (getattr(codec, a, None) for a in ("readers", "compatibility")) if d is not None),
                    None)
    if declared is None:
        return (RUMIMM, RUMI_EO_016) if codec.portable and reads_sample_type(RUMI_EO_016, enc.name) else (RUMIMM,)
    value = declared(enc) if callable(declared) else declared
    if isinstance(value, Mapping) and not _reader_flags(value):
        value = value.get(enc.name, ())  # per encoding name
    if isinstance(value, Mapping):
        value = [k for k, ok in value.items() if ok]  # reader -> bool
    return _ordered([n for n in (_reader_name(str(n)) for n in value) if reads_sample_type(n, enc.name)])


def _ordered(found: list[str]) -> tuple[str, ...]:
    return tuple(r for r in READERS if r in found) + tuple(dict.fromkeys(n for n in found if n not in READERS))


def _reader_flags(value: Mapping) -> bool:
    return bool(value) and all(isinstance(v, (bool, np.bool_)) for v in value.values())


def _reader_name(name: str) -> str:
    low = name.lower()
    if "rumimm" in low:
        return RUMIMM
    for reader in (RUMI_EO_016, RUMI_EO_026):
        if reader.split()[-1] in low:
            return reader
    return name


# ----------------------------------------------------------------------- measuring


def _storage(frame: np.ndarray, enc: Encoding) -> np.ndarray:
    """The samples as rumi stores them: storage dtype, sub-byte values in the low bits, bool as 0/1."""
    arr = np.ascontiguousarray(frame)
    flat = arr.reshape(-1).view(enc.storage_dtype)
    if enc.bits_per_sample == 1:
        return np.not_equal(flat, 0).view(np.uint8).reshape(arr.shape)
    if enc.subbyte:
        return np.bitwise_and(flat, np.uint8((1 << enc.bits_per_sample) - 1)).reshape(arr.shape)
    return flat.reshape(arr.shape)


class _Decoder:
    """Decodes through geozl_lib into one reused, 8-byte aligned buffer: a checked decode, and timed ones."""

    def __init__(self, capacity: int, clock: Callable[[], float], verify: bool) -> None:
        self.out = np.empty(-(-capacity // 8), np.uint64).view(np.uint8)
        self.clock = clock
        self.verify = verify

    def _run(self, src: np.ndarray, nbytes: int, label: str) -> int:
        got = geozl_lib.decompress(src.ctypes.data, src.size, self.out.ctypes.data, nbytes, self.verify)
        if got < 0:
            raise CodecError(f"{label}: rumimm's decoder failed ({geozl_lib.status_message(got)})")
        return got

    def check(self, frame: np.ndarray, expected: np.ndarray, label: str) -> None:
        """Decode ``frame`` once and compare with the samples it was made from."""
        want = expected.reshape(-1).view(np.uint8)
        got = self._run(frame, want.size, label)
        if got != want.size or not np.array_equal(self.out[:got], want):
            raise CodecError(f"{label}: decoded samples differ from the samples encoded")

    def time(self, frame: np.ndarray, nbytes: int, label: str) -> float:
        """Seconds one decode of ``frame`` takes."""
        t0 = self.clock()
        self._run(frame, nbytes, label)
        return self.clock() - t0


def _rate(nbytes: int, seconds: float) -> float:
    return nbytes / _MIB / seconds if seconds > 0 else float("inf")


def _geozl_input(storage: np.ndarray, enc: Encoding) -> np.ndarray:
    """The array geozl profiles: plain numpy integers and floats as they are, other types as stored."""
    native = enc.dtype
    if native.kind in "iuf" and native.itemsize == enc.storage_dtype.itemsize and native.names is None:
        return storage.view(native)
    return storage


@dataclass
class _Tally:
    """One candidate's running totals over the frames measured so far."""

    name: str
    kind: str
    readers: tuple[str, ...]
    note: str = ""
    compressed: int = 0
    encode_s: float = 0.0
    decode_s: float = 0.0
    alive: bool = True
    digest: hashlib.blake2b = field(default_factory=lambda: hashlib.blake2b(digest_size=16))

    codec: str | None = None

    def row(self, raw: int, same_as: str | None) -> Candidate:
        return Candidate(self.name, self.kind, self.compressed / raw, _rate(raw, self.encode_s),
                         _rate(raw, self.decode_s), self.readers, self.compressed, self.note, same_as, self.codec)


def measure(frames: Sequence[np.ndarray], encoding: Encoding | DTypeLike | None = None, *,
            presets: Iterable[str] | None = None, geozl: bool = True, reps: int = 3, budget: float | None = None,
            tolerance: float = DEFAULT_TOLERANCE, require: Iterable[str] = (), verify: bool = True,
            clock: Callable[[], float] = time.perf_counter, spec: str | None = None) -> Profile:
    """Measure every candidate recipe on ``frames``.

    Frame by frame: each candidate encodes the frame, each frame is decoded once and
    compared with its samples, then ``reps`` rounds decode every candidate's frame in
    turn, so a slow spell of a busy machine falls on all candidates alike; each frame's
    fastest decode counts.

    Parameters
    ----------
    frames : sequence of numpy.ndarray
        Sample frames of one dtype, each ``(h, w)`` or ``(B, h, w)`` (a cell), as a
        writer would encode them.
    encoding : Encoding or dtype-like, optional
        The sample encoding; default: the frames' dtype.
    presets : iterable of str, optional
        Preset names to measure; default: every preset of :data:`PRESETS` that takes
        the dtype (``"auto"`` is the dtype's default and is not listed twice).
    geozl : bool
        Also measure geozl's candidate recipes (needs the geozl package).
    reps : int
        Timed decodes of each frame; the fastest counts.
    budget : float, optional
        Seconds; once spent, the frames not yet started are left out (the first frame is
        always measured), and ``frames_skipped`` says how many.
    tolerance, require
        The recommendation rule (see :class:`Profile`).
    verify : bool
        Check the frames' checksums while decoding, as ``rumimm.open`` does by default
        (``verify=True``); False times reads opened with ``verify=False``.
    clock : callable
        The timer (seconds).
    spec : {"0.1", "0.2"}, optional
        The specification of the file the frames are in: it decides the default preset,
        and a row lists only the readers that open such a file (``READER_SPECS``: rumi-eo
        0.16.0 opens spec 0.1 files only, rumi-eo 0.26.1 spec 0.2 ones).  None: the
        frames alone (every reader that decodes them; spec 0.1's default).

    Returns
    -------
    Profile

    Raises
    ------
    ValueError
        No frames, frames of different dtypes, an unknown preset, ``reps < 1``.
    CodecError
        A frame failed to decode back to its samples.
    """
    frames = [np.asarray(f) for f in frames]
    if not frames:
        raise ValueError("profile needs at least one sample frame, got none")
    if isinstance(reps, bool) or int(reps) != reps or reps < 1:
        raise ValueError(f"reps must be an int >= 1, got {reps!r}")
    if not tolerance >= 1.0:
        raise ValueError(f"tolerance must be a number >= 1, got {tolerance!r}")
    enc = as_encoding(frames[0].dtype if encoding is None else encoding)
    for f in frames:
        if f.dtype != enc.dtype:
            raise ValueError(f"sample frames must all be {enc.dtype}, got one of {f.dtype}")
        if f.ndim not in (2, 3) or f.size == 0:
            raise ValueError(f"sample frames must be (h, w) or (B, h, w) with samples, got shape {f.shape}")
    require = tuple(require)
    unknown = [r for r in require if r not in READERS]
    if unknown:
        raise ValueError(f"require names unknown readers {unknown}; expected names from {list(READERS)}")
    if presets is None:
        names = [n for n, c in PRESETS.items() if n != "auto" and c.supports(enc)]
    else:
        names = list(presets)
        for n in names:
            resolve_codec(n, enc)  # an unknown name or an unsupported dtype: ValueError naming the choices
    default = DEFAULT_PRESET_BY_SPEC[spec or "0.1"]  # "auto" marks the dtype's default preset (delta, ...)
    if default == "auto":
        default = resolve_codec(None, enc).name
    geo = _import_geozl() if geozl and enc.storage_dtype.itemsize != STRUCT_WIDTH else None  # 16-byte: no geozl
    storage = [_storage(f, enc) for f in frames]
    decoder = _Decoder(max(s.nbytes for s in storage), clock, bool(verify))
    start = clock()
    presets_t = {n: _Tally(n, "preset", preset_readers(PRESETS[n], enc), "default" if n == default else "", codec=n)
                 for n in names}
    geozl_t: dict[str, _Tally] = {}
    encoders = {n: FrameEncoder(PRESETS[n], enc) for n in names}
    raw = done = 0
    try:
        for encoder in encoders.values():
            encoder.encode(frames[0])  # builds the graph and its context: not part of the encode speed
        for i, (frame, samples) in enumerate(zip(frames, storage, strict=True)):
            if i and budget is not None and clock() - start > budget:
                break
            coded: list[tuple[_Tally, np.ndarray]] = []
            for n, encoder in encoders.items():
                t0 = clock()
                frame_bytes = encoder.encode(frame)
                presets_t[n].encode_s += clock() - t0
                coded.append((presets_t[n], np.frombuffer(frame_bytes, np.uint8)))
            if geo is not None:
                coded += _encode_geozl(geo, enc, samples, geozl_t, first=i == 0)
            for tally, data in coded:
                decoder.check(data, samples, f"{tally.kind} {tally.name!r}, sample frame {i}")
            best = [float("inf")] * len(coded)
            for _ in range(int(reps)):
                for j, (tally, data) in enumerate(coded):
                    best[j] = min(best[j], decoder.time(data, samples.nbytes, f"{tally.kind} {tally.name!r}"))
            for (tally, data), seconds in zip(coded, best, strict=True):
                tally.compressed += data.size
                tally.decode_s += seconds
                tally.digest.update(data.tobytes())
            raw += samples.nbytes
            done += 1
    finally:
        for encoder in encoders.values():
            encoder.close()
    geo_rows = sorted((t for t in geozl_t.values() if t.alive), key=lambda t: (t.compressed, t.name))
    first: dict[bytes, _Tally] = {}
    rows = []
    for t in (*presets_t.values(), *geo_rows):
        key = t.digest.digest()
        twin = first.setdefault(key, t)
        if twin is not t and t.readers:  # the same bytes: whoever reads the twin's frames reads these
            t.readers = tuple(r for r in READERS if r in (*twin.readers, *t.readers))
        if spec is not None:  # a reader of the file too
            t.readers = tuple(r for r in t.readers if spec in READER_SPECS.get(r, (spec,)))
        rows.append(t.row(raw, None if twin is t else twin.name))
    out = Profile(rows=rows, dtype=enc.name,
                  frame_shape=tuple(frames[0].shape), raw_bytes=raw, tolerance=float(tolerance), require=require,
                  frames_skipped=len(frames) - done)
    out.seconds = clock() - start
    return out


def _import_geozl() -> ModuleType:
    try:
        import geozl
    except ImportError as exc:
        raise ImportError("profiling geozl's recipes needs the geozl package; install it or pass geozl=False") \
            from exc
    return geozl


def _recipe_codec(recipe: str) -> Codec | None:
    """The codec that writes geozl ``recipe``, when the presets module makes one (``recipe_codec``); else None."""
    from rumimm.codec import presets

    make = getattr(presets, "recipe_codec", None)
    if make is None:
        return None
    try:
        return make(recipe)
    except ValueError:
        return None


def _encode_geozl(geo: ModuleType, enc: Encoding, samples: np.ndarray, tallies: dict[str, _Tally], first: bool,
                  ) -> list[tuple[_Tally, NDArray[np.uint8]]]:
    """Every geozl recipe's frame of ``samples``; the encode time is what geozl's profiler measured.

    The recipes are the ones geozl's profiler lists for the first frame; a recipe it
    does not list, or cannot compress, for a later frame drops out (its totals would
    cover fewer frames than the others').
    """
    arr = _geozl_input(samples, enc)
    try:
        listed = {str(r["graph"]): r for r in geo.profile(arr, prior=None, reps=1)}
    except (TypeError, ValueError):  # a dtype geozl does not take
        listed = {}
    if first:
        for name in listed:
            codec = _recipe_codec(name)
            readers = (RUMIMM,) if codec is None else preset_readers(codec, enc)
            tallies[name] = _Tally(name, "geozl", readers, codec=None if codec is None else codec.name)
    coded = []
    for name, tally in tallies.items():
        row = listed.get(name)
        if not tally.alive or row is None:
            tally.alive = False
            continue
        try:
            data = np.frombuffer(geo.compress(arr, graph=geo.graph(arr, name)), np.uint8)
        except (RuntimeError, ValueError):
            tally.alive = False
            continue
        mbps = float(row["encode_mbps"])
        tally.encode_s += arr.nbytes / (mbps * 1e6) if mbps > 0 else 0.0
        if tally.readers:
            try:
                check_frame_header(data, enc, samples.size)
            except CodecError as exc:
                tally.readers, tally.note = (), f"rumimm refuses its frames: {exc}"
        coded.append((tally, data))
    return coded
