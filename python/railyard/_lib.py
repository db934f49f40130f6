"""Finds and loads libnccl-net-railyard.so for the ctypes bindings.

Order: the RAILYARD_LIB variable (a path to the library), then the build tree
(<repo>/build/lib), then the dynamic loader's path (ldconfig, LD_LIBRARY_PATH).
"""
import ctypes
import os

_NAME = "libnccl-net-railyard.so"
_lib = None


def load():
    """Returns the loaded library (a ctypes.CDLL), loading it on first use.

    Raises OSError naming every place tried when none has it."""
    global _lib
    if _lib is not None:
        return _lib
    tried = []
    env = os.environ.get("RAILYARD_LIB")
    candidates = [env] if env else []
    here = os.path.dirname(os.path.abspath(__file__))
    candidates.append(os.path.join(here, "..", "..", "build", "lib", _NAME))
    candidates.append(_NAME)
    for c in candidates:
        try:
            _lib = ctypes.CDLL(c)
            return _lib
        except OSError as e:
            tried.append("%s (%s)" % (c, e))
    raise OSError("cannot load %s; tried: %s" % (_NAME, "; ".join(tried)))
