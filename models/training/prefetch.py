"""Background preparation of the trainer's next micro-batches, in a fixed order (`models/training/train.py`)."""

from __future__ import annotations


def _pin(item):
    """`item` (tensors in nested lists and tuples) with every tensor in pinned memory."""
    if isinstance(item, (list, tuple)):
        return type(item)(_pin(x) for x in item)
    return item.pin_memory()


class Prefetcher:
    """Collated micro-batches in the trainer's order, made `depth` ahead by a background thread (0: inline).

    `produce` is an iterator of (ids, mask) CPU tensors; on CUDA they are pinned here, so that the copy to
    the device can run asynchronously. The order of the items never depends on the thread.
    """

    def __init__(self, produce, depth: int, pin: bool):
        import queue
        import threading

        self._pin = pin
        self._produce = produce
        self._depth = depth
        if depth <= 0:
            return
        self._queue: queue.Queue = queue.Queue(maxsize=depth)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="citeflow-prefetch", daemon=True)
        self._thread.start()

    def _prepare(self, item):
        return _pin(item) if self._pin else item

    def _run(self) -> None:
        try:
            for item in self._produce:
                item = self._prepare(item)
                while not self._stop.is_set():
                    try:
                        self._queue.put((item, None), timeout=0.1)
                        break
                    except Exception:  # noqa: BLE001 - queue.Full: look at the stop flag again
                        continue
                if self._stop.is_set():
                    return
        except BaseException as exc:  # noqa: BLE001 - raised again in the training thread
            self._queue.put((None, exc))

    def next(self):
        if self._depth <= 0:
            return self._prepare(next(self._produce))
        item, error = self._queue.get()
        if error is not None:
            raise error
        return item

    def close(self) -> None:
        if self._depth > 0:
            self._stop.set()
            self._thread.join(timeout=5)
