"""Issue 8, findings 3, 5 and 8: `Tensor.shape` of compile tracers, DimensionSize eval, logger verbosity strings,
NamedDimension bounds reuse, leaked tracers and wrong argument types -- each a value or a TripyException."""

import numpy as np
import pytest

import tripy_lab as tp


def test_shape_of_compile_tracers_is_dimension_sizes_even_when_static():
    seen = {}

    def f(x):
        seen["x"] = x.shape
        seen["y"] = (x + 1).shape
        seen["const"] = tp.ones((2, 3)).shape
        return x * tp.cast(x.shape[-1], x.dtype)  # SAM2 casts a dim to the compute dtype

    exe = tp.compile(f, args=[tp.InputInfo((2, 3), tp.float32)])
    assert all(isinstance(d, tp.DimensionSize) for d in seen["x"] + seen["y"])
    assert seen["const"] == (2, 3) and all(type(d) is int for d in seen["const"])
    out = exe(tp.Tensor(np.full((2, 3), 2.0, np.float32)).eval())
    np.testing.assert_array_equal(np.asarray(out), np.full((2, 3), 6.0, np.float32))
    assert tp.ones((4, 5)).shape == (4, 5)  # eager tensors keep plain ints


def test_dynamic_dims_of_tracers_stay_runtime_values():
    def f(x):
        b, t = x.shape
        return tp.reshape(x, (b * t,)) * tp.cast(t, tp.float32)

    exe = tp.compile(f, args=[tp.InputInfo(((1, 2, 4), (1, 3, 5)), tp.float32)])
    x = np.ones((3, 4), np.float32)
    np.testing.assert_array_equal(np.asarray(exe(tp.Tensor(x).eval())), np.full(12, 4.0, np.float32))


def test_dimension_size_eval_and_arithmetic():
    d = tp.DimensionSize(2)
    assert d.eval() is d and int(d) == 2 and str(d) == "2" and d.device.kind == "cpu"
    e = (d * 3 + 1).eval()
    assert isinstance(e, tp.DimensionSize) and int(e) == 7
    assert tp.cast(tp.DimensionSize(5), tp.float32).tolist() == 5.0


def test_logger_verbosity_strings_are_levels_not_letters(capsys):
    with tp.logger.use_verbosity({"": "verbose"}):  # a dict value that is one string
        assert tp.logger.enabled("verbose") and tp.logger.enabled("info")
        tp.logger.verbose("dict-string")
    with tp.logger.use_verbosity("info"):
        assert tp.logger.verbosity == {"": {"info", "warning", "error"}}
    with tp.logger.use_verbosity({"frontend": "verbose"}):  # per-module, as nvtripy
        assert tp.logger.enabled("verbose", "tripy_lab.frontend.ops_math")
        assert not tp.logger.enabled("verbose", "tripy_lab.pipeline.compile")
        assert tp.logger.enabled("info", "tripy_lab.pipeline.compile")  # "" defaults to info
    with tp.logger.use_verbosity({"pipeline": "timing"}):
        tp.compile(lambda a: a + a, args=[tp.InputInfo((2,), tp.float32)])
    assert tp.logger.verbosity == {"": {"info", "warning", "error"}}
    out = capsys.readouterr().out
    assert "[V] dict-string" in out and "==== Timing ====" in out


def test_named_dimension_reused_with_different_bounds_is_flagged():
    a, b = tp.NamedDimension("batch", 1, 2, 4), tp.NamedDimension("batch", 1, 3, 8)
    with pytest.raises(tp.TripyException, match="NamedDimension 'batch' is used with different bounds") as e:
        tp.compile(lambda x, y: x + y, args=[tp.InputInfo((a, 2), tp.float32), tp.InputInfo((b, 2), tp.float32)])
    assert "x[0]" in str(e.value) and "(1, 2, 4)" in str(e.value) and "y[0]" in str(e.value) and "(1, 3, 8)" in str(
        e.value)
    with pytest.raises(tp.TripyException, match="different bounds"):
        tp.InputInfo((a, b), tp.float32)
    same = tp.NamedDimension("batch", 1, 2, 4)
    exe = tp.compile(lambda x, y: x + y, args=[tp.InputInfo((a, 2), tp.float32), tp.InputInfo((same, 2), tp.float32)])
    assert exe(tp.ones((3, 2)).eval(), tp.ones((3, 2)).eval()).tolist() == [[2.0, 2.0]] * 3


