"""Byte stores: local files, and remote objects over HTTP and S3 (moto) on 127.0.0.1.

The servers count every request, so the tests pin what a read costs: merged ranges,
no HEAD, one GET per merged range, and each fault ending in the right bytes or a
RemoteError naming the URI (never the query string or credentials).
"""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest

from rumimm.errors import FormatError
from rumimm.reader.remote import RemoteError, RemoteStore, is_remote, plan_requests, public_name
from rumimm.reader.store import LocalStore, open_store

pytest.importorskip("obstore")  # the "remote" extra; CI installs it

from servers import MotoS3

FAST = {"max_retries": 2, "retry_timeout": 3, "timeout": 1, "connect_timeout": 1,
        "init_backoff": 0.01, "max_backoff": 0.05}
DATA = np.random.default_rng(20).integers(0, 256, 3_000_000, dtype=np.uint8).tobytes()


@pytest.fixture
def server(http):
    http.reset()
    http.latency = 0.0
    http.etags = True
    yield http
    http.reset()


@pytest.fixture(scope="module")
def moto():
    pytest.importorskip("moto")
    srv = MotoS3().start()
    yield srv
    srv.stop()


def _url(server, name="scene.rumi", data=DATA):
    return server.put(name, data)


# -- planning -----------------------------------------------------------------------

def test_ranges_closer_than_the_threshold_share_a_request():
    groups = plan_requests([(0, 10), (15, 5), (100, 10), (10_000, 1)], coalesce=50)
    assert [(s, e) for s, e, _ in groups] == [(0, 20), (100, 110), (10_000, 10_001)]
    assert [m for _, _, m in groups] == [[0, 1], [2], [3]]


def test_planning_keeps_every_byte_and_no_request_overlaps_another():
    rng = np.random.default_rng(1)
    for _ in range(200):
        n = int(rng.integers(1, 30))
        ranges = [(int(rng.integers(0, 10_000)), int(rng.integers(0, 500))) for _ in range(n)]
        coalesce = int(rng.integers(0, 2000))
        groups = plan_requests(ranges, coalesce)
        seen = sorted(i for _, _, m in groups for i in m)
        assert seen == [i for i, (o, k) in enumerate(ranges) if k > 0]
        for s, e, members in groups:
            for i in members:
                assert s <= ranges[i][0] and ranges[i][0] + ranges[i][1] <= e
        for (s0, e0, _), (s1, e1, _) in itertools.pairwise(groups):
            assert s1 - e0 > coalesce or e1 - s0 > (64 << 20)  # not mergeable


# -- local ---------------------------------------------------------------------------

def test_a_local_store_reads_ranges_and_maps_the_file(tmp_path):
    p = tmp_path / "a.bin"
    p.write_bytes(DATA[:5000])
    st = open_store(p)
    assert isinstance(st, LocalStore) and st.size == 5000
    a, b, c = st.read_ranges([(0, 10), (4990, 10), (7, 0)])
    assert bytes(a) == DATA[:10] and bytes(b) == DATA[4990:5000] and c.size == 0
    assert bytes(st.mapping()[100:200]) == DATA[100:200]
    assert st.read(4990, 20) == DATA[4990:5000]  # read: fewer at the end
    with pytest.raises(FormatError, match=r"a.bin"):
        st.read_ranges([(4990, 20)])  # read_ranges: exactly, or FormatError
    st.close()


def test_storage_options_are_for_remote_uris_only(tmp_path):
    p = tmp_path / "b.bin"
    p.write_bytes(b"x" * 10)
    with pytest.raises(ValueError, match="remote URIs only"):
        open_store(p, {"region": "x"})
    assert is_remote("s3://b/k") and is_remote("https://h/k") and not is_remote(str(p))
    assert isinstance(open_store("s3://b/k.rumi"), RemoteStore)  # no request yet


# -- HTTP ------------------------------------------------------------------------------

def test_a_remote_store_sends_one_get_per_merged_range_and_no_head(server):
    st = RemoteStore(_url(server), FAST)
    assert server.requests == [] and st.version is None  # opening sends nothing
    ranges = [(0, 100), (200, 50), (2_500_000, 10), (300, 0)]
    out = st.read_ranges(ranges)
    assert [bytes(o) for o in out] == [DATA[o:o + n] for o, n in ranges]
    assert server.count("GET") == 2 and server.count("HEAD") == 0
    assert sorted(r.range for r in server.requests) == ["bytes=0-249", "bytes=2500000-2500009"]
    assert st.version == server.objects["/scene.rumi"][1] and st.size == len(DATA)


