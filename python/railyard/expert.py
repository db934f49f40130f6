"""The expert tier from Python: fetch MoE expert records from a peer serving an expert
store (``railyardd --expert-store DIR``) into a numpy array or any writable buffer.

    import numpy as np
    from railyard.expert import ExpertClient

    arena = np.empty(64 << 20, dtype=np.uint8)
    with ExpertClient("10.0.0.2:29431", arena) as c:      # transport="read" (default) or "tcp"
        print(c.manifest["model_id"], c.layers, c.experts_per_layer, c.record_stride)
        c.fetch(layer=0, expert=5, offset=0)               # one record at arena[0:stride]
        c.fetch_batch([(0, 1, 0), (0, 2, c.record_stride)])  # (layer, expert, offset) each
        w = c.tensor(arena, "gate_proj.weight", offset=0)  # a numpy view of one tensor

Layers are indices 0..layers-1 into manifest["layers"] (its "layer" field is the
model's layer number). Every failure raises ExpertError with .name (e.g.
"OUT_OF_RANGE", "PEER_LOST", "CHECKSUM_MISMATCH") and the library's sentence.
"""
import ctypes
import json
import threading

from railyard import _args, _lib
from railyard._serial import serialised

TRANSPORTS = {"tcp": 1, "read": 2}


class ExpertError(RuntimeError):
    """A railyard_expert_* failure: .code (RAILYARD_EXPERT_E*), .name, message."""

    def __init__(self, code, name, message):
        super().__init__(message or name)
        self.code = code
        self.name = name


class _Record(ctypes.Structure):
    _fields_ = [("layer", ctypes.c_uint32), ("reserved", ctypes.c_uint32),
                ("expert", ctypes.c_uint64), ("arena_offset", ctypes.c_uint64)]


class _Layout(ctypes.Structure):
    _fields_ = [("layers", ctypes.c_uint64), ("experts_per_layer", ctypes.c_uint64),
                ("record_stride", ctypes.c_uint64), ("record_bytes", ctypes.c_uint64)]


def _bind():
    lib = _lib.load()
    if getattr(lib, "_railyard_expert_bound", False):
        return lib
    p = ctypes.c_void_p
    lib.railyard_expert_open.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.c_int, p, ctypes.c_uint64,
                                         ctypes.POINTER(p)]
    lib.railyard_expert_layout_get.argtypes = [p, ctypes.POINTER(_Layout)]
    lib.railyard_expert_manifest.argtypes = [p, ctypes.c_char_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_size_t)]
    lib.railyard_expert_fetch.argtypes = [p, ctypes.c_uint32, ctypes.c_uint64, ctypes.c_uint64]
    lib.railyard_expert_fetch_batch.argtypes = [p, ctypes.POINTER(_Record), ctypes.c_size_t]
    lib.railyard_expert_set_verify.argtypes = [p, ctypes.c_int]
    lib.railyard_expert_close.argtypes = [p]
    lib.railyard_expert_last_error.restype = ctypes.c_char_p
    lib.railyard_expert_error_name.restype = ctypes.c_char_p
    lib.railyard_expert_error_name.argtypes = [ctypes.c_int]
    for f in ("open", "layout_get", "manifest", "fetch", "fetch_batch", "set_verify", "close"):
        getattr(lib, "railyard_expert_" + f).restype = ctypes.c_int
    lib._railyard_expert_bound = True
    return lib


def _check(lib, rc):
    if rc != 0:
        raise ExpertError(rc, lib.railyard_expert_error_name(rc).decode(),
                          lib.railyard_expert_last_error().decode(errors="replace"))


def _writable_address(buf):
    """(address, bytes) of a writable buffer (numpy array, bytearray, memoryview, ...)."""
    mv = memoryview(buf)
    if mv.readonly:
        raise ValueError("the arena must be a writable buffer")
    if not mv.contiguous:
        raise ValueError("the arena must be contiguous")
    nbytes = mv.nbytes
    mv = mv.cast("B")
    # from_buffer needs a writable buffer; it does not copy.
    c = (ctypes.c_char * nbytes).from_buffer(mv)
    return ctypes.addressof(c), nbytes, c


