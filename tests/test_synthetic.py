"""Tests of rumimm.synthetic: deterministic, EO-like scenes in every rumi dtype."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from rumimm.errors import RumiError
from rumimm.format.dtypes import DTYPES, encoding_for_dtype
from rumimm.synthetic import eo_scene


@pytest.mark.parametrize("name", sorted(DTYPES))
def test_every_rumi_dtype_gets_a_scene_of_the_requested_shape_and_dtype(name):
    a = eo_scene(3, 37, 29, DTYPES[name], seed=4)
    assert a.shape == (3, 37, 29)
    assert a.dtype == DTYPES[name]
    assert a.flags.c_contiguous


@pytest.mark.parametrize("name", sorted(DTYPES))
def test_identical_arguments_give_identical_bits_and_another_seed_differs(name):
    a = eo_scene(2, 40, 33, name, seed=7)
    b = eo_scene(2, 40, 33, name, seed=7)
    c = eo_scene(2, 40, 33, name, seed=8)
    assert a.view(np.uint8).tobytes() == b.view(np.uint8).tobytes()
    assert a.view(np.uint8).tobytes() != c.view(np.uint8).tobytes()


def test_the_default_scene_is_four_bands_of_512_by_512_uint16():
    a = eo_scene()
    assert a.shape == (4, 512, 512) and a.dtype == np.uint16


def test_uint16_holds_reflectance_digital_numbers_with_distinct_band_levels():
    a = eo_scene(4, 256, 256, "uint16")
    assert a.max() <= 10000
    means = a.reshape(4, -1).mean(axis=1)
    assert means.min() > 200 and means.max() < 5000
    assert means[3] > 2 * means[:3].max()  # near-infrared is brightest over land
    assert len(np.unique(a)) > 500


def test_float32_holds_reflectance_between_zero_and_one_without_nans():
    a = eo_scene(4, 128, 128, "float32")
    assert np.isfinite(a).all()
    assert a.min() >= 0.0 and a.max() <= 1.0
    assert len(np.unique(a)) > 0.5 * a.size  # continuous, not quantised DNs


def test_bands_are_spectrally_correlated_and_pixels_spatially_correlated():
    a = eo_scene(4, 256, 256, "float32").reshape(4, -1).astype(np.float64)
    r = np.corrcoef(a)
    assert r[0, 1] > 0.5 and r[1, 2] > 0.5
    img = a[0].reshape(256, 256)
    horizontal = np.corrcoef(img[:, :-1].ravel(), img[:, 1:].ravel())[0, 1]
    assert horizontal > 0.8


def test_signed_integers_carry_the_l2a_offset():
    u = eo_scene(2, 64, 64, "uint16", seed=3).astype(np.int32)
    s = eo_scene(2, 64, 64, "int16", seed=3).astype(np.int32)
    assert s.min() < 0
    assert np.array_equal(s, u - 1000)


@pytest.mark.parametrize("name", ["uint2", "uint4", "int2", "int4"])
def test_sub_byte_integers_stay_in_range_with_zero_high_bits(name):
    a = eo_scene(2, 64, 64, name)
    info = ml_dtypes.iinfo(a.dtype)
    v = a.astype(np.int16)
    assert v.min() >= info.min and v.max() <= info.max
    assert len(np.unique(v)) > 1
    bits = encoding_for_dtype(a.dtype).bits_per_sample
    assert not np.any(a.view(np.uint8) >> bits)


@pytest.mark.parametrize("name", ["float8_e4m3fn", "float8_e5m2", "float6_e2m3fn", "float6_e3m2fn", "float4_e2m1fn",
                                  "bfloat16"])
def test_ml_floats_are_finite_standardised_features(name):
    a = eo_scene(2, 64, 64, name).astype(np.float32)
    assert np.isfinite(a).all()
    assert a.min() < 0 < a.max()


def test_float8_e8m0_holds_positive_scale_factors_without_nans():
    a = eo_scene(2, 64, 64, "float8_e8m0fnu").astype(np.float32)
    assert np.isfinite(a).all() and (a > 0).all()


def test_bool_is_a_mask_with_both_values():
    a = eo_scene(3, 64, 64, "bool")
    assert a.dtype == np.bool_
    assert 0.1 < a.mean() < 0.9
    assert set(np.unique(a.view(np.uint8))) == {0, 1}


@pytest.mark.parametrize("name", ["complex_int16", "complex_int32", "complex_float16", "complex64", "complex128"])
def test_complex_scenes_have_a_varying_phase(name):
    a = eo_scene(1, 64, 64, name)
    if a.dtype.fields:
        re, im = a["real"].astype(np.float64), a["imag"].astype(np.float64)
    else:
        re, im = a.real, a.imag
    assert (re < 0).any() and (im < 0).any() and (im > 0).any()


def test_odd_shapes_including_a_single_pixel_work():
    assert eo_scene(1, 1, 1).shape == (1, 1, 1)
    assert eo_scene(5, 3, 1001, "float32").shape == (5, 3, 1001)
    assert eo_scene(6, 17, 5).shape == (6, 17, 5)  # more bands than the four spectra


@pytest.mark.parametrize("shape", [(0, 4, 4), (1, 0, 4), (1, 4, -1)])
def test_empty_or_negative_shapes_are_value_errors(shape):
    with pytest.raises(ValueError, match="must be >= 1"):
        eo_scene(*shape)


def test_a_dtype_without_a_rumi_encoding_is_refused():
    with pytest.raises(RumiError):
        eo_scene(1, 8, 8, "U4")
