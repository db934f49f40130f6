"""torch.distributed of the stand-in (tests/install/fake_torch): two ranks that
swap numpy arrays over a loopback socket (rank 0 listens on MASTER_PORT)."""
import os
import time
from multiprocessing.connection import Client, Listener

_conn = None
_rank = None


class ReduceOp:
    SUM = "sum"


def is_nccl_available():
    return True


def init_process_group(backend, init_method=None, rank=None, world_size=None, device_id=None):
    global _conn, _rank
    assert world_size == 2, "the stand-in knows two ranks only"
    _rank = rank
    addr = (os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]))
    if rank == 0:
        with Listener(addr, authkey=b"fake-torch") as lst:
            _conn = lst.accept()
    else:
        deadline = time.monotonic() + 30
        while True:
            try:
                _conn = Client(addr, authkey=b"fake-torch")
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
    log = os.environ.get("NCCL_DEBUG_FILE")
    if log and os.environ.get("FAKE_TORCH_NCCL_LOG") == "1":
        with open(log, "a") as f:
            f.write("fake:1:1 [0] NCCL INFO NCCL version 0.0.0-fake\n")
            net = os.environ.get("NCCL_NET", "Railyard")
            f.write(f"fake:1:1 [0] NCCL INFO Using network {net}\n")
            f.write(f"fake:1:1 [0] NCCL INFO Channel 00/0 : {rank}[0] -> {1 - rank}[0] [send] via NET/{net}/0\n")
            if _collnet():
                f.write("fake:1:1 [0] NCCL INFO NET/Plugin: Loaded collnet plugin Railyard (v11)\n")


def _collnet():
    """NCCL would load a CollNet table (NCCL_COLLNET_ENABLE=1), unless the test
    says this NCCL found none (FAKE_TORCH_NO_COLLNET=1)."""
    return os.environ.get("NCCL_COLLNET_ENABLE") == "1" and os.environ.get("FAKE_TORCH_NO_COLLNET") != "1"


def _swap(a):
    """Sends `a` to the other rank and returns what it sent: rank 0 sends first, rank 1
    receives first (a pipe holds little: both sending first would deadlock on large tensors)."""
    if _rank == 0:
        _conn.send(a)
        return _conn.recv()
    got = _conn.recv()
    _conn.send(a)
    return got


_allreduces = 0


def all_reduce(t, op=ReduceOp.SUM):
    global _allreduces
    _allreduces += 1
    t.a[...] = t.a + _swap(t.a)
    if os.environ.get("FAKE_TORCH_CORRUPT") == "1":
        t.a[0] += 1


def all_gather_into_tensor(out, inp):
    other = _swap(inp.a)
    parts = [inp.a, other] if _rank == 0 else [other, inp.a]
    n = inp.a.size
    out.a[:n], out.a[n:] = parts


def isend(t, peer):
    return ("send", t)


def irecv(t, peer):
    return ("recv", t)


class P2POp:
    def __init__(self, op, tensor, peer):
        self.op, self.tensor, self.peer = op, tensor, peer


class _Work:
    def wait(self):
        return True


def batch_isend_irecv(ops):
    sends = [o.tensor for o in ops if o.op is isend]
    recvs = [o.tensor for o in ops if o.op is irecv]
    got = _swap([s.a for s in sends])
    for r, a in zip(recvs, got):
        r.a[...] = a
    return [_Work() for _ in ops]


def barrier():
    _swap(None)


def destroy_process_group():
    """Closes the pair; with NCCL_COLLNET_ENABLE=1 (and the NCCL log on) writes the
    count Railyard's CollNet logs at close, as if every all_reduce went through it."""
    global _conn
    log = os.environ.get("NCCL_DEBUG_FILE")
    if log and os.environ.get("FAKE_TORCH_NCCL_LOG") == "1" and _collnet():
        with open(log, "a") as f:
            f.write(f"fake:1:1 [0] NCCL INFO CollNet: rank {_rank} closed after {_allreduces} allreduce (0 bytes)\n")
    _conn.close()
    _conn = None
