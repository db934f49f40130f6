"""Checks of the integer arguments the bindings pass to C: ctypes converts a negative or
too-large int to an unsigned parameter by wrapping it around (-1 becomes 2**64 - 1), so
each one is checked here first and refused naming the argument."""
import operator


def _integer(name, value):
    """`value` as an int; TypeError naming `name` when it is not an integer (bool included)."""
    if isinstance(value, bool):
        raise TypeError(f"{name} must be an integer, not bool")
    try:
        return operator.index(value)
    except TypeError:
        raise TypeError(f"{name} must be an integer, not {type(value).__name__}") from None


def unsigned(name, value, bits=64):
    """`value` as an int in 0 .. 2**bits - 1. TypeError when it is not an integer,
    ValueError naming `name`, the value and the range when it is outside."""
    v = _integer(name, value)
    top = (1 << bits) - 1
    if v < 0 or v > top:
        raise ValueError(f"{name}={v} is out of range: expected 0..{top}")
    return v


def port(value):
    """A TCP port 1..65535: TypeError when not an integer, ValueError naming "port" when outside."""
    v = _integer("port", value)
    if v < 1 or v > 65535:
        raise ValueError(f"port={v} is out of range: expected 1..65535")
    return v


def peer_port(host, value):
    """The port of a tier peer: 1..65535 for an IPv4 `host`; for a "host:NAME" peer, which is
    reached through railyardd's tier tunnel and ignores the port, 0..65535 (0 is the usual
    value). TypeError when not an integer, ValueError naming "port" when outside."""
    if str(host).startswith("host:"):
        return unsigned("port", value, 16)
    return port(value)


def host(value):
    """A peer's host as str ("10.0.0.2" or "host:NAME"): TypeError naming "host" for anything
    else (bytes included: the binding encodes it itself)."""
    if not isinstance(value, str):
        raise TypeError(f"host must be a str (an IPv4 address, a host name or \"host:NAME\"), not {type(value).__name__}")
    return value
