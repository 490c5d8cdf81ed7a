"""Deterministic, EO-like synthetic scenes for tests, examples and benchmarks.

:func:`eo_scene` builds a ``(band, y, x)`` array that compresses like a real
multispectral scene: agricultural parcels with slanted edges, each of one of six
land-cover spectra, a fractal (1/f^beta) terrain field shared by every band, a
rougher fractal texture mixed per band, a flat "water" class with fractal
shorelines, and Gaussian sensor noise.  Spectra follow a Sentinel-2 order (blue,
green, red, near-infrared), repeated with a small shift for more bands.  One continuous
reflectance cube (float32, about 0..1) is synthesised and then cast into the requested
rumi dtype in the way data of that type usually looks (digital numbers, signed offsets, masks, normalised ML features,
complex SAR-like samples).  Everything is drawn from ``np.random.default_rng(seed)``
so identical arguments give identical arrays on one numpy build.
"""

from __future__ import annotations

import numpy as np

from rumimm.format.dtypes import DTYPES, encoding_for_dtype

__all__ = ["eo_scene"]

# Land-cover spectra (reflectance; blue, green, red, near-infrared): crop, ripe
# crop, bare soil, grass, built-up, forest.  Further bands cycle through the four
# columns with a small shift so no two bands are identical.
_COVER = np.array(
    [
        [0.030, 0.060, 0.040, 0.350],
        [0.050, 0.080, 0.090, 0.280],
        [0.090, 0.120, 0.160, 0.220],
        [0.040, 0.070, 0.060, 0.300],
        [0.100, 0.110, 0.120, 0.150],
        [0.020, 0.040, 0.030, 0.250],
    ],
    np.float32,
)
_WATER = (0.045, 0.040, 0.025, 0.012)
_BAND_GAIN = (0.020, 0.030, 0.045, 0.080)  # response to terrain and texture
# Sensor noise: Sentinel-2 MSI's on-orbit SNR is roughly 2x its 140..170 requirement
# at reference radiance (reflectance ~0.1..0.2), so about 0.0006..0.0009.
_BAND_NOISE = (0.0006, 0.0006, 0.0007, 0.0009)

_SHARED_BETA = 3.0  # power-spectrum slope of the terrain: smooth, large features
_TEXTURE_BETA = 2.0  # rougher texture, the classic 1/f^2 of natural images
_TERRAIN_WEIGHT = 0.5
_TEXTURE_WEIGHT = 0.2
_WATER_FRACTION = 0.08
_PARCEL_ROWS = (16, 112)  # parcel stripe height range, pixels
_PARCEL_COLS = (16, 160)  # parcel width range, pixels

_DN_SCALE = 10000.0  # reflectance 1.0 as a digital number (Sentinel-2 L2A style)


def _fractal_filter(height: int, width: int, beta: float) -> np.ndarray:
    """Amplitude filter f**(-beta/2) over the rfft2 half-plane, zero at DC."""
    fy = np.fft.fftfreq(height).astype(np.float32)[:, None]
    fx = np.fft.rfftfreq(width).astype(np.float32)[None, :]
    f = fy * fy + fx * fx
    f[0, 0] = 1.0
    np.sqrt(f, out=f)
    # f**(-beta/2) with square roots only, for the slopes used here (fast)
    if beta == 2.0:
        amp = np.reciprocal(f, out=f)
    elif beta == 3.0:
        amp = np.sqrt(f)
        amp *= f
        np.reciprocal(amp, out=amp)
    else:
        amp = f ** np.float32(-beta / 2.0)
    amp[0, 0] = 0.0
    return amp


def _fractal(rng: np.random.Generator, amp: np.ndarray, height: int, width: int) -> np.ndarray:
    """One zero-mean, unit-variance Gaussian random field with spectrum ``amp**2``."""
    spec = rng.standard_normal((*amp.shape, 2), dtype=np.float32).view(np.complex64)[..., 0]
    spec *= amp
    field = np.fft.irfft2(spec, s=(height, width)).astype(np.float32, copy=False)
    # a strided sample estimates the spread well enough and costs 1/16th
    std = float(field[::4, ::4].std())
    if std > 0:
        field *= np.float32(1.0 / std)
    return field


