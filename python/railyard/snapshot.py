"""The snapshot tier from Python (ctypes over railyard_snapshot_* in railyard.h).

    from railyard.snapshot import Snapshot, PAGING
    with Snapshot("127.0.0.1", port, "kv", PAGING, arena_bytes=8 << 20, blob_bytes=1 << 20) as kv:
        kv.put(7, array)                 # any C-contiguous buffer of blob_bytes bytes
        out = numpy.empty_like(array)
        found = kv.get(7, out)           # False when the peer does not hold key 7

Every call completes before it returns. Errors raise SnapshotError(code, message).
"""
import ctypes
import re
import threading

from railyard import _args, _lib
from railyard._serial import serialised as _serialised

RAW = 1
PAGING = 2
MODE_NAMES = {RAW: "raw", PAGING: "paging"}


# The return values of the railyard_snapshot_* calls (numbered as NCCL's ncclResult_t,
# nccl.h), named in upper case as the expert tier's errors are, not after NCCL (new-user
# trial: "ncclInvalidUsage" for a queue that ran out read as a bug in NCCL). 5 is a call
# refused with nothing done and the handle usable. A network error (2: the connection
# failed or timed out) or a peer breaking the protocol (6) fails the handle: its later
# calls say so, close it. An error the peer reports in an answer (a torn swap record: 2)
# leaves it usable; the message says which ("failed earlier ... open a new handle").
CODE_NAMES = {1: "UNHANDLED_CUDA_ERROR", 2: "SYSTEM_ERROR", 3: "INTERNAL_ERROR",
              4: "INVALID_ARGUMENT", 5: "INVALID_USAGE", 6: "REMOTE_ERROR", 7: "IN_PROGRESS"}

# The C API's call names in its messages ("railyard_snapshot_put on raw kind 'kv' (use
# railyard_snapshot_write_at)"), as this binding spells them (Snapshot.put, Snapshot.write_at).
_PY_CALLS = {"write_at": "Snapshot.write_at", "read_at": "Snapshot.read_at", "put_batch": "Snapshot.put_many",
             "get_batch": "Snapshot.get_many", "put": "Snapshot.put", "get": "Snapshot.get",
             "remove": "Snapshot.remove", "register": "Snapshot.register", "deregister": "Snapshot.deregister",
             "connect": "Snapshot", "list": "list_arenas"}
_CALL_RE = re.compile(r"\brailyard_snapshot_(%s)\b" % "|".join(_PY_CALLS))


class SnapshotError(RuntimeError):
    """A failed railyard_snapshot_* call: .code is its return value (ncclResult_t's
    numbering), .name that value's name (CODE_NAMES, e.g. "INVALID_USAGE"); str() reads
    "railyard snapshot error INVALID_USAGE (5): <message>"."""

    def __init__(self, code, message):
        self.name = CODE_NAMES.get(code, "UNKNOWN")
        super().__init__("railyard snapshot error %s (%d): %s" % (self.name, code, message))
        self.code = code
        # After put_many / get_many only: each blob's code (0 done, an error code, or
        # NOT_ATTEMPTED) and, for get_many, whether the peer held it; None otherwise.
        self.results = None
        self.found = None


def _python_names(message):
    """`message` with the C API's call names it gives ("use railyard_snapshot_write_at") in
    this binding's spelling ("use Snapshot.write_at"; railyard_snapshot_connect is the
    Snapshot constructor, railyard_snapshot_list list_arenas)."""
    return _CALL_RE.sub(lambda m: _PY_CALLS[m.group(1)], message)


_c = None


class _Arena(ctypes.Structure):
    """railyard_snapshot_arena_t."""
    _fields_ = [("kind", ctypes.c_char * 32), ("mode", ctypes.c_int), ("blob_bytes", ctypes.c_ulonglong),
                ("arena_bytes", ctypes.c_ulonglong), ("max_bytes", ctypes.c_ulonglong)]