def test_coalesce_zero_merges_only_touching_ranges(server):
    st = RemoteStore(_url(server), {**FAST, "coalesce": 0})
    st.read_ranges([(0, 10), (10, 10), (21, 10), (40, 10)])
    assert server.count("GET") == 3


def test_auto_coalescing_merges_what_one_round_trip_of_the_link_carries(server):
    st = RemoteStore(_url(server), {**FAST, "coalesce": "auto"})
    link = st.link
    link.reset()
    try:
        ranges = [(0, 100), (2_000_000, 10)]  # 2 MB apart
        st.read_ranges(ranges)
        assert server.count("GET") == 2  # nothing measured yet: the 1 MiB default
        server.reset()
        link.reset()
        link.note(0.05, 1 << 20, 0.06)  # 50 ms round trip, then 1 MiB in 10 ms: 100 MiB/s
        link.note(0.07, 100, 0.07)  # a queued answer: the round trip stays the shortest seen
        assert link.rtt == 0.05 and link.coalesce() == 5 << 20
        assert [bytes(o) for o in st.read_ranges(ranges)] == [DATA[0:100], DATA[2_000_000:2_000_010]]
        assert server.count("GET") == 1
        link.reset()
        link.note(0.001, 1 << 20, 0.011)  # a fast link: never below the default
        assert link.coalesce() == 1 << 20
        link.reset()
        link.note(10.0, 1 << 30, 11.0)  # never above a quarter of the largest request
        assert link.coalesce() == (64 << 20) // 4
    finally:
        link.reset()


def test_the_link_is_measured_from_the_answers(server):
    st = RemoteStore(_url(server), {**FAST, "coalesce": "auto"})
    st.link.reset()
    server.latency = 0.05
    try:
        st.read_ranges([(0, 100)])
        assert st.link.rtt >= 0.05 and st.link.rate is None  # 100 bytes say nothing of throughput
        st.read_ranges([(0, 1_000_000)])
        assert st.link.rate > 0 and st.link.coalesce() >= 1 << 20
    finally:
        server.latency = 0.0
        st.link.reset()


def test_later_requests_carry_the_etag_of_the_first_answer(server):
    st = RemoteStore(_url(server), FAST)
    st.read(0, 10)
    st.read(100, 10)
    first, second = server.requests
    assert first.if_match is None and second.if_match == st.version


def test_the_requests_of_one_call_are_in_flight_together(server):
    server.latency = 0.2
    st = RemoteStore(_url(server), {**FAST, "coalesce": 0})
    ranges = [(i * 100_000, 10) for i in range(8)]
    out = st.read_ranges(ranges)
    assert [bytes(o) for o in out] == [DATA[o:o + n] for o, n in ranges]
    assert server.max_in_flight >= 4


def test_iter_ranges_yields_each_range_once_as_its_request_completes(server):
    st = RemoteStore(_url(server), {**FAST, "coalesce": 0})
    ranges = [(i * 100_000, 10 + i) for i in range(6)] + [(5, 0)]
    got = dict(st.iter_ranges(ranges))
    assert sorted(got) == list(range(7))
    assert all(bytes(got[i]) == DATA[o:o + n] for i, (o, n) in enumerate(ranges))
    assert server.count("GET") == 6


def test_iter_ranges_raises_the_first_failure(server):
    st = RemoteStore(_url(server), {**FAST, "coalesce": 0})
    server.faults[:] = ["404"]
    with pytest.raises(RemoteError, match="not found"):
        list(st.iter_ranges([(0, 10), (500_000, 10)]))


def test_python_threads_run_while_a_remote_read_waits(server):
    server.latency = 0.3
    st = RemoteStore(_url(server), FAST)
    stop = threading.Event()
    ticks = [0]

    def spin():
        while not stop.is_set():
            ticks[0] += 1

    t = threading.Thread(target=spin)
    t.start()
    try:
        st.read(0, 10)
    finally:
        stop.set()
        t.join()
    assert ticks[0] > 10_000  # the waiting read holds no GIL


def test_size_without_a_response_costs_one_head(server):
    st = RemoteStore(_url(server), FAST)
    assert st.size == len(DATA)
    assert server.count("HEAD") == 1 and server.count("GET") == 0
    st.read(0, 10)
    assert server.requests[-1].if_match == st.version


