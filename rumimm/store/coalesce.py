"""Which byte ranges share one request: fixed (``coalesce`` bytes) or measured from the link (:class:`Link`)."""

from __future__ import annotations

from collections.abc import Sequence

from rumimm.store.options import DEFAULT_COALESCE
from rumimm.store.per_process import ProcessCache

__all__ = ["MAX_REQUEST_BYTES", "Link", "link_for", "plan_requests"]

#: One merged request never spans more than this many bytes (unless one range alone does).
MAX_REQUEST_BYTES = 64 << 20


def plan_requests(ranges: Sequence[tuple[int, int]], coalesce: int) -> list[tuple[int, int, list[int]]]:
    """Merge ``(offset, nbytes)`` ranges closer than ``coalesce`` bytes: ``[(start, end, [indices])]``.

    Empty ranges need no request and are left out; a merged request stops growing at
    MAX_REQUEST_BYTES.
    """
    order = sorted((o, i) for i, (o, n) in enumerate(ranges) if n > 0)
    groups: list = []
    for o, i in order:
        end = o + ranges[i][1]
        if groups:
            g = groups[-1]
            if o - g[1] <= coalesce and max(g[1], end) - g[0] <= MAX_REQUEST_BYTES:
                g[1] = max(g[1], end)
                g[2].append(i)
                continue
        groups.append([o, end, [i]])
    return [(s, e, m) for s, e, m in groups]


class Link:
    """What the answers of one client (a bucket or host) say of the link: round trip and throughput.

    ``coalesce="auto"`` merges two ranges when the bytes between them take less time to
    arrive than one more round trip would: the threshold is the round trip times one
    answer's throughput.  The round trip is the shortest time to an answer's headers
    among the client's last ``WINDOW`` answers (queueing at a busy server lengthens the
    others); an answer's throughput is its bytes over the time it took beyond that round
    trip (the server's work on them and their transfer, while the answers in flight with
    it share the link), a moving average over answers of at least ``MIN_SAMPLE`` bytes.
    Until both are known, and never below it, the threshold is ``DEFAULT_COALESCE``;
    never above ``MAX_REQUEST_BYTES / 4``.
    """

    MIN_SAMPLE = 256 << 10
    WINDOW = 32
    WEIGHT = 0.2  # of a new sample in the moving average

    def __init__(self) -> None:
        self.rtts: list[float] = []  # seconds to the headers, the last WINDOW answers
        self.rate: float | None = None  # bytes per second of one answer

    @property
    def rtt(self) -> float | None:
        return min(self.rtts) if self.rtts else None

    def note(self, headers_seconds: float, nbytes: int, total_seconds: float) -> None:
        """One answer: ``nbytes`` whose headers came after ``headers_seconds``, the whole after ``total_seconds``."""
        self.rtts = [*self.rtts[1 - self.WINDOW:], headers_seconds]
        rtt = min(self.rtts)
        if nbytes >= self.MIN_SAMPLE:
            rate = nbytes / max(total_seconds - rtt, 1e-4)
            w = self.WEIGHT
            self.rate = rate if self.rate is None else (1 - w) * self.rate + w * rate

    def reset(self) -> None:
        self.rtts, self.rate = [], None

    def coalesce(self) -> int:
        """The merging threshold in bytes: one round trip's worth of the link, within bounds."""
        rtt = self.rtt
        if rtt is None or self.rate is None:
            return DEFAULT_COALESCE
        return int(min(MAX_REQUEST_BYTES // 4, max(DEFAULT_COALESCE, rtt * self.rate)))


_links = ProcessCache()  # by id(client): a forked child's clients are new, and so are their links


def link_for(client: object) -> Link:
    """The :class:`Link` of ``client`` (clients are shared per bucket or host, so are their links)."""
    return _links.get_or_make(id(client), Link)
