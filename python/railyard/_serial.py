"""One call at a time per client object: the decorator both bindings' methods share."""
import functools


def serialised(method):
    """Runs `method` under its object's `_lock` (a threading.Lock the object makes first
    in __init__): a close() from another thread waits for a call under way, and a call
    after it raises "closed" (ctypes lets other threads run while a call is in C; the C
    handles are not thread-safe, and a close under a call freed what it was using)."""
    @functools.wraps(method)
    def run(self, *args, **kwargs):
        with self._lock:
            return method(self, *args, **kwargs)
    return run
