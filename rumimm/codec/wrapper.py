"""The OpenZL wrapper: compress frames (:class:`FrameEncoder`) and decode them (:class:`FrameDecoder`)."""

from __future__ import annotations

from collections.abc import Hashable

import numpy as np
import openzl.ext as zl

from rumimm.codec.frames import (
    DEFAULT_FORMAT_VERSION,
    FRAME_MAGIC,
    MAX_FORMAT_VERSION,
    MIN_NUMERIC_FORMAT_VERSION,
    STRUCT_WIDTH,
    as_bytes,
    as_encoding,
    check_frame_header,
    failure_reason,
)
from rumimm.codec.graphs import geozl_lossless, geozl_module
from rumimm.codec.presets import Codec, resolve_codec
from rumimm.errors import CodecError
from rumimm.format.dtypes import Encoding

# ------------------------------------------------------------------------ encoding


def _check_version(format_version) -> int:
    v = int(format_version)
    if v != format_version or not MIN_NUMERIC_FORMAT_VERSION <= v <= MAX_FORMAT_VERSION:
        raise ValueError(
            f"format_version must be an int in [{MIN_NUMERIC_FORMAT_VERSION}, {MAX_FORMAT_VERSION}], "
            f"got {format_version!r}; rumi-eo 0.16.0 reads up to {DEFAULT_FORMAT_VERSION}"
        )
    return v