class _Blob(ctypes.Structure):
    """railyard_snapshot_blob_t."""
    _fields_ = [("key", ctypes.c_ulonglong), ("data", ctypes.c_void_p), ("bytes", ctypes.c_ulonglong),
                ("found", ctypes.c_int), ("result", ctypes.c_int)]


# A batch blob's code in SnapshotError.results when the batch ended (a failed
# connection) or was refused (a bad blob, which has code 4) before it; the C API's
# RAILYARD_SNAPSHOT_NOT_ATTEMPTED.
NOT_ATTEMPTED = -1


def _api():
    global _c
    if _c is not None:
        return _c
    lib = _lib.load()
    u64, vp = ctypes.c_ulonglong, ctypes.c_void_p
    lib.railyard_snapshot_connect.argtypes = [ctypes.c_char_p, ctypes.c_ushort, ctypes.c_char_p, ctypes.c_int,
                                              u64, u64, ctypes.POINTER(vp)]
    lib.railyard_snapshot_put.argtypes = [vp, u64, vp, u64]
    lib.railyard_snapshot_get.argtypes = [vp, u64, vp, u64, ctypes.POINTER(ctypes.c_int)]
    lib.railyard_snapshot_remove.argtypes = [vp, u64, ctypes.POINTER(ctypes.c_int)]
    lib.railyard_snapshot_write_at.argtypes = [vp, u64, vp, u64]
    lib.railyard_snapshot_read_at.argtypes = [vp, u64, vp, u64]
    lib.railyard_snapshot_register.argtypes = [vp, vp, u64]
    lib.railyard_snapshot_deregister.argtypes = [vp, vp]
    lib.railyard_snapshot_close.argtypes = [vp]
    lib.railyard_snapshot_close.restype = None
    lib.railyard_snapshot_last_error.restype = ctypes.c_char_p
    lib.railyard_snapshot_list.argtypes = [ctypes.c_char_p, ctypes.c_ushort, ctypes.POINTER(_Arena), ctypes.c_int,
                                           ctypes.POINTER(ctypes.c_int)]
    lib.railyard_snapshot_put_batch.argtypes = [vp, ctypes.POINTER(_Blob), ctypes.c_size_t]
    lib.railyard_snapshot_get_batch.argtypes = [vp, ctypes.POINTER(_Blob), ctypes.c_size_t]
    for f in ("connect", "put", "get", "remove", "write_at", "read_at", "list", "register", "deregister",
              "put_batch", "get_batch"):
        getattr(lib, "railyard_snapshot_" + f).restype = ctypes.c_int
    _c = lib
    return lib


def _check(rc):
    if rc != 0:
        raise SnapshotError(rc, _python_names(_api().railyard_snapshot_last_error().decode("utf-8", "replace")))


def list_arenas(host, port):
    """Discovery: the arenas the peer at host:port serves, as a list of dicts
    {"kind", "mode" ("raw" or "paging", the names railyardd --snapshot-arena takes; MODE_NAMES
    maps RAW and PAGING to them), "blob_bytes", "arena_bytes" (0: a raw arena the first client
    sizes), "max_bytes"}. ValueError for a port outside 1..65535 (0..65535 for a
    "host:NAME" peer, whose port is unused)."""
    host = _args.host(host)
    port = _args.peer_port(host, port)
    count = ctypes.c_int(0)
    room = 16
    while True:
        arr = (_Arena * room)()
        _check(_api().railyard_snapshot_list(host.encode(), port, arr, room, ctypes.byref(count)))
        if count.value <= room:
            return [{"kind": a.kind.decode(), "mode": MODE_NAMES.get(a.mode, str(a.mode)), "blob_bytes": a.blob_bytes, "arena_bytes": a.arena_bytes,
                     "max_bytes": a.max_bytes} for a in arr[:count.value]]
        room = count.value


