"""Executable and Stream."""

from tripy_lab.executable.executable import Executable
from tripy_lab.executable.stream import Stream, default_stream

__all__ = ["Executable", "Stream", "default_stream"]