@pytest.mark.parametrize("fault", ["500", "503", "429", "reset", "short", "stall"])
def test_a_transient_fault_is_retried_and_gives_the_right_bytes(server, fault):
    server.stall = 2.0  # beyond the 1 s timeout
    st = RemoteStore(_url(server), FAST)
    server.faults[:] = [fault]
    assert bytes(st.read(1000, 5000)) == DATA[1000:6000]
    assert server.count("GET") == 2


@pytest.mark.parametrize(("fault", "reason"), [("500", "HTTP 500"), ("429", "HTTP 429"), ("reset", "connection"),
                                           ("stall", "timed out|connection")])
def test_a_fault_that_persists_ends_in_a_remote_error_after_bounded_retries(server, fault, reason):
    server.stall = 1.5
    st = RemoteStore(_url(server), FAST)
    server.faults[:] = [fault] * 10
    with pytest.raises(RemoteError, match=rf"scene\.rumi: GET bytes 0\.\.10 failed \(({reason})"):
        st.read(0, 10)
    assert server.count("GET") == FAST["max_retries"] + 1


@pytest.mark.parametrize(("fault", "message"), [
    ("403", r"scene\.rumi: access denied \(HTTP 403\)"),
    ("404", r"scene\.rumi: not found \(HTTP 404\)"),
    ("ignore-range", r"scene\.rumi: the server answered a ranged GET .* with the whole object"),
    ("lie", r"scene\.rumi: the server answered GET bytes 1000\.\.2000 with bytes 1000\.\.1500"),
])
def test_a_final_answer_is_a_remote_error_without_retries(server, fault, message):
    st = RemoteStore(_url(server), FAST)
    server.faults[:] = [fault]
    with pytest.raises(RemoteError, match=message):
        st.read(1000, 1000)
    assert server.count("GET") == 1


def test_a_short_body_that_persists_is_a_remote_error(server):
    st = RemoteStore(_url(server), FAST)
    server.faults[:] = ["short"] * 10
    with pytest.raises(RemoteError, match=r"scene\.rumi: GET bytes 0\.\.4000 failed"):
        st.read(0, 4000)
    assert 2 <= server.count("GET") <= FAST["max_retries"] + 1


def test_read_gives_fewer_bytes_at_the_end_in_one_request(server):
    st = RemoteStore(_url(server, "tiny.rumi", DATA[:300]), FAST)
    assert st.read(0, 65536) == DATA[:300] and st.size == 300
    assert server.count("GET") == 1 and server.count("HEAD") == 0
    assert st.read(100, 100) == DATA[100:200] and st.read(250, 100) == DATA[250:300] and st.read(400, 10) == b""
    dst = np.empty(20, np.uint8)
    st.read_into(dst, 10)
    assert bytes(dst) == DATA[10:30]


def test_a_range_past_the_end_of_the_object_is_refused(server):
    st = RemoteStore(_url(server, "small.rumi", DATA[:1000]), FAST)
    with pytest.raises(RemoteError, match=r"small\.rumi: expected 100 bytes at offset 950, the server sent 50"):
        st.read_ranges([(950, 100)])
    with pytest.raises(FormatError, match=r"small\.rumi: bytes 990\.\.1090 are past the end"):
        st.read_ranges([(990, 100)])  # the size is known now: refused before any request
    assert server.count("GET") == 1


def test_an_object_replaced_while_open_is_refused(server):
    url = _url(server, "changing.rumi")
    st = RemoteStore(url, FAST)
    st.read(0, 10)
    server.put("changing.rumi", DATA[::-1])
    with pytest.raises(RemoteError, match=r"changing\.rumi: the object changed since it was opened"):
        st.read(0, 10)


def test_a_server_without_etags_is_read_unpinned(server):
    server.etags = False
    st = RemoteStore(_url(server), FAST)
    assert bytes(st.read(5, 5)) == DATA[5:10] and st.version is None
    assert server.requests[-1].if_match is None


def test_messages_never_show_the_query_string_or_credentials(server):
    _url(server)
    url = server.url.replace("http://", "http://user:hunter2@") + "/scene.rumi?X-Amz-Signature=SECRET"
    st = RemoteStore(url, FAST)
    assert st.name == f"{server.url}/scene.rumi"
    server.faults[:] = ["403"]
    with pytest.raises(RemoteError) as info:
        st.read(0, 10)
    assert "SECRET" not in str(info.value) and "hunter2" not in str(info.value)
    assert public_name("s3://k:s@b/x.rumi?versionId=3") == "s3://b/x.rumi"