def _buffer(obj, writable):
    """(address, nbytes) of a C-contiguous buffer (numpy array, bytearray, ...)."""
    mv = memoryview(obj)
    if not mv.c_contiguous:
        raise ValueError("snapshot: the buffer must be C-contiguous")
    if writable and mv.readonly:
        raise ValueError("snapshot: the buffer must be writable")
    if mv.readonly:
        # ctypes cannot take a read-only buffer's address directly: copy (bytes input).
        tmp = (ctypes.c_char * mv.nbytes).from_buffer_copy(mv)
        return ctypes.addressof(tmp), mv.nbytes, tmp
    arr = (ctypes.c_char * mv.nbytes).from_buffer(mv)
    return ctypes.addressof(arr), mv.nbytes, arr


class Snapshot:
    """One connection to an arena `kind` served by railyardd --snapshot-arena.

    mode (RAW or PAGING), arena_bytes (slots x blob bytes) and blob_bytes must equal
    the peer's arena; the peer refuses anything else naming what differs. mode may also be
    given by name ("raw", "paging"). Integer arguments outside their C range (negative ones
    included) raise ValueError naming the argument; any call after close() raises
    SnapshotError "... is closed"."""

    def __init__(self, host, port, kind, mode, arena_bytes, blob_bytes):
        self._lock = threading.Lock()  # _serialised: one call at a time, close() after them
        self._h = ctypes.c_void_p()
        self._registered = {}  # address -> the ctypes view keeping the registered buffer alive
        # A "host:NAME" peer is reached through railyardd's tier tunnel: its port is unused (0 is fine).
        host = _args.host(host)
        port = _args.peer_port(host, port)
        if not isinstance(kind, str):
            raise TypeError(f"kind must be a str (1..31 of [A-Za-z0-9_.-]), not {type(kind).__name__}")
        if isinstance(mode, str):
            names = {v: k for k, v in MODE_NAMES.items()}
            if mode not in names:
                raise ValueError(f"mode={mode!r} is not one of the names 'raw', 'paging' "
                                 f"(or the constants railyard.snapshot.RAW = {RAW}, PAGING = {PAGING})")
            mode = names[mode]
        arena_bytes = _args.unsigned("arena_bytes", arena_bytes)
        blob_bytes = _args.unsigned("blob_bytes", blob_bytes)
        self.blob_bytes = blob_bytes
        _check(_api().railyard_snapshot_connect(host.encode(), port, kind.encode(), mode, arena_bytes, blob_bytes,
                                                ctypes.byref(self._h)))

    def _handle(self, call):
        """The open handle; SnapshotError naming `call` once close() ran."""
        if not self._h:
            raise SnapshotError(4, f"Snapshot.{call}: the connection is closed (close() was called)")
        return self._h

    @_serialised
    def put(self, key, data):
        """Paging mode: stores `data` (blob_bytes bytes) under the integer `key` (0..2**64-1)."""
        h = self._handle("put")
        key = _args.unsigned("key", key)
        addr, n, keep = _buffer(data, False)
        _check(_api().railyard_snapshot_put(h, key, addr, n))
        del keep

    @_serialised
    def get(self, key, out):
        """Paging mode: fills `out` (a writable blob_bytes buffer); False when absent."""
        h = self._handle("get")
        key = _args.unsigned("key", key)
        addr, n, keep = _buffer(out, True)
        found = ctypes.c_int(0)
        _check(_api().railyard_snapshot_get(h, key, addr, n, ctypes.byref(found)))
        del keep
        return bool(found.value)

    @_serialised
    def put_many(self, items):
        """Paging mode: stores each (key, data) pair of `items` (data: blob_bytes bytes, any
        C-contiguous buffer; a read-only one such as bytes is copied first) with two blobs
        in flight at once (railyard_snapshot_put_batch), faster than put() one by one.
        Returns None. One blob's failure does not stop the others: SnapshotError then
        names the first failing blob, and its .results gives each blob's code: 0 stored,
        an error code, or NOT_ATTEMPTED for a blob the batch never reached (a failed
        connection ended it, or a bad blob had it refused at the start: that blob has
        code 4 and nothing was sent). ValueError or TypeError, naming the item, for an
        item that is not a (key, buffer) pair or a key outside 0..2**64-1."""
        h = self._handle("put_many")
        blobs, keep = self._blobs(items, False)
        self._batch(_api().railyard_snapshot_put_batch, h, blobs)
        del keep

    @_serialised
    def get_many(self, items):
        """Paging mode: fills `out` (a writable blob_bytes buffer) for each (key, out) pair of
        `items`, two in flight (railyard_snapshot_get_batch); returns the list of found
        flags (False: the peer does not hold that key, its `out` untouched). Errors as
        put_many; the SnapshotError's .found then says which blobs the peer held (an
        `out` holds its blob only where .results is 0)."""
        h = self._handle("get_many")
        blobs, keep = self._blobs(items, True)
        self._batch(_api().railyard_snapshot_get_batch, h, blobs)
        del keep
        return [bool(b.found) for b in blobs]

    @staticmethod
    def _blobs(items, writable):
        """(railyard_snapshot_blob_t array, buffers kept alive) of (key, buffer) pairs."""
        items = list(items)
        blobs = (_Blob * len(items))()
        keep = []
        for i, pair in enumerate(items):
            if not isinstance(pair, (tuple, list)):
                raise ValueError(f"item {i}: a (key, buffer) pair expected, got {type(pair).__name__}")
            if len(pair) != 2:
                raise ValueError(f"item {i}: a (key, buffer) pair expected, got a {type(pair).__name__} of {len(pair)}")
            key, buf = pair
            try:
                addr, n, k = _buffer(buf, writable)
            except (TypeError, ValueError) as e:
                raise type(e)(f"item {i} (key {key!r}): {e}") from None
            blobs[i].key = _args.unsigned(f"items[{i}] key", key)
            blobs[i].data = addr
            blobs[i].bytes = n
            keep.append(k)
        return blobs, keep

    @staticmethod
    def _batch(fn, h, blobs):
        rc = fn(h, blobs, len(blobs))
        if rc != 0:
            err = SnapshotError(rc, _python_names(_api().railyard_snapshot_last_error().decode("utf-8", "replace")))
            err.results = [b.result for b in blobs]
            err.found = [bool(b.found) for b in blobs]
            raise err

    @_serialised
    def remove(self, key):
        """Paging mode: forgets `key`; False when it was not there."""
        h = self._handle("remove")
        key = _args.unsigned("key", key)
        found = ctypes.c_int(0)
        _check(_api().railyard_snapshot_remove(h, key, ctypes.byref(found)))
        return bool(found.value)

    @_serialised
    def write_at(self, offset, data):
        """Raw mode: one whole blob at `offset` (a multiple of blob_bytes)."""
        h = self._handle("write_at")
        offset = _args.unsigned("offset", offset)
        addr, n, keep = _buffer(data, False)
        _check(_api().railyard_snapshot_write_at(h, offset, addr, n))
        del keep

    @_serialised
    def read_at(self, offset, out):
        """Raw mode: the whole blob at `offset` into `out`."""
        h = self._handle("read_at")
        offset = _args.unsigned("offset", offset)
        addr, n, keep = _buffer(out, True)
        _check(_api().railyard_snapshot_read_at(h, offset, addr, n))
        del keep

    @_serialised
    def register(self, buf):
        """Registers the writable, C-contiguous buffer `buf` (a numpy array, bytearray, ...)
        for this connection: puts from it and gets into it then move with no staging copy.
        Keep `buf` alive until deregister(buf) or close(); registering it twice is an error."""
        h = self._handle("register")
        addr, n, keep = _buffer(buf, True)
        _check(_api().railyard_snapshot_register(h, addr, n))
        self._registered[addr] = keep  # the buffer stays referenced while registered

    @_serialised
    def deregister(self, buf):
        """Releases what register(buf) registered."""
        h = self._handle("deregister")
        addr, _, _ = _buffer(buf, True)
        _check(_api().railyard_snapshot_deregister(h, addr))
        self._registered.pop(addr, None)

    @_serialised
    def close(self):
        """Closes the connection (releasing what register() registered); a second close()
        does nothing."""
        if self._h:
            _api().railyard_snapshot_close(self._h)
            self._h = ctypes.c_void_p()
            self._registered.clear()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass
