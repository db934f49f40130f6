"""Finds and loads libnccl-net-railyard.so: $RAILYARD_LIB (a path to the library), then
the build directory of this checkout (build/lib/), then the dynamic loader's path."""
import ctypes
import os

_LIB = None
_NAME = "libnccl-net-railyard.so"


def load():
    """The loaded library (a ctypes.CDLL), loaded once. OSError naming every place
    tried when none has it."""
    global _LIB
    if _LIB is not None:
        return _LIB
    here = os.path.dirname(os.path.abspath(__file__))
    tried = []
    candidates = []
    if os.environ.get("RAILYARD_LIB"):
        candidates.append(os.environ["RAILYARD_LIB"])
    candidates.append(os.path.join(here, "..", "..", "build", "lib", _NAME))
    candidates.append(_NAME)
    for c in candidates:
        try:
            _LIB = ctypes.CDLL(c)
            return _LIB
        except OSError as e:
            tried.append(f"{c}: {e}")
    raise OSError("cannot load " + _NAME + " (set RAILYARD_LIB): " + "; ".join(tried))
