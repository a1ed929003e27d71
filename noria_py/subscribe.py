"""Subscriptions: a view's changes pushed to whoever asked, as they happen.

``db.subscribe("view", key=None)`` returns a ``Subscription``: an iterator of
``Change``s, the first the view's rows now (each ``(row, +1)``), then one per quiet
point of the graph with every change since, as ``(row, +1)`` and ``(row, -1)``. Each
carries ``progress``: the number of writes the database had accepted when it was taken,
every one of them reflected in the rows so far, and no other. A ``key`` narrows it to the rows a
``lookup(key)`` reads.

How it is fed: the subscription listens at the view's readers (``Reader.listeners``),
which hand it each batch they apply, as kept (with any hidden key columns); it keeps
the rows of its key, trimmed to the visible columns, until the database calls
``flush`` at a quiet point (after a write has propagated, or at ``wait()``), which
queues them as one ``Change``, equal rows netted out.

A slow subscriber never slows a write: the queue holds at most ``buffer`` changes;
one more ends the subscription with a ``SubscriptionError`` once the changes before
are read (subscribe again for a fresh snapshot). So does a failure of one of its
readers (recovery rebuilds the reader's rows, which the subscription could not tell
from new changes) and dropping the view. ``callback=`` runs a function on each change
in a thread of the subscription's own, never in the writer's.

In a cluster the readers live on workers: while someone listens at one
(``Runtime.listen``), its worker keeps what it applies, consolidated. The
controller's ``Database`` finds quiet points on its own, every
``tuning.SUBSCRIBE_EVERY`` seconds that a listened reader changed (``Runtime.publish``):
holding the writers back (the database's lock, and the clients' writes at the
workers: ``Runtime.hold``), it waits for every accepted write to be processed, takes
each such reader's changes from its worker, and flushes, numbered with the writes
the database took and those the bases' histories took (``Runtime.taken_writes``). A
new subscription's snapshot is taken under the same hold, after such a quiet point
(what the readers applied before goes to the subscriptions already there), and the
readers listened to before the hold ends. A lost worker ends the subscriptions of its
readers. A ``RemoteDatabase`` subscribes on
a connection of its own, which the server streams the changes down; the client holds
them in a ``Subscription`` of its own (``put``/``fail`` only), with the same buffer
rule on both ends.

``changed`` and ``flush`` may run in another thread than the subscriber's: both
hold ``_ready``. Ending a subscription detaches it after letting go of ``_ready``, since
detaching takes the database's lock, which a writer may hold while it waits for
``_ready``.
"""
from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from . import tuning
from .batch import Batch
from .errors import ProgrammingError, SubscriptionError


def buffer_size(buffer: int | None) -> int:
    """The changes a subscription holds for its subscriber: ``buffer``, or
    ``tuning.SUBSCRIBE_BUFFER`` for None; anything but a positive int is refused."""
    size = tuning.SUBSCRIBE_BUFFER if buffer is None else buffer
    if type(size) is not int or size < 1:
        raise ProgrammingError(f"buffer must be a positive int, got {buffer!r}")
    return size


@dataclass(frozen=True)
class Change:
    """Rows that came (``+1``) and went (``-1``), up to write number ``progress``."""
    progress: int
    rows: list[tuple[tuple, int]]


class Subscription:
    """An iterator of a view's ``Change``s (module docstring)."""

    def __init__(self, view: str, key: tuple | None, key_columns: tuple[int, ...],
                 visible: int, buffer: int, detach: Callable[["Subscription"], None]) -> None:
        self.view = view
        self.key = key
        #: a partial view's (reader, key) kept from eviction while this listens
        #: (``partial.Partial.pin``); None otherwise
        self.pinned: tuple[Any, Any] | None = None
        self._key_columns = key_columns
        self._visible = visible
        self._buffer = buffer
        self._detach = detach
        self._pending = Batch()
        self._queue: deque[Change] = deque()
        self._ready = threading.Condition()
        self._error: SubscriptionError | None = None
        self._closed = False
        self.readers: list[Any] = []        # the readers it listens at (the database's)

    # ------------------------------------------------------------ from the engine

    def changed(self, batch: Batch) -> None:
        """A reader applied ``batch`` (rows as kept): keep this subscription's share."""
        if self._error is not None:
            return
        cols, key, visible = self._key_columns, self.key, self._visible
        with self._ready:
            pending = self._pending
            for row, sign in batch:
                if key is None or tuple(row[i] for i in cols) == key:
                    pending.add(row[:visible], sign)

    @property
    def ended(self) -> bool:
        """Closed, or ended with an error (whether or not the subscriber has read it)."""
        return self._closed or self._error is not None

    def lost(self, why: str) -> None:
        """A reader of the view lost its rows (a failure, a lineage rebuild)."""
        self.fail(f"view {self.view!r}: {why}; subscribe again for a fresh snapshot")

    def flush(self, progress: int) -> None:
        """A quiet point: queue what came since the last as one change."""
        with self._ready:
            if self._error is not None or not self._pending:
                return
            rows = list(self._pending.consolidated())
            self._pending = Batch()
        if rows:
            self.put(Change(progress, rows))

    def put(self, change: Change) -> None:
        """Queue ``change`` for the subscriber; past ``buffer`` changes, end the subscription."""
        with self._ready:
            if len(self._queue) < self._buffer:
                self._queue.append(change)
                self._ready.notify_all()
                return
            ended = self._end(f"subscriber to view {self.view!r} fell more than "
                              f"{self._buffer} changes behind; subscribe again")
        if ended:
            self._detach(self)

    def fail(self, message: str) -> None:
        """End the subscription with a ``SubscriptionError`` saying ``message``."""
        with self._ready:
            ended = self._end(message)
        if ended:
            self._detach(self)

    def _end(self, message: str) -> bool:
        """Set the error (the first one wins); True if this call set it. The caller
        detaches after letting go of ``_ready``: detaching takes the database's lock,
        which a writer holds while it waits for ``_ready`` in ``put``."""
        if self._error is not None:
            return False
        self._error = SubscriptionError(message)
        self._ready.notify_all()
        return True

    # ------------------------------------------------------------ for the subscriber

    def poll(self, timeout: float | None = 0.0) -> Change | None:
        """The next change, waiting up to ``timeout`` seconds (None: until one comes);
        None if none came. Raises ``SubscriptionError`` once the changes before an end
        (falling behind, a failed reader, a dropped view) are read."""
        with self._ready:
            self._ready.wait_for(lambda: self._queue or self._error is not None
                                 or self._closed, timeout)
            if self._queue:
                return self._queue.popleft()
            if self._error is not None:
                raise self._error
            return None

    def __iter__(self) -> Iterator[Change]:
        return self

    def __next__(self) -> Change:
        change = self.poll(None)
        if change is None:                  # closed
            raise StopIteration
        return change

    def close(self) -> None:
        """Stop listening; an iteration under way ends."""
        with self._ready:
            if not self._closed:
                self._closed = True
                self._ready.notify_all()
        self._detach(self)

    def run_callback(self, callback: Callable[[Change | SubscriptionError], Any]) -> threading.Thread:
        """Call ``callback`` on each change in a thread of its own, until closed or ended
        (an end is the callback's last call: with the ``SubscriptionError``)."""
        def run() -> None:
            try:
                for change in self:
                    callback(change)
            except SubscriptionError as exc:
                callback(exc)
        thread = threading.Thread(target=run, daemon=True, name=f"subscribe-{self.view}")
        thread.start()
        return thread

    def __enter__(self) -> "Subscription":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