def _parcels(rng: np.random.Generator, height: int, width: int) -> tuple[np.ndarray, int]:
    """Parcel ids (int32, (height, width)) of a field pattern with slanted edges, and the count."""
    ids = np.empty((height, width), np.int32)
    x = np.arange(width, dtype=np.float32)
    y0, base = 0, 0
    while y0 < height:
        y1 = min(height, y0 + int(rng.integers(*_PARCEL_ROWS)))
        widths = rng.integers(*_PARCEL_COLS, size=width // _PARCEL_COLS[0] + 2)
        cuts = np.cumsum(widths).astype(np.float32)
        shear = np.float32(rng.uniform(-0.4, 0.4))
        dy = np.arange(y1 - y0, dtype=np.float32)[:, None]
        ids[y0:y1] = base + np.searchsorted(cuts, x[None, :] + shear * dy)
        base += len(cuts) + 1
        y0 = y1
    return ids, base


def _reflectance(bands: int, height: int, width: int, rng: np.random.Generator) -> np.ndarray:
    """The continuous reflectance cube, float32, shape (bands, height, width)."""
    terrain = _fractal(rng, _fractal_filter(height, width, _SHARED_BETA), height, width)
    texture_amp = _fractal_filter(height, width, _TEXTURE_BETA)
    # two texture fields mixed at a band-specific angle: band-specific detail
    # that is still low-dimensional across bands, as real spectra are
    tex_a = _fractal(rng, texture_amp, height, width)
    tex_b = _fractal(rng, texture_amp, height, width)
    del texture_amp
    cut = np.float32(np.quantile(terrain[::4, ::4], _WATER_FRACTION))
    water = terrain < cut
    ids, n_parcels = _parcels(rng, height, width)
    cover = rng.integers(0, len(_COVER), size=n_parcels)
    brightness = rng.uniform(0.85, 1.15, size=n_parcels).astype(np.float32)
    out = np.empty((bands, height, width), np.float32)
    tmp = np.empty((height, width), np.float32)
    for b in range(bands):
        k = b % _COVER.shape[1]
        shift = np.float32(1.0 + 0.05 * (b // _COVER.shape[1]))
        gain = _BAND_GAIN[k] * shift
        angle = 0.7 * b + 0.3
        band = out[b]
        lut = _COVER[cover, k] * brightness * shift
        np.take(lut, ids, out=band)
        np.multiply(terrain, np.float32(gain * _TERRAIN_WEIGHT), out=tmp)
        band += tmp
        np.multiply(tex_a, np.float32(gain * _TEXTURE_WEIGHT * np.cos(angle)), out=tmp)
        band += tmp
        np.multiply(tex_b, np.float32(gain * _TEXTURE_WEIGHT * np.sin(angle)), out=tmp)
        band += tmp
        np.copyto(band, np.float32(_WATER[k] * shift), where=water)
        noise = rng.standard_normal((height, width), dtype=np.float32)
        noise *= np.float32(_BAND_NOISE[k])
        band += noise
    np.clip(out, 0.0, 1.0, out=out)
    return out


def _phase(rng: np.random.Generator, height: int, width: int) -> np.ndarray:
    """A smooth interferometric-like phase in radians, wrapping a few times."""
    amp = _fractal_filter(height, width, 3.0)
    return _fractal(rng, amp, height, width) * np.float32(np.pi * 2.0)


def _round_clip(x: np.ndarray, lo: float, hi: float, dtype) -> np.ndarray:
    """Round, clip and cast; ``x`` is a temporary and is overwritten."""
    np.rint(x, out=x)
    np.clip(x, lo, hi, out=x)
    return x.astype(dtype)


def _cast(refl: np.ndarray, dtype: np.dtype, rng: np.random.Generator) -> np.ndarray:
    """Cast the reflectance cube into ``dtype`` the way such data usually looks."""
    name = encoding_for_dtype(dtype).name
    if name == "bool":
        # a per-band mask, e.g. "bright" pixels; thresholds differ per band
        q = np.quantile(refl.reshape(refl.shape[0], -1), 0.7, axis=1).astype(np.float32)
        return refl > q[:, None, None]
    if name in ("uint16", "uint32", "uint64"):
        return _round_clip(refl * np.float32(_DN_SCALE), 0, _DN_SCALE, dtype)
    if name in ("int16", "int32", "int64"):
        # the L2A convention of a -1000 radiometric offset gives signed values
        dn = refl * np.float32(_DN_SCALE)
        dn -= np.float32(1000.0)
        return _round_clip(dn, -1000, _DN_SCALE - 1000, dtype)
    if name == "uint8":
        return _round_clip(refl * np.float32(255.0 / 0.5), 0, 255, dtype)
    if name == "int8":
        return _round_clip(refl * np.float32(255.0 / 0.5) - 128.0, -128, 127, dtype)
    if name in ("uint2", "uint4", "int2", "int4"):
        import ml_dtypes  # only these types need it (its import is slow: rumimm.format.dtypes)

        info = ml_dtypes.iinfo(dtype)
        levels = info.max - info.min + 1
        q = refl * np.float32(levels / 0.5) + np.float32(info.min)
        return _round_clip(q, info.min, info.max, np.int8).astype(dtype)
    if name in ("float16", "float32", "float64"):
        return refl.astype(dtype)
    if name in ("bfloat16", "float8_e4m3fn", "float8_e5m2", "float6_e2m3fn", "float6_e3m2fn", "float4_e2m1fn"):
        # ML inputs: per-band standardised features, clipped into the format's range
        flat = refl.reshape(refl.shape[0], -1)
        mean = flat.mean(axis=1, dtype=np.float64).astype(np.float32)[:, None, None]
        std = flat.std(axis=1, dtype=np.float64).astype(np.float32)[:, None, None]
        z = (refl - mean) / np.maximum(std, np.float32(1e-12))
        import ml_dtypes

        hi = float(ml_dtypes.finfo(dtype).max)
        np.clip(z, -hi, hi, out=z)
        return z.astype(dtype)
    if name == "float8_e8m0fnu":
        # exponent-only scale factors: positive powers of two, no zero
        import ml_dtypes

        info = ml_dtypes.finfo(dtype)
        return np.clip(refl, float(info.tiny), float(info.max)).astype(dtype)
    # complex: SAR-like samples, amplitude from the scene, a smooth phase
    phase = _phase(rng, refl.shape[1], refl.shape[2])
    re = refl * np.cos(phase)
    im = refl * np.sin(phase)
    if name in ("complex_int16", "complex_int32"):
        out = np.empty(refl.shape, dtype)
        comp = out.dtype["real"]
        out["real"] = _round_clip(re * np.float32(_DN_SCALE), -_DN_SCALE, _DN_SCALE, comp)
        out["imag"] = _round_clip(im * np.float32(_DN_SCALE), -_DN_SCALE, _DN_SCALE, comp)
        return out
    if name == "complex_float16":
        out = np.empty(refl.shape, dtype)
        out["real"] = re.astype(np.float16)
        out["imag"] = im.astype(np.float16)
        return out
    if name == "complex64":
        return (re + np.complex64(1j) * im).astype(np.complex64)
    if name == "complex128":
        return re.astype(np.float64) + 1j * im.astype(np.float64)
    raise AssertionError(f"no cast for encoding {name}")  # pragma: no cover - table is closed


def eo_scene(bands: int = 4, height: int = 512, width: int = 512, dtype="uint16", seed: int = 0) -> np.ndarray:
    """Return a deterministic, EO-like multispectral scene.

    Parameters
    ----------
    bands, height, width : int
        Output shape ``(bands, height, width)``, axes (band, y, x).  Each must be
        at least 1.
    dtype : dtype-like or str
        Any rumi sample dtype, or its rumi name (``rumimm.format.dtypes.DTYPES``).  ``uint16``/``uint32``/
        ``uint64`` hold reflectance digital numbers 0..10000; signed integers the
        same with a -1000 offset; ``uint8``/``int8`` a stretched visual product;
        ``float16``/``float32``/``float64`` continuous reflectance about 0..1;
        ``bfloat16`` and the float8/6/4 formats per-band standardised features;
        ``float8_e8m0fnu`` positive scale factors; sub-byte integers quantised
        classes; ``bool`` a per-band brightness mask; complex types SAR-like
        samples with a smooth phase.
    seed : int
        Seed for ``np.random.default_rng``, the only source of randomness.

    Returns
    -------
    numpy.ndarray
        C-contiguous array of shape ``(bands, height, width)`` and ``dtype``.

    Examples
    --------
    >>> eo_scene(4, 256, 256).shape
    (4, 256, 256)
    """
    bands, height, width = int(bands), int(height), int(width)
    if bands < 1 or height < 1 or width < 1:
        raise ValueError(f"bands, height and width must be >= 1, got ({bands}, {height}, {width})")
    if isinstance(dtype, str) and dtype in DTYPES:
        dtype = DTYPES[dtype]  # rumi names such as "complex_int16"
    dt = encoding_for_dtype(dtype).dtype
    rng = np.random.default_rng(seed)
    refl = _reflectance(bands, height, width, rng)
    return np.ascontiguousarray(_cast(refl, dt, rng))
