"""Railyard's Python binding: ctypes over the C API of libnccl-net-railyard.so
(include/railyard/railyard.h). No build step; the library is found by _lib.load()."""
