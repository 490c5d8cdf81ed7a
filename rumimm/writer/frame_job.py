"""Cut a row of tiles into frames and compress them: the work every writer backend shares.

A :class:`FrameJob` holds one ``FrameEncoder`` (and a decoder with ``verify``) for one
file; the writer builds one (which also checks the codec and format version before a
file exists) and every encoding worker process builds its own from the same arguments.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from rumimm.errors import CodecError, RumiError
from rumimm.format.dtypes import Encoding
from rumimm.format.grid import FrameUnit, Grid
from rumimm.writer.args import MAX_COUNT


class JobArgs(NamedTuple):
    """What a process needs to compress a file's frames exactly as the writer would."""

    codec: object
    encoding: Encoding
    format_version: int
    verify: bool
    n_frames: int
    #: Spec 0.2: complex128 frames are compressed as their float64 components (what rumi-eo reads).
    components: bool = False


class FrameSpec(NamedTuple):
    """One frame of a grid row: its index, its band (-1 for a cell) and its columns."""

    k: int
    band: int
    x0: int
    x1: int


class FrameJob:
    """Compress (and optionally verify) the frames of one file; one instance per process."""

    def __init__(self, args: JobArgs):
        from rumimm import codec as _codec

        self.args = args
        self.enc = args.encoding
        self.n_frames = args.n_frames
        frame_enc = args.encoding
        if args.components:
            from rumimm.format.dtypes import encoding_for_dtype

            frame_enc = encoding_for_dtype(np.float64)
        self.encoder = _codec.FrameEncoder(args.codec, frame_enc, args.format_version)
        self.decoder = _codec.FrameDecoder() if args.verify else None

    def encode(self, k: int, frame: np.ndarray) -> bytes:
        try:
            parts = np.ascontiguousarray(frame).view(np.float64) if self.args.components else frame
            data = bytes(self.encoder.encode(parts))
        except RumiError as exc:
            raise type(exc)(f"frame {k} of {self.n_frames}: {exc}") from exc
        except Exception as exc:
            raise CodecError(f"frame {k} of {self.n_frames} failed to compress: {exc}") from exc
        if not data:
            raise CodecError(f"frame {k} of {self.n_frames} compressed to 0 bytes; every frame must be non-empty")
        if len(data) > MAX_COUNT:
            raise RumiError(f"frame {k} of {self.n_frames} compressed to {len(data)} bytes, more than the "
                            f"{MAX_COUNT} a TileByteCounts entry holds; use a smaller tile")
        if self.decoder is not None:
            self._verify(k, frame, data)
        return data

    def _verify(self, k: int, frame: np.ndarray, data: bytes) -> None:
        enc = self.enc
        got = self.decoder.decode(data, enc, frame.size, index=k, components=self.args.components)
        want = np.ascontiguousarray(frame).reshape(-1)
        if enc.bits_per_sample == 1:
            want = np.not_equal(want, 0).view(np.uint8)  # what a 1-bit sample stores
        elif enc.subbyte:
            want = want.view(np.uint8) & np.uint8((1 << enc.bits_per_sample) - 1)
        got = np.ascontiguousarray(got).reshape(-1).view(np.uint8)
        want = want.view(np.uint8)
        if got.size != want.size or not np.array_equal(got, want):
            raise CodecError(f"frame {k} of {self.n_frames} does not decode to the samples written "
                             "(verify=True); the codec is not lossless for this data")


def frame_specs(grid: Grid, r: int) -> list[FrameSpec]:
    """Every frame of grid row ``r``, in frame-index order."""
    tw, x = grid.tile_width, grid.image_width
    k = grid.frame_index(r, 0, 0)
    bands = range(grid.samples_per_pixel) if grid.unit == FrameUnit.TILE else (-1,)
    out = []
    for c in range(grid.tiles_across):
        x0, x1 = c * tw, min((c + 1) * tw, x)
        for band in bands:
            out.append(FrameSpec(k, band, x0, x1))
            k += 1
    return out


def cut(block: np.ndarray, spec: FrameSpec) -> np.ndarray:
    """The samples of frame ``spec`` in a (B, h, X) row block (a view)."""
    return block[:, :, spec.x0 : spec.x1] if spec.band < 0 else block[spec.band, :, spec.x0 : spec.x1]


def encode_specs(job: FrameJob, block: np.ndarray, specs) -> list[bytes]:
    """Cut the frames ``specs`` from a (B, h, X) block (of the job's dtype) and compress them."""
    return [job.encode(spec.k, cut(block, spec)) for spec in specs]