class FrameEncoder:
    """Compress frames of one encoding with one codec into OpenZL frames.

    Owns its OpenZL ``Compressor`` and ``CCtx`` objects (one pair per graph: a
    geozl graph depends on the frame's row width and band count).  Not
    thread-safe: use one encoder per thread.  Every frame is written at
    ``format_version`` with the content and compressed checksums on.

    Parameters
    ----------
    codec : None, str, Codec or callable
        See :func:`resolve_codec`.
    encoding : Encoding or dtype-like
        The sample encoding; frames passed to :meth:`encode` must have its dtype.
    format_version : int, optional
        OpenZL frame format version, default :data:`DEFAULT_FORMAT_VERSION` (24,
        the newest rumi-eo 0.16.0 reads); 14..MAX_FORMAT_VERSION is accepted.  A
        geozl recipe writes the version geozl chooses (24, or 27 for geozl 0.19's
        newer codecs); ``format_version`` is then the highest version accepted.

    Examples
    --------
    >>> enc = FrameEncoder(None, "uint16")
    >>> frame = enc.encode(np.zeros((512, 512), np.uint16))
    >>> frame_format_version(frame)
    24
    """

    def __init__(self, codec, encoding, format_version: int = DEFAULT_FORMAT_VERSION):
        self.encoding: Encoding = as_encoding(encoding)
        self.codec: Codec = resolve_codec(codec, self.encoding)
        self.format_version: int = _check_version(format_version)
        if self.codec.requires_geozl:
            geozl_lossless()  # fail now, not at the first frame
        self._contexts: dict[Hashable, tuple] = {}
        self._struct = self.encoding.storage_dtype.itemsize == STRUCT_WIDTH
        self._mask = (1 << self.encoding.bits_per_sample) - 1 if self.encoding.subbyte else None

    def close(self) -> None:
        """Free the OpenZL contexts now, each ``CCtx`` before the ``Compressor`` it references.

        Also run when the encoder is garbage: an encoder caught in a reference cycle
        (a traceback holding a writer, say) would otherwise leave the pair to the cycle
        collector, which may clear them in either order, and OpenZL's extension aborts
        the process when a ``Compressor`` goes before its ``CCtx``.  Idempotent; the
        encoder stays usable (contexts are made again on the next frame).
        """
        contexts, self._contexts = getattr(self, "_contexts", {}), {}
        while contexts:
            _, (compressor, cctx) = contexts.popitem()
            del cctx
            del compressor

    __del__ = close

    @property
    def portable(self) -> bool:
        """True when the reference reader decodes this encoder's frames."""
        return self.codec.portable and self.format_version <= DEFAULT_FORMAT_VERSION

    def _geozl_graph(self, shape: tuple[int, ...]):
        """geozl's prepared graph of this recipe for frames of ``shape`` (built once per shape)."""
        key = ("geozl", self.codec.graph_key(shape))
        ctx = self._contexts.get(key)
        if ctx is None:
            geozl = geozl_module()
            width = int(shape[-1])
            planes = int(shape[0]) if len(shape) == 3 else 1
            try:
                # lossless graphs do not depend on the samples: zeros of the frame's shape build it
                graph = geozl.graph(np.zeros(shape, self.encoding.storage_dtype), self.codec.recipe, width=width,
                                    planes=planes)
            except (RuntimeError, ValueError) as exc:
                raise CodecError(
                    f"codec {self.codec.name!r} failed to build its graph for {self.encoding.name} frames of "
                    f"shape {shape} (geozl: {str(exc).lower().rstrip('.')})"
                ) from exc
            ctx = (None, graph)
            self._contexts[key] = ctx
        return ctx[1]

    def _encode_recipe(self, data: np.ndarray, shape: tuple[int, ...]) -> bytes:
        graph = self._geozl_graph(shape)
        try:
            out = geozl_module().compress(data.reshape(shape), graph=graph)
        except (RuntimeError, ValueError) as exc:
            raise CodecError(
                f"frame of shape {shape} failed to compress with codec {self.codec.name!r} "
                f"(geozl: {str(exc).lower().rstrip('.')})"
            ) from exc
        version = int.from_bytes(out[:4], "little") - FRAME_MAGIC
        if version > self.format_version:
            raise CodecError(
                f"codec {self.codec.name!r} writes OpenZL frame format {version}, above the format_version "
                f"{self.format_version} asked for; pass frame_format_version={version} (rumimm.write) or choose "
                "another codec"
            )
        return out

    def _context(self, shape: tuple[int, ...]) -> zl.CCtx:
        key = self.codec.graph_key(shape)
        ctx = self._contexts.get(key)
        if ctx is None:
            compressor = zl.Compressor()
            try:
                gid = self.codec.build(compressor, self.encoding, shape)
                compressor.select_starting_graph(gid)
                cctx = zl.CCtx()
                cctx.ref_compressor(compressor)
                # without StickyParameters a CCtx forgets these after one compress
                cctx.set_parameter(zl.CParam.StickyParameters, 1)
                cctx.set_parameter(zl.CParam.FormatVersion, self.format_version)
                cctx.set_parameter(zl.CParam.ContentChecksum, 1)
                cctx.set_parameter(zl.CParam.CompressedChecksum, 1)
            except (TypeError, ImportError):
                raise
            except Exception as exc:
                raise CodecError(
                    f"codec {self.codec.name!r} failed to build its graph for {self.encoding.name} "
                    f"frames of shape {shape} (OpenZL: {failure_reason(exc)})"
                ) from exc
            ctx = (compressor, cctx)
            self._contexts[key] = ctx
        return ctx[1]

    def _storage(self, frame) -> np.ndarray:
        """The frame's samples as a flat, C-contiguous array of the storage dtype."""
        arr = np.asarray(frame)
        enc = self.encoding
        if arr.dtype != enc.dtype:
            raise ValueError(f"frame dtype is {arr.dtype}, expected {enc.dtype} ({enc.name})")
        if arr.ndim not in (2, 3):
            raise ValueError(f"frame must be (h, w) or (B, h, w), got shape {arr.shape}")
        if arr.size == 0:
            raise ValueError(f"frame shape {arr.shape} has no samples")
        if not (arr.flags.c_contiguous and arr.flags.aligned):
            arr = arr.copy(order="C")  # OpenZL refuses unaligned buffers; a copy is aligned
        if self._struct:
            return arr.reshape(-1).view(np.uint8)
        flat = arr.reshape(-1).view(enc.storage_dtype)
        if enc.bits_per_sample == 1:
            return np.not_equal(flat, 0).view(np.uint8)  # bool: exactly 0 or 1
        if self._mask is not None:
            return np.bitwise_and(flat, np.uint8(self._mask))  # zero the unused high bits
        return flat

    def encode(self, frame: np.ndarray) -> bytes:
        """Compress one frame and return the OpenZL frame bytes.

        Parameters
        ----------
        frame : numpy.ndarray
            Samples of the encoder's dtype, shape ``(h, w)`` (a tile frame) or
            ``(B, h, w)`` (a cell frame), any strides.

        Returns
        -------
        bytes
            One OpenZL frame that decodes to ``frame.size`` samples.

        Raises
        ------
        ValueError
            Wrong dtype, rank or an empty frame.
        CodecError
            OpenZL failed to compress (the message carries OpenZL's reason).
        """
        data = self._storage(frame)
        shape = np.shape(frame)
        if self.codec.recipe is not None:
            return self._encode_recipe(data, shape)
        cctx = self._context(shape)
        if self._struct:
            # openzl.ext reads a 2-D uint8 array as (struct width, count)
            data = data.reshape(STRUCT_WIDTH, -1)
            inp = zl.Input(zl.Type.Struct, data)
        else:
            inp = zl.Input(zl.Type.Numeric, data)
        # Input does not keep `data` alive: `data` stays referenced until compress returns
        try:
            out = cctx.compress([inp])
        except Exception as exc:
            raise CodecError(
                f"frame of shape {shape} failed to compress with codec {self.codec.name!r} "
                f"(OpenZL: {failure_reason(exc)})"
            ) from exc
        finally:
            del inp, data
        return out


# ------------------------------------------------------------------------ decoding


