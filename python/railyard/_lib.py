"""Finds and loads libnccl-net-railyard.so: $RAILYARD_LIB (a path to the library) when
set, and then only that (a user who pins a library must never silently get another);
else the build directories of this checkout (build/lib/, then build-test/lib/), then the
dynamic loader's path."""
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
    pinned = os.environ.get("RAILYARD_LIB")
    if pinned:
        try:
            _LIB = ctypes.CDLL(pinned)
            return _LIB
        except OSError as e:
            raise OSError(f"RAILYARD_LIB={pinned!r} cannot be loaded: {e} "
                          "(unset RAILYARD_LIB to search the build tree and the loader's path)") from e
    # build/ (the README's build) first, then build-test/ (tools/test.sh's build).
    for build in ("build", "build-test"):
        candidates.append(os.path.join(here, "..", "..", build, "lib", _NAME))
    candidates.append(_NAME)
    for c in candidates:
        try:
            _LIB = ctypes.CDLL(c)
            return _LIB
        except OSError as e:
            tried.append(f"{c}: {e}")
    raise OSError("cannot load " + _NAME + " (set RAILYARD_LIB): " + "; ".join(tried))
