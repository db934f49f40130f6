"""A stand-in for PyTorch, for tests/install/gpu_check_rehearsal.sh only.

It lets tools/gpu/nccl_check_ranks.py's GPU code path (run()) and
tools/gpu/nccl-check.sh's GPU branch execute on a machine without torch or a
GPU: tensors are numpy arrays on the CPU and torch.distributed moves them
between the two rank processes over a loopback socket (MASTER_ADDR/MASTER_PORT).
Only the calls nccl_check_ranks.py makes exist. Nothing here is NCCL: the
rehearsal checks the script's plumbing and the rank program's checking, not
Railyard under NCCL.

Knobs (environment): FAKE_TORCH_NCCL_LOG=1 writes the two NCCL INFO lines the
script looks for into NCCL_DEBUG_FILE; FAKE_TORCH_CORRUPT=1 makes all_reduce add
1 to element 0 (the rank program must then report a wrong result).
"""
import numpy as _np

from . import cuda, distributed, version  # noqa: F401  (torch.cuda, torch.distributed, torch.version)

__version__ = "0.0-fake"
float32, int32, int64 = _np.float32, _np.int32, _np.int64


class device:
    """torch.device("cuda", 0)."""

    def __init__(self, kind, index=0):
        self.type, self.index = kind, index


class Tensor:
    """A numpy array with the few torch.Tensor operations the rank program uses."""

    def __init__(self, a):
        self.a = _np.asarray(a)

    def _wrap(self, other, op):
        o = other.a if isinstance(other, Tensor) else other
        return Tensor(op(self.a, o))

    def __mod__(self, o):
        return self._wrap(o, _np.mod)

    def __add__(self, o):
        return self._wrap(o, _np.add)

    __radd__ = __add__

    def __mul__(self, o):
        return self._wrap(o, _np.multiply)

    __rmul__ = __mul__

    def __ne__(self, o):
        return self._wrap(o, _np.not_equal)

    def to(self, dtype):
        return Tensor(self.a.astype(dtype))

    def sum(self):
        return Tensor(self.a.sum())

    def item(self):
        return self.a.item()


def arange(n, device=None, dtype=int64):
    return Tensor(_np.arange(n, dtype=dtype))


def empty(n, device=None, dtype=float32):
    return Tensor(_np.zeros(n, dtype=dtype))


def cat(ts):
    return Tensor(_np.concatenate([t.a for t in ts]))
