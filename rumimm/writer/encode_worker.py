"""The encoding worker process: compresses frames in shared memory for one writer process.

Started by :mod:`rumimm.writer.encode_pool` as ``python -c`` with a socket inherited from the
writer; it never imports the user's ``__main__`` (no script runs twice).  It dies with its
parent: the socket reaches end-of-file when the parent is gone, a watchdog thread sees the
parent pid change, and where the parent started it from its main thread the kernel sends
SIGKILL on the parent's death (``PR_SET_PDEATHSIG``).

Messages are length-prefixed pickles (see :func:`send_message`).  ``("job", args)``
carries the shared-memory file descriptor and the :class:`~rumimm.writer.frame_job.JobArgs`;
``("task", frames, end, flag)`` asks to compress frames ``(k, shape, offset)`` laid end to
end in that memory and store the results over the consumed input; the reply is
``("ok", sizes, inline, seconds)``, ``("error", exception)``, or ``("unavailable", reason)``
when the job could not be rebuilt here (the frames are untouched).
"""

from __future__ import annotations

import os
import pickle
import signal
import socket
import struct
import sys
import threading
import time

_LEN = struct.Struct("<Q")
_NO_SIGPIPE = getattr(socket, "MSG_NOSIGNAL", 0)  # a dead peer is an error, never a SIGPIPE
_PR_SET_PDEATHSIG = 1


def pack_message(obj) -> tuple[bytes, bytes]:
    """A message as (length prefix, pickle)."""
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    return _LEN.pack(len(data)), data


def send_message(sock: socket.socket, obj, fds=()) -> None:
    """Send one pickled message (and file descriptors with its first byte)."""
    head, data = pack_message(obj)
    if fds:
        socket.send_fds(sock, [head], list(fds), _NO_SIGPIPE)
    else:
        sock.sendall(head, _NO_SIGPIPE)
    sock.sendall(data, _NO_SIGPIPE)


def _recv_exact(sock: socket.socket, n: int, into: bytearray | None = None) -> bytearray:
    buf = into if into is not None else bytearray(n)
    view = memoryview(buf)
    got = len(buf) - n
    while got < len(buf):
        r = sock.recv_into(view[got:])
        if r == 0:
            raise EOFError("the peer closed the connection")
        got += r
    return buf


def recv_message(sock: socket.socket, with_fds: bool = False):
    """Receive one message: (object, list of received fds)."""
    fds: list[int] = []
    if with_fds:
        head, fds, _, _ = socket.recv_fds(sock, _LEN.size, 4)
        if not head:
            raise EOFError("the peer closed the connection")
        head = bytearray(head)
        if len(head) < _LEN.size:
            grown = bytearray(_LEN.size)
            grown[: len(head)] = head
            head = _recv_exact(sock, _LEN.size - len(head), grown)
    else:
        head = _recv_exact(sock, _LEN.size)
    (n,) = _LEN.unpack(head)
    return pickle.loads(_recv_exact(sock, n)), fds


def _die_with_parent(parent: int, kernel_signal: bool) -> None:
    if kernel_signal and sys.platform.startswith("linux"):
        try:
            import ctypes

            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        except (OSError, AttributeError):
            pass
    if os.getppid() != parent:  # the parent died before the signal was armed
        os._exit(0)

    def watch():
        while os.getppid() == parent:
            time.sleep(0.2)
        os._exit(0)

    threading.Thread(target=watch, name="rumimm-parent-watch", daemon=True).start()


def _run_task(job, buf, frames, end: int, flag: int):
    import numpy as np

    t0 = time.perf_counter()
    dt = job.enc.dtype
    out = []
    for k, shape, off in frames:
        frame = np.ndarray(shape, dtype=dt, buffer=buf, offset=off)
        out.append(job.encode(k, frame))  # verified too, while its input is intact
        del frame
    buf[flag] = 1  # from here on the input is overwritten
    pos = frames[0][2]
    inline = {}
    for i, data in enumerate(out):
        n = len(data)
        limit = frames[i + 1][2] if i + 1 < len(frames) else end
        if pos + n <= limit:
            buf[pos : pos + n] = data
            pos += n
        else:
            inline[i] = data  # would reach the next frame's input: sent back in the reply
    return ("ok", [len(d) for d in out], inline, time.perf_counter() - t0)


def _send_replies(sock: socket.socket, replies) -> None:
    # a thread of its own, so that reading the next task never waits for the writer to
    # read a large reply: the writer sends its next row before it reads the last answer
    while True:
        parts = replies.get()
        try:
            for part in parts:
                sock.sendall(part, _NO_SIGPIPE)
        except OSError:  # the writer is gone
            os._exit(0)


def _reply(obj) -> tuple[bytes, bytes]:
    try:
        return pack_message(obj)
    except (pickle.PicklingError, TypeError, AttributeError):  # an exception that does not pickle
        return pack_message(("error", RuntimeError(f"{type(obj[1]).__name__}: {obj[1]}")))


def serve(sock: socket.socket) -> None:
    """Answer jobs and tasks until the parent closes the socket."""
    import mmap
    import queue

    from rumimm.writer.frame_job import FrameJob

    replies: queue.SimpleQueue = queue.SimpleQueue()
    threading.Thread(target=_send_replies, args=(sock, replies), name="rumimm-replies", daemon=True).start()
    job = job_error = None
    mem = None
    while True:
        try:
            msg, fds = recv_message(sock, with_fds=True)
        except (EOFError, ConnectionError):
            return
        if msg[0] == "job":
            if mem is not None:
                try:
                    mem.close()
                except BufferError:  # a view is still referenced; the mapping goes with it
                    pass
            job = job_error = None
            try:
                mem = mmap.mmap(fds[0], os.fstat(fds[0]).st_size)
                sys.path[:] = msg[2]  # the writer's, so a codec from the user's modules unpickles
                job = FrameJob(pickle.loads(msg[1]))
            except Exception as exc:
                job_error = f"{type(exc).__name__}: {exc}"
            finally:
                for fd in fds:
                    os.close(fd)
            continue
        if job is None:  # the frames are intact: the writer compresses them itself
            replies.put(_reply(("unavailable", job_error or "task before job")))
            continue
        try:
            reply = _run_task(job, memoryview(mem), *msg[1:])
        except Exception as exc:
            exc.__traceback__ = None  # the traceback would pin the shared memory
            reply = ("error", exc)
        replies.put(_reply(reply))
        del reply


def main(argv: list[str]) -> None:
    fd, parent, kernel_signal = int(argv[0]), int(argv[1]), argv[2] == "1"
    _die_with_parent(parent, kernel_signal)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C goes to the writer, which cancels
    serve(socket.socket(fileno=fd))
