"""Finds and loads libnccl-net-railyard.so: $RAILYARD_LIB (a path to the library) when
set, and then only that (a user who pins a library must never silently get another);
else the build directories of this checkout (build/lib/, then build-test/lib/), then the
dynamic loader's path."""
import ctypes
import os

_LIB = None
_NAME = "libnccl-net-railyard.so"
# The C endpoints (include/railyard/railyard.h) this package calls: a library without them is
# not Railyard's, or one built before the tiers (new-user trial: a raw AttributeError).
_SYMBOLS = ("railyard_expert_open", "railyard_expert_fetch_batch", "railyard_snapshot_connect",
            "railyard_snapshot_put_batch")


def _missing(lib):
    """The names of _SYMBOLS that `lib` (a ctypes.CDLL) does not export."""
    return [name for name in _SYMBOLS if not hasattr(lib, name)]


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
            lib = ctypes.CDLL(pinned)
        except OSError as e:
            raise OSError(f"RAILYARD_LIB={pinned!r} cannot be loaded: {e} "
                          "(unset RAILYARD_LIB to search the build tree and the loader's path)") from e
        missing = _missing(lib)
        if missing:
            raise OSError(f"RAILYARD_LIB={pinned!r} loads but is not Railyard's {_NAME}, or is older than this "
                          f"package: it exports no {', '.join(missing)}")
        _LIB = lib
        return _LIB
    # build/ (the README's build) first, then build-test/ (tools/test.sh's build).
    for build in ("build", "build-test"):
        candidates.append(os.path.join(here, "..", "..", build, "lib", _NAME))
    candidates.append(_NAME)
    for c in candidates:
        try:
            lib = ctypes.CDLL(c)
        except OSError as e:
            tried.append(f"{c}: {e}")
            continue
        missing = _missing(lib)
        if missing:
            tried.append(f"{c}: exports no {', '.join(missing)} (older than this package?)")
            continue
        _LIB = lib
        return _LIB
    raise OSError("cannot load " + _NAME + " (set RAILYARD_LIB): " + "; ".join(tried))
