"""tp.Stream: the stream an Executable runs on. On CPU engines it is a no-op handle."""

from __future__ import annotations

import itertools

from tripy_lab.core.device import device as Device
from tripy_lab.core.errors import raise_error

_ids = itertools.count()


class Stream:
    def __init__(self, priority: int = 0):
        self._id = next(_ids)
        self.priority = priority
        self._sync_hooks: list = []

    @property
    def ptr(self) -> int:
        """Raw stream handle; 0 (the default stream) on engines that manage their own streams."""
        return 0

    def synchronize(self) -> None:
        for hook in self._sync_hooks:
            hook()

    def __str__(self) -> str:
        return f"<Stream(id={self._id})>"

    __repr__ = __str__

    def __eq__(self, other) -> bool:
        return self is other

    __hash__ = object.__hash__


_DEFAULT: dict[str, Stream] = {}


def default_stream(device: Device | None = None) -> Stream:
    device = device or Device("gpu")
    if device.kind != "gpu":
        raise_error(f"default_stream creation requires device to be of type gpu, got device={device}.")
    return _DEFAULT.setdefault(str(device), Stream())