class FrameDecoder:
    """Decompress OpenZL frames, checking what they decode to before and after.

    Owns one OpenZL ``DCtx``, with the geozl decoders registered when geozl can be
    imported (frames of the ``geozl-*`` presets need them).  Not thread-safe:
    use one decoder per thread.  Content and compressed checksums are verified.

    Parameters
    ----------
    decoders : iterable of openzl.ext.CustomDecoder, optional
        Extra custom decoders a user graph needs.
    """

    def __init__(self, decoders=()):
        self._dctx = zl.DCtx()
        self._dctx.set_parameter(zl.DParam.StickyParameters, 1)
        self._dctx.set_parameter(zl.DParam.CheckCompressedChecksum, 1)
        self._dctx.set_parameter(zl.DParam.CheckContentChecksum, 1)
        self.geozl = False
        try:
            import geozl
        except ImportError:  # pragma: no cover - optional dependency
            pass
        else:
            geozl.register_decoders(self._dctx)
            self.geozl = True
        for d in decoders:
            self._dctx.register_custom_decoder(d)

    def decode(
        self,
        frame,
        encoding,
        n_samples: int,
        *,
        index: int | None = None,
        where: str = "",
        components: bool = False,
    ) -> np.ndarray:
        """Decode one frame to a flat array of ``encoding.storage_dtype``.

        Parameters
        ----------
        frame : bytes, memoryview or numpy.ndarray of uint8
            One OpenZL frame.  ``DCtx.decompress`` takes only ``bytes``, so other
            buffers are copied once.
        encoding : Encoding or dtype-like
            The sample encoding the frame must hold.
        n_samples : int
            Exact number of samples expected (``h * w`` or ``B * h * w``).
        index, where : optional
            Frame index and message prefix (``rumimm.errors.where(path)``) for errors.
        components : bool
            Spec 0.2: a complex128 frame may also hold its float64 components
            (``Type.Numeric`` of width 8, twice the samples).

        Returns
        -------
        numpy.ndarray
            Flat, read-only array of ``n_samples`` elements of the storage dtype
            (``<u1``/``<u2``/``<u4``/``<u8``, or ``V16`` for complex128).  For
            sub-byte encodings only the low ``bits_per_sample`` bits are kept.

        Raises
        ------
        CodecError
            The bytes are not an OpenZL frame, are corrupt or truncated, or decode
            to anything but ``n_samples`` samples of the encoding's width.  The
            declared output size is checked before decompressing, so a hostile
            frame cannot make this allocate more than the expected samples.
        """
        enc = as_encoding(encoding)
        n = int(n_samples)
        if n < 0:
            raise ValueError(f"n_samples must be >= 0, got {n_samples}")
        label = f"{where}frame {index}" if index is not None else f"{where}frame"
        width = enc.storage_dtype.itemsize
        struct = width == STRUCT_WIDTH
        want_type = zl.Type.Struct if struct else zl.Type.Numeric

        data = as_bytes(frame)
        check_frame_header(data, enc, n, label=label, components=components)
        try:
            outs = self._dctx.decompress(data)
        except Exception as exc:
            # geozl 0.19 codecs with no Python decoder (pivco, frame format 27): geozl's C library
            arr = _c_decode(data, enc, n, struct)
            if arr is not None:
                return arr
            hint = "" if self.geozl else "; if it was written with a geozl codec, install geozl"
            raise CodecError(
                f"{label} failed to decode (OpenZL: {failure_reason(exc)}); the file may be truncated or corrupt{hint}"
            ) from None
        if len(outs) != 1:
            raise CodecError(f"{label} decoded to {len(outs)} outputs, expected 1")
        out = outs[0]
        if struct and components and out.type == zl.Type.Numeric and out.elt_width == 8 and out.num_elts == 2 * n:
            return out.content.as_nparray().reshape(-1).view(enc.storage_dtype)
        if out.type != want_type or out.elt_width != width or out.num_elts != n:
            raise CodecError(
                f"{label}: decoded {out.num_elts} samples of width {out.elt_width}, expected {n} of width {width}"
            )
        arr = out.content.as_nparray()  # a view that keeps the OpenZL buffer alive
        if struct:
            return arr.reshape(-1).view(enc.storage_dtype)
        arr = arr.reshape(-1)
        if arr.dtype != enc.storage_dtype:
            arr = arr.view(enc.storage_dtype)
        if enc.subbyte:
            # a foreign writer may leave high bits set: readers take the low bits
            arr = np.bitwise_and(arr, np.uint8((1 << enc.bits_per_sample) - 1))
            arr.flags.writeable = False
        return arr


def _c_decode(data: bytes, enc: Encoding, n: int, struct: bool) -> np.ndarray | None:
    """``data`` decoded by geozl's C library into ``n`` samples of ``enc``, or None when it cannot."""
    from rumimm.codec import geozl_lib

    if struct or not geozl_lib.available():
        return None
    width = enc.storage_dtype.itemsize
    src = np.frombuffer(data, np.uint8)
    dst = np.empty((n * width + 7) // 8, np.uint64)  # 8-byte aligned, as the decoder needs
    if geozl_lib.decompress(src.ctypes.data, src.size, dst.ctypes.data, n * width, True) != n * width:
        return None
    arr = dst.view(np.uint8)[: n * width].view(enc.storage_dtype)
    if enc.subbyte:
        arr = np.bitwise_and(arr, np.uint8((1 << enc.bits_per_sample) - 1))
    arr.flags.writeable = False
    return arr

