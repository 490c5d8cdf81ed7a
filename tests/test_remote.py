"""rumi files read from URIs: index, validate and images over HTTP and S3 on 127.0.0.1.

The files are written by rumimm and served whole by the test servers, which count the
requests each call costs.
"""

from __future__ import annotations

import numpy as np
import pytest

import rumimm
from rumimm.errors import FormatError
from rumimm.reader.validate import CHECKED_HEADERS, CHECKED_MAGIC, CHECKED_PROFILE, PREFIX_BYTES

pytest.importorskip("obstore")  # the "remote" extra; CI installs it

from servers import MotoS3, RangeServer

FAST = {"max_retries": 2, "retry_timeout": 3, "timeout": 2, "connect_timeout": 1,
        "init_backoff": 0.01, "max_backoff": 0.05}


@pytest.fixture(scope="module")
def http():
    srv = RangeServer().start()
    yield srv
    srv.stop()


@pytest.fixture
def server(http):
    http.reset()
    yield http
    http.reset()


@pytest.fixture(scope="module")
def moto():
    srv = MotoS3().start()
    yield srv
    srv.stop()


def _scene(tmp_path_factory, name, shape, tile, unit="tile"):
    rng = np.random.default_rng(sum(shape) + tile)
    a = rng.integers(0, 4000, shape).astype(np.uint16)
    path = tmp_path_factory.mktemp("remote") / name
    blob = rumimm.write(path, a, tile=tile, unit=unit)
    return a, path, blob


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    """(array, path, blob): 3 bands, 700 x 900, 256 tiles with ragged edges: 36 frames."""
    return _scene(tmp_path_factory, "small.rumi", (3, 700, 900), 256)


@pytest.fixture(scope="module")
def many(tmp_path_factory):
    """A file whose IFD values run past PREFIX_BYTES: 13 bands of 40 x 40 tiles of 16 px."""
    return _scene(tmp_path_factory, "many.rumi", (13, 640, 640), 16)


def test_index_of_a_url_costs_one_request(server, small):
    _, path, blob = small
    url = server.put("small.rumi", path.read_bytes())
    assert rumimm.index(url) == blob
    assert [r.range for r in server.requests] == [f"bytes=0-{PREFIX_BYTES - 1}"]


def test_index_of_a_file_with_many_frames_costs_two_requests(server, many):
    _, path, blob = many
    url = server.put("many.rumi", path.read_bytes())
    assert rumimm.Header.parse(blob).n_frames * 12 > PREFIX_BYTES
    assert rumimm.index(url, storage_options=FAST) == blob
    assert server.count("GET") == 2 and server.count("HEAD") == 0


def test_index_of_a_truncated_object_names_the_url(server, small):
    _, path, _ = small
    url = server.put("cut.rumi", path.read_bytes()[:-10])
    with pytest.raises(FormatError, match=r"cut\.rumi: last frame ends at byte \d+ but the file has"):
        rumimm.index(url, storage_options=FAST)


def test_validate_of_a_url_checks_every_frame_in_spans(server, many, monkeypatch):
    _, path, blob = many
    data = path.read_bytes()
    url = server.put("many.rumi", data)
    monkeypatch.setattr("rumimm.reader.validate._Spans.SPAN_BYTES", 100_000)
    rep = rumimm.validate(url, header=blob, storage_options=FAST)
    assert rep.ok, str(rep)
    assert rep.checked[:3] == [CHECKED_PROFILE, CHECKED_MAGIC, CHECKED_HEADERS]
    spans = -(-len(data) // 100_000)
    assert server.count("GET") <= 2 + 2 * (spans + 1)  # the prefix, then each pass reads the object once


def test_validate_of_a_url_reports_a_corrupt_frame(server, small):
    _, path, _ = small
    data = bytearray(path.read_bytes())
    hdr = rumimm.Header.parse(rumimm.index(path))
    k = 5
    start = int(hdr.offsets[k])
    data[start + 8:start + 40] = bytes(32)
    url = server.put("bad.rumi", bytes(data))
    rep = rumimm.validate(url, decode=True, storage_options=FAST)
    assert not rep.ok and any("frame 5" in v for v in rep.violations)


def test_index_of_an_s3_object_through_the_environment(moto, monkeypatch, small):
    _, path, blob = small
    for k, v in moto.env.items():
        monkeypatch.setenv(k, v)
    c = moto.client()
    c.create_bucket(Bucket="rumimm-index")
    c.put_object(Bucket="rumimm-index", Key="s/small.rumi", Body=path.read_bytes())
    moto.reset()
    assert rumimm.index("s3://rumimm-index/s/small.rumi") == blob
    assert moto.count("GET") == 1 and moto.count("HEAD") == 0