def test_bad_storage_options_are_value_errors(server):
    with pytest.raises(ValueError, match="coalesce must be an integer >= 0"):
        RemoteStore(_url(server), {"coalesce": -1})
    with pytest.raises(ValueError, match="coalesce must be an integer >= 0"):
        RemoteStore(_url(server), {"coalesce": "fast"})
    with pytest.raises(ValueError, match="timeout must be seconds > 0"):
        RemoteStore(_url(server), {"timeout": 0})
    with pytest.raises(ValueError, match=r"\['region'\] do not apply to an HTTP URL"):
        RemoteStore(_url(server), {"region": "x"})


# -- S3 (moto) ---------------------------------------------------------------------------

def test_s3_through_the_environment_reads_ranges_without_head(moto, monkeypatch):
    for k, v in moto.env.items():
        monkeypatch.setenv(k, v)
    c = moto.client()
    c.create_bucket(Bucket="rumimm-env")
    c.put_object(Bucket="rumimm-env", Key="tiles/scene.rumi", Body=DATA)
    moto.reset()
    st = open_store("s3://rumimm-env/tiles/scene.rumi", {"max_retries": 1})
    out = st.read_ranges([(0, 100), (150, 100), (2_000_000, 10)])
    assert [bytes(o) for o in out] == [DATA[:100], DATA[150:250], DATA[2_000_000:2_000_010]]
    assert moto.count("GET") == 2 and moto.count("HEAD") == 0
    assert {r.path for r in moto.requests} == {"/rumimm-env/tiles/scene.rumi"}
    assert st.version == c.head_object(Bucket="rumimm-env", Key="tiles/scene.rumi")["ETag"]


def test_s3_through_storage_options_and_its_errors(moto, monkeypatch):
    for k in moto.env:
        monkeypatch.delenv(k, raising=False)
    c = moto.client()
    c.create_bucket(Bucket="rumimm-opts")
    c.put_object(Bucket="rumimm-opts", Key="a.rumi", Body=DATA[:10_000])
    opts = {"endpoint": moto.endpoint, "access_key_id": "testing", "secret_access_key": "testing",
            "region": "us-east-1", "allow_http": True, **FAST}
    st = open_store("s3://rumimm-opts/a.rumi", opts)
    assert bytes(st.read(10, 20)) == DATA[10:30]
    c.put_object(Bucket="rumimm-opts", Key="a.rumi", Body=DATA[10_000:20_000])
    with pytest.raises(RemoteError, match=r"s3://rumimm-opts/a\.rumi: the object changed since it was opened"):
        st.read(10, 20)
    with pytest.raises(RemoteError, match=r"s3://rumimm-opts/missing\.rumi: not found"):
        open_store("s3://rumimm-opts/missing.rumi", opts).read(0, 10)


# -- fork ------------------------------------------------------------------------------

_FORK = """
import os, sys
sys.path.insert(0, {tests!r})
from servers import RangeServer
from rumimm.reader.remote import RemoteStore, RemoteError
srv = RangeServer().start()
url = srv.put("f.rumi", b"x" * 1000)
opts = {{"max_retries": 0, "timeout": 2}}
if {parent_reads}:
    RemoteStore(url, opts).read(0, 10)
st = RemoteStore(url, opts)
pid = os.fork()
if pid == 0:
    try:
        print("child read", len(RemoteStore(url, opts).read(0, 10)), flush=True)
    except RemoteError as exc:
        print("child error", exc, flush=True)
    os._exit(0)
os.waitpid(pid, 0)
srv.stop()
"""


@pytest.mark.parametrize("parent_reads", [False, True])
def test_a_forked_child_reads_unless_the_parent_already_did(parent_reads):
    code = _FORK.format(tests=os.path.dirname(__file__), parent_reads=parent_reads)
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], check=False, capture_output=True, text=True,
                         timeout=60, cwd=os.getcwd())
    assert out.returncode == 0, out.stderr
    if parent_reads:
        assert "child error" in out.stdout and "forked from one that had already read remotely" in out.stdout
    else:
        assert "child read 10" in out.stdout


def test_a_server_that_is_gone_is_a_remote_error_within_the_retry_bound():
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now
    st = RemoteStore(f"http://127.0.0.1:{port}/gone.rumi", FAST)
    with pytest.raises(RemoteError, match=r"gone\.rumi: GET bytes 0\.\.10 failed \((connection failed|timed out)"):
        st.read_ranges([(0, 10)])
