"""Railyard's Python bindings (ctypes over include/railyard/railyard.h)."""