def test_tracer_leaked_by_a_side_effect_is_a_tripy_exception():
    side = []

    def f(a):
        b = a + 1
        side.append(b)
        return b * 2

    exe = tp.compile(f, args=[tp.InputInfo((2, 2), tp.float32)])
    for use in (lambda: side[0].eval(), lambda: print(side[0]), lambda: (side[0] * 3).eval(),
                lambda: tp.compile(lambda y: y + side[0], args=[tp.InputInfo((2, 2), tp.float32)])):
        with pytest.raises(tp.TripyException, match="traced by tp.compile outside the function") as e:
            use()
        assert "'a'" in str(e.value)
    assert exe(tp.ones((2, 2)).eval()).tolist() == [[4.0, 4.0], [4.0, 4.0]]


@pytest.mark.parametrize("call", [
    lambda x: tp.expand(x, 2), lambda x: tp.expand(x, None), lambda x: tp.permute(x, 1),
    lambda x: tp.permute(x, (1, "a")), lambda x: tp.stack([x, 1.5]), lambda x: tp.Linear("a", 2),
    lambda x: tp.Conv(None, 2, (1, 1)), lambda x: tp.GroupNorm("a", 2), lambda x: tp.LayerNorm(2.5),
    lambda x: tp.Embedding(3, None), lambda x: tp.BatchNorm([1]), lambda x: tp.InstanceNorm(None),
    lambda x: tp.allclose(x, x, rtol="a"),
])
def test_wrong_argument_types_are_tripy_exceptions(call):
    with pytest.raises(tp.TripyException, match="Could not find an implementation for function"):
        call(tp.ones((2, 3)))


_BAD = [2.5, "a", None, [1.5], (1, "a"), object(), {}]
_FILL = {"dim": 0, "dims": 0, "dtype": tp.float32, "shape": (2, 3), "sizes": (2, 3), "perm": (1, 0), "k": 1,
         "dim0": 0, "dim1": 1, "kernel_dims": [1, 1], "pad": [(0, 0), (0, 0)], "num_split_or_sizes": 1,
         "repeats": 1, "scale": 1.0, "value": 1.0, "stop": 3, "in_features": 3, "out_features": 2,
         "in_channels": 1, "out_channels": 1, "num_embeddings": 3, "embedding_dim": 2, "normalized_shape": 3,
         "num_groups": 1, "num_channels": 1, "num_features": 1}
_SKIP = {"compile", "copy", "plugin", "default_stream", "load_ipython_extension", "Module", "Sequential"}


def _public_callables():
    import inspect

    for name in sorted(dir(tp)):
        obj = getattr(tp, name)
        if name.startswith("_") or name in _SKIP:
            continue
        if inspect.isfunction(obj) or (inspect.isclass(obj) and issubclass(obj, tp.Module)):
            yield name, obj


def test_sweep_wrong_argument_types_never_raise_raw_python_errors():
    """Every public function and layer, each parameter given each wrong type (graphs are built, not run)."""
    import inspect

    t, mask, index = tp.ones((2, 3)), tp.ones((2, 3), tp.bool), tp.zeros((2,), tp.int32)
    fill = dict(_FILL, tensors=[t, t], condition=mask, mask=mask, index=index)
    raw = []
    for name, fn in _public_callables():
        params = [p for p in inspect.signature(fn).parameters.values() if p.kind in (p.POSITIONAL_OR_KEYWORD,
                                                                                    p.KEYWORD_ONLY)]
        first_tensor = inspect.isfunction(fn)
        for target in params:
            for bad in _BAD:
                kw = {p.name: (t if first_tensor and j == 0 else fill.get(p.name, t))
                      for j, p in enumerate(params) if p.default is inspect.Parameter.empty and p is not target}
                kw[target.name] = bad
                try:
                    fn(**kw)
                except tp.TripyException:
                    pass
                except Exception as e:  # noqa: BLE001 - the point: nothing but TripyException escapes
                    raw.append(f"{name}({target.name}={bad!r}): {type(e).__name__}: {e}")
    assert not raw, "\n".join(raw[:20])