class ExpertClient:
    """One connection to an expert peer; records land in `arena` (kept alive here).

    peer: "IPv4:PORT", or "host:NAME" (a fabric host by its name in the cabling graph,
    reached through railyardd's tier tunnel, relayed when there is no cable); transport: "read" (fabric Reads of the peer's memory) or "tcp";
    verify: check every record's xxHash against the manifest (default on).

    Thread-safe: calls from several threads run one at a time (the C handle is not
    thread-safe), and close() waits for the call under way; a call after it raises
    ExpertError CLOSED."""

    def __init__(self, peer, arena, transport="read", verify=True):
        # (New-user trial: fetches from 4 threads broke the connection, "a 0-byte record";
        # a close() under a fetch crashed the interpreter.)
        self._lock = threading.Lock()
        self._h = ctypes.c_void_p()
        self._lib = _bind()
        if not isinstance(peer, str):
            # (New-user trial: None or bytes raised a bare AttributeError from .encode.)
            raise TypeError(f"peer must be a str \"host:port\" or \"host:NAME\", not {type(peer).__name__}")
        if transport not in TRANSPORTS:
            raise ValueError(f"transport {transport!r} is not one of {sorted(TRANSPORTS)}")
        addr, nbytes, self._keep = _writable_address(arena)
        self._arena = arena
        _check(self._lib, self._lib.railyard_expert_open(peer.encode(), TRANSPORTS[transport], 1 if verify else 0,
                                                         ctypes.c_void_p(addr), nbytes, ctypes.byref(self._h)))
        layout = _Layout()
        _check(self._lib, self._lib.railyard_expert_layout_get(self._h, ctypes.byref(layout)))
        self.layers = layout.layers
        self.experts_per_layer = layout.experts_per_layer
        self.record_stride = layout.record_stride
        self.record_bytes = layout.record_bytes
        needed = ctypes.c_size_t()
        self._lib.railyard_expert_manifest(self._h, None, 0, ctypes.byref(needed))
        text = ctypes.create_string_buffer(needed.value)
        _check(self._lib, self._lib.railyard_expert_manifest(self._h, text, needed.value, ctypes.byref(needed)))
        self.manifest = json.loads(text.value.decode())

    def _handle(self, call):
        """The open handle; ExpertError "... is closed" naming `call` once close() ran."""
        if not self._h:
            raise ExpertError(0, "CLOSED", f"ExpertClient.{call}: the client is closed (close() was called)")
        return self._h

    @serialised
    def fetch(self, layer, expert, offset=0):
        """Fetches record (layer, expert) into arena[offset : offset + record_stride].
        offset is a multiple of the manifest's "alignment" (any multiple of
        record_stride is), else ExpertError INVALID_ARGUMENT before anything moves.
        A negative or too-large layer/expert/offset raises ValueError naming it."""
        h = self._handle("fetch")
        layer = _args.unsigned("layer", layer, 32)
        expert = _args.unsigned("expert", expert)
        offset = _args.unsigned("offset", offset)
        _check(self._lib, self._lib.railyard_expert_fetch(h, layer, expert, offset))

    @serialised
    def fetch_batch(self, records):
        """Fetches (layer, expert, offset) triples; all land or ExpertError is raised
        (INVALID_ARGUMENT, before anything moves, for two slots closer than the record stride).
        A negative or too-large field raises ValueError naming it and its record."""
        h = self._handle("fetch_batch")
        arr = (_Record * len(records))()
        for i, (layer, expert, offset) in enumerate(records):
            arr[i].layer = _args.unsigned(f"records[{i}] layer", layer, 32)
            arr[i].reserved = 0
            arr[i].expert = _args.unsigned(f"records[{i}] expert", expert)
            arr[i].arena_offset = _args.unsigned(f"records[{i}] offset", offset)
        _check(self._lib, self._lib.railyard_expert_fetch_batch(h, arr, len(records)))

    @serialised
    def set_verify(self, on):
        """Switches the checksum check of later fetches on or off."""
        _check(self._lib, self._lib.railyard_expert_set_verify(self._handle("set_verify"), 1 if on else 0))

    def tensor(self, arena, name, offset=0):
        """A numpy view of tensor `name` of the record at arena[offset:] (numpy needed:
        the only call of this binding that is), shaped as the manifest says. numpy has no
        bfloat16 or FP8: a BF16 tensor comes back as its raw uint16 bits (widen with
        `(v.astype(np.uint32) << 16).view(np.float32)`), an F8_E4M3/F8_E5M2 one as uint8.
        KeyError, naming the manifest's tensors, for an unknown name; ValueError for an
        offset that is no multiple of the manifest's "alignment" (where fetch puts
        records) or leaves no room for a record; ImportError saying so when numpy is
        missing."""
        entry = next((t for t in self.manifest["tensors"] if t["name"] == name), None)
        if entry is None:
            names = [t["name"] for t in self.manifest["tensors"]]
            raise KeyError(f"no tensor {name!r} in the store's records; they hold {names}")
        try:
            import numpy as np
        except ImportError as e:
            raise ImportError("ExpertClient.tensor() returns a numpy view and needs numpy "
                              "(python3-numpy); the rest of railyard.expert needs only the standard library") from e
        # Every dtype the packer and the manifest take (storage/expert/manifest.cc DtypeBytes;
        # new-user trial: BOOL and the unsigned ones were a bare KeyError).
        dtypes = {"F32": np.float32, "F16": np.float16, "F64": np.float64, "I8": np.int8, "U8": np.uint8,
                  "I16": np.int16, "I32": np.int32, "I64": np.int64, "U16": np.uint16, "U32": np.uint32,
                  "U64": np.uint64, "BOOL": np.bool_, "BF16": np.uint16, "F8_E4M3": np.uint8, "F8_E5M2": np.uint8}
        if entry["dtype"] not in dtypes:
            raise ValueError(f"tensor {name!r} has dtype {entry['dtype']!r}, which this binding cannot view "
                             f"(it knows {sorted(dtypes)}); read its {entry['bytes']} bytes at record offset "
                             f"{entry['offset']} yourself")
        dt = np.dtype(dtypes[entry["dtype"]])
        view = memoryview(arena).cast("B")
        # fetch() puts records only at multiples of the alignment; anywhere else the view
        # would be of no record (new-user trial: offset=5 gave a garbage view, silently).
        align = int(self.manifest.get("alignment", 1)) or 1
        if offset % align != 0:
            raise ValueError(f"tensor {name!r}: arena offset {offset} is not a multiple of the store's alignment "
                             f"{align}, where fetch() puts records")
        if offset < 0 or offset + entry["offset"] + entry["bytes"] > len(view):
            raise ValueError(f"tensor {name!r} of the record at arena offset {offset} would end at byte "
                             f"{offset + entry['offset'] + entry['bytes']}, past the arena's {len(view)} bytes "
                             f"(a record is {self.record_stride} bytes: offset must leave room for one)")
        flat = np.frombuffer(view, dtype=np.uint8, count=entry["bytes"], offset=offset + entry["offset"])
        return flat.view(dt).reshape(entry["shape"])

    @serialised
    def close(self):
        """Polite shutdown; the handle is freed either way."""
        if self._h:
            h, self._h = self._h, ctypes.c_void_p()
            self._keep = None
            _check(self._lib, self._lib.railyard_expert_close(h))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass
