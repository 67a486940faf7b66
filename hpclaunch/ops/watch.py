"""One watcher per session for every job future not yet resolved (``Job`` is a
``concurrent.futures.Future``).

A round is **one** ``backend.status`` call for all pending jobs, at most every
``site.poll_min_interval`` seconds, whoever asks: ``job.done()`` from a loop, several
``job.result()`` in threads, ``concurrent.futures.wait``/``as_completed`` (which only wait
on the futures: the watcher's thread resolves them). The thread starts when a future is
waited on (``result``, ``exception``, ``add_done_callback``) and ends once every job it
follows has ended; a status call that fails (slurmctld restarting, the
SSH link down) is retried the next round, not raised into a waiter.
"""

from __future__ import annotations

import threading
import time
import weakref
from typing import TYPE_CHECKING, Protocol

from hpclaunch.backends.route import status_anywhere
from hpclaunch.errors import HpclaunchError

if TYPE_CHECKING:
    from hpclaunch.backends.base import JobRef
    from hpclaunch.ops.context import Context
    from hpclaunch.slurm.jobs import JobInfo

__all__ = ["Followed", "JobWatch", "watch_of"]


class Followed(Protocol):
    """A job future as the watcher sees it (:class:`hpclaunch.ops.job.Job`)."""

    @property
    def ref(self) -> JobRef: ...

    def settled(self) -> bool:
        """The future has its result, its exception or was cancelled (no Slurm call)."""
        ...

    def resolve(self, info: JobInfo) -> None:
        """Settle it with the job's end."""
        ...


_WATCHES: weakref.WeakKeyDictionary[Context, JobWatch] = weakref.WeakKeyDictionary()
_WATCHES_LOCK = threading.Lock()


def watch_of(session: Context) -> JobWatch:
    """The session's one watcher (made on first use)."""
    with _WATCHES_LOCK:
        watch = _WATCHES.get(session)
        if watch is None:
            watch = _WATCHES[session] = JobWatch(session)
        return watch


class JobWatch:
    """The pending jobs of one session and the rounds that resolve them."""

    def __init__(self, session: Context) -> None:
        self.session = session
        self._pending: dict[JobRef, list[Followed]] = {}  # two lookups of one job: two futures
        self._lock = threading.Lock()  # _pending, _thread and _last_round
        self._round = threading.Lock()  # one status call at a time
        self._thread: threading.Thread | None = None
        self._last_round = float("-inf")
        #: Status calls made so far (tests and benchmarks count them).
        self.rounds = 0

    def follow(self, job: Followed, *, thread: bool) -> None:
        """Resolve ``job`` when it ends; ``thread``: keep a watcher thread running for it
        (something waits on the future without calling into it)."""
        with self._lock:
            if job.settled():
                return
            followed = self._pending.setdefault(job.ref, [])
            if job not in followed:
                followed.append(job)
            if thread and (self._thread is None or not self._thread.is_alive()):
                self._thread = threading.Thread(
                    target=self._run, name="hpclaunch-job-watch", daemon=True
                )
                self._thread.start()

    @property
    def interval(self) -> float:
        return float(self.session.site_config.poll_min_interval)

    def poll(self) -> None:
        """One round for every pending job, unless the last one is younger than the
        site's poll interval (then nothing: the caller reads the futures as they are)."""
        with self._round:
            with self._lock:
                if time.monotonic() - self._last_round < self.interval or not self._pending:
                    return
                self._last_round = time.monotonic()
                refs = list(self._pending)
            self.rounds += 1
            try:
                infos = status_anywhere(self.session.backend, refs)
            except HpclaunchError:
                return  # asked again next round
            for ref, info in infos.items():
                if info.state.is_finished:
                    with self._lock:
                        jobs = self._pending.pop(ref, [])
                    for job in jobs:
                        job.resolve(info)

    def _run(self) -> None:
        while True:
            with self._lock:
                if not self._pending:
                    self._thread = None
                    return
                wait = self._last_round + self.interval - time.monotonic()
            if wait > 0:
                time.sleep(wait)
            self.poll()
