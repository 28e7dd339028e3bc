"""Calling the xla engine's executables: arguments checked and made jax-compatible, one cached caller per
argument signature, executables for new signatures built on first use, profiles."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from tripy_lab.core.bounds import InputInfo
from tripy_lab.core.errors import TripyException
from tripy_lab.engine.base import EngineProfile, LayerRecord, build_errors, call_point
from tripy_lab.engine.xla.executables import _Built, _x64


class Running:
    """XlaCompiled's calls: arguments checked and converted, the executable for their signature (built on
    first use), device time per call and layer."""

    def _validate(self, args) -> tuple[list, list, list]:
        """Concrete (shapes, dims, converted data args) of a call; checks dtypes and bounds."""
        if len(args) != len(self._block_args):
            raise TripyException(f"Expected {len(self._block_args)} arguments, got {len(args)}.")
        shapes, dims, data = [], [], []
        named: dict[str, tuple[int, str]] = {}
        for i in self._data_pos:
            name = self._arg_names[i]
            a = self._to_jax_compatible(args[i])
            data.append(a)
            dt = np.dtype(a.dtype)
            if dt != self._arg_dtypes[i]:
                raise TripyException(f"Argument '{name}' has dtype {dt}, expected {self._arg_dtypes[i]}.")
            shape = tuple(int(d) for d in a.shape)
            info = self.program.input_infos.get(name)
            want = self._arg_types[i]
            if len(shape) != len(want):
                raise TripyException(f"Argument '{name}' has rank {len(shape)}, expected {len(want)}.")
            if isinstance(info, InputInfo):
                b = info.shape_bounds
                for d, (s, lo, hi) in enumerate(zip(shape, b.min, b.max)):
                    if not lo <= s <= hi:
                        raise TripyException(f"Argument '{name}' dim {d} is {s}, outside its bounds [{lo}, {hi}].",
                                             [f"Shape {shape}; {b}."])
                for d, dn in info.dimension_names.items():
                    if dn in named and named[dn][0] != shape[d]:
                        raise TripyException(f"Dimension '{dn}' must be equal everywhere: {named[dn][1]} has "
                                             f"{named[dn][0]}, '{name}' dim {d} has {shape[d]}.")
                    named.setdefault(dn, (shape[d], f"'{name}' dim {d}"))
            else:
                for d, (s, w) in enumerate(zip(shape, want)):
                    if w is not None and s != w:
                        raise TripyException(f"Argument '{name}' dim {d} is {s}, expected {w}.")
            shapes.append(shape)
        for i in self._dim_pos:
            name = self._arg_names[i]
            v = int(np.asarray(args[i]).reshape(()))
            b = self.program.input_infos[name].value_bounds
            if not b.min[0] <= v <= b.max[0]:
                raise TripyException(f"DimensionInputInfo argument '{name}' is {v}, outside [{b.min[0]}, {b.max[0]}].")
            dims.append(v)
        return shapes, dims, data

    def _to_jax_compatible(self, a):
        if isinstance(a, (np.ndarray, self._jax.Array)):
            return a
        if isinstance(a, (np.generic, int, float, bool)):
            return np.asarray(a)
        if hasattr(a, "__dlpack__"):
            x = self._jax.dlpack.from_dlpack(a)
            if x.devices() != {self.device}:
                x = self._jax.device_put(x, self.device)
            return x
        return np.asarray(a)

    def run(self, args: Sequence[Any]) -> list[Any]:
        try:
            if not self._key_simple:
                call = self._calls[self._key(args)]
            elif len(args) == 1:  # without the list comprehension's frame
                a = args[0]
                call = self._calls[((type(a), a.shape, a.dtype),)]
            else:
                call = self._calls[tuple([(type(a), a.shape, a.dtype) for a in args])]
        except (KeyError, AttributeError, TypeError, IndexError):
            return self._run_miss(args)
        return list(call(args))

    def caller_for(self, args: Sequence[Any]):
        """The ``call(args) -> outputs`` that ``run`` used for arguments of this signature (None before ``run`` saw
        it, or for arguments without a shape and dtype). Like ``run`` on a hit it checks nothing: the Executable
        keeps it per signature it has checked. Each call counts a hit and keeps its outputs for ``synchronize``."""
        try:
            return self._calls.get(tuple([(type(a), a.shape, a.dtype) for a in args]) if self._key_simple
                                   else self._key(args))
        except (AttributeError, TypeError):
            return None

    def device_probes(self) -> list | None:
        """One tiny jax array on each device a jax array can be on in this process (every backend's), or None when
        a backend has several devices (an array could span them). The Executable asks their memory once and then
        trusts it for every array of their class (``executable.arguments.always_readable``)."""
        from jax.extend.backend import backends

        probes = []
        for client in backends().values():
            devices = client.devices()
            if len(devices) != 1:
                return None
            probes.append(self._jax.device_put(np.zeros((), np.float32), devices[0]))
        return probes

    def _key(self, args) -> tuple:
        key = [(type(a), a.shape, a.dtype) for a in args]
        for i in self._dim_pos:
            key[i] = int(args[i])
        return tuple(key)

    def _caller(self, built: _Built, convert: bool):
        """The cheapest ``call(args) -> outputs`` for this executable and these argument types, counting a cache
        hit and keeping the outputs for ``synchronize``; and the same call without the count (for a miss)."""
        fn, consts, data_pos, cache = self._direct(built.call), tuple(self._consts), self._data_pos, self.report.cache

        def plain(args):
            data = args if not self._dim_pos else [args[i] for i in data_pos]
            try:
                return fn(*data, *consts)
            except ValueError as exc:
                return _call_relaid(exc, fn, data, consts)

        if not self._dim_pos and not self._x64 and not convert:  # the hot path: one frame, then jax's C++ call
            # the try costs nothing until an argument comes laid out otherwise (``_call_relaid``)
            if consts:
                def call(args):
                    try:
                        out = self._last = fn(*args, *consts)
                    except ValueError as exc:
                        out = self._last = _call_relaid(exc, fn, args, consts)
                    cache["hits"] += 1
                    return out
            else:
                def call(args):
                    try:
                        out = self._last = fn(*args)
                    except ValueError as exc:
                        out = self._last = _call_relaid(exc, fn, args, ())
                    cache["hits"] += 1
                    return out

            return call, plain
        if self._x64:
            narrow = plain

            def plain(args):
                with _x64():
                    return narrow(args)
        if convert:
            inner, conv = plain, self._to_jax_compatible
            plain = lambda args: inner([conv(a) for a in args])  # noqa: E731

        def call(args):
            out = self._last = plain(args)
            cache["hits"] += 1
            return out

        return call, plain

    @staticmethod
    def _direct(fn):
        """What to call for a built executable: a loaded one (``jax.stages.Compiled``) is a Python ``__call__``
        around the C++ call jax makes on its first use; once made, calling that saves ~0.5 us a call. A jitted
        function is its C++ call already."""
        inner = getattr(fn, "_call", None)
        return inner if callable(inner) else fn

    def _run_miss(self, args):
        shapes, dims, data = self._validate(args)
        sig = self._sig(shapes, dims)
        built = self._execs.get(sig)
        if built is None:
            self.report.cache["misses"] += 1
            names = self._arg_names
            point = call_point(self.program, {**{names[i]: s for i, s in zip(self._data_pos, shapes)},
                                              **{names[i]: d for i, d in zip(self._dim_pos, dims)}})
            with self._build_lock:  # a warm-up may be compiling this very signature: wait for it, not twice
                built = self._execs.get(sig)
                if built is None:
                    with build_errors("xla", self.program, point):
                        built = self._build(shapes, dims, "first use")
        else:
            self.report.cache["hits"] += 1
        native = (np.ndarray, self._jax.Array)
        convert = any(not isinstance(args[i], native) for i in self._data_pos)
        call, plain = self._caller(built, convert)
        out = self._last = plain(list(args))
        if self._direct(built.call) is not built.call:  # jax made the C++ call on this first use: call it directly
            call = self._caller(built, convert)[0]
        try:
            key = tuple([(type(a), a.shape, a.dtype) for a in args]) if self._key_simple else self._key(args)
            self._calls[key] = call
        except (AttributeError, TypeError):  # arguments without shape/dtype: never cached, always converted
            pass
        return list(out)

    def warm(self, signature: dict) -> bool:
        """Compile ``signature`` ({arg: shape or value}) unless it is built; True when this call compiled it. The
        Executable's warm-up then calls it (``executable.warm``): that first run is where the device loads its
        kernels and jax makes its call path, for the argument types a user passes."""
        shapes, dims = self._point_signature("opt", signature)
        self._validate_signature(shapes, dims)
        with self._build_lock:
            if self._sig(shapes, dims) in self._execs:
                return False
            with build_errors("xla", self.program, call_point(self.program, signature)):
                built = self._build(shapes, dims, "warm-up")
        self.report.cache.setdefault("shapes_warmed", []).append(built.label)  # the Engine tab lists them
        return True

    def built_points(self) -> list[dict]:
        """Every signature built so far as ``{arg: shape or value}`` (the profile's points, first uses, warm-ups)."""
        names = self._arg_names
        return [{**{names[i]: s for i, s in zip(self._data_pos, shapes)},
                 **{names[i]: d for i, d in zip(self._dim_pos, dims)}} for shapes, dims in list(self._execs)]

    @property
    def evicts_on_build(self) -> bool:
        """On GPUs, XLA drops the recorded command buffers (CUDA graphs) of every executable whenever it makes a
        new one (``CommandBufferThunk``'s eviction): the next call of each then records its graph again,
        milliseconds on a GPT. So a warm-up calls every built signature once more after its last compile."""
        return self.device.platform != "cpu"

    def synchronize(self) -> None:
        if self._last is not None:
            self._jax.block_until_ready(self._last)

    def to_device(self, array: Any) -> Any:
        return self._jax.device_put(self._to_jax_compatible(array), self.device)

    def profile(self, args: Sequence[Any], calls: int = 10) -> EngineProfile:
        """Device time per call and per layer, from jax's profiler (see ``profile``)."""
        from tripy_lab.engine.xla.profile import SUSTAIN_S, profile_calls

        self.run(args)  # builds this signature if it is new
        self.synchronize()
        shapes, dims, _ = self._validate(args)
        layers = list(self.layers_for(self._execs[self._sig(shapes, dims)]))
        gpu = self.device.platform != "cpu"
        times = profile_calls(lambda: self.run(args), self.synchronize, calls, layers,
                              sustain_s=SUSTAIN_S if gpu else 0.0)
        if times is None:
            prof = super().profile(args, calls)
            prof.notes.append("the XLA profiler gave no events (another profiler session active?)")
            return prof
        known = {ly.name for ly in layers}
        for op in times.op_s:
            if op not in known:  # an instruction the layer table does not list: keep its time visible
                layers.append(LayerRecord(name=op, kind="unlisted", source_ops=(), source_lines=(),
                                          output_shapes=(), output_dtypes=()))
        where = ("CPU: span of the XLA thunk events of each call (XLA profiler)" if not gpu else
                 "device time from the XLA profiler's GPU kernel trace (first kernel start to last kernel end)"
                 + (f" of calls run back to back after {SUSTAIN_S:g} s of them (sustained clocks)"
                    if times.back_to_back else " of synchronized calls"))
        return EngineProfile(times.compute_s, {ly.name: times.op_s.get(ly.name, 0.0) for ly in layers}, layers,
                             where, times.notes, times.wall_s)


def _call_relaid(exc: ValueError, fn, args, consts):
    """``fn(*args, *consts)`` again with every jax array argument in XLA's default (row-major) layout, when jax
    refused ``args`` for their layouts: an output of an N-major head (``split.HEAD_LAYOUT``) passed on to an
    executable compiled for row-major inputs. Any other error is raised again."""
    if "layouts that disagree" not in str(exc):
        raise exc
    import jax
    from jax.experimental.layout import Format, Layout

    def row_major(a):
        if not isinstance(a, jax.Array) or a.format.layout.major_to_minor == tuple(range(a.ndim)):
            return a
        return jax.device_put(a, Format(Layout(major_to_minor=tuple(range(a.ndim))), a.sharding))

    return fn(*[row_major(a) for a in args], *consts)
