import numpy as np
import pytest

import tripy_lab as tp
from tripy_lab.core.errors import TripyException
from tripy_lab.pipeline.variants import int8_weight_scale, variant


class Net(tp.Module):
    def __init__(self):
        super().__init__()
        self.fc = tp.Linear(8, 4)
        self.norm = tp.LayerNorm(4)
        self.layers = [tp.Linear(4, 4, bias=False)]

    def forward(self, x):
        return self.layers[0](self.norm(self.fc(x)))


def _net(seed=0):
    rng = np.random.default_rng(seed)
    net = Net()
    for key, p in net.state_dict().items():
        net._set_by_key(key, tp.Tensor(rng.standard_normal(p.shape).astype(np.float32)))
    return net


def _run(func, args, x):
    exe = tp.compile(func, args=args)
    return np.asarray(exe(tp.Tensor(x)).numpy(), dtype=np.float32)


@pytest.mark.parametrize("name", ["float16", "bfloat16", tp.float16])
def test_dtype_variant_casts_inputs_and_parameters_but_not_the_original(name):
    net = _net()
    before = {k: (v.dtype, v.numpy().copy()) for k, v in net.state_dict().items()}
    info = tp.InputInfo((2, 8), tp.float32)
    func, args = variant(net, [info], dtype=name)
    want = tp.float16 if name in ("float16", tp.float16) else tp.bfloat16
    assert func is not net and args[0].dtype is want and args[0].shape_bounds == info.shape_bounds
    assert {v.dtype for v in func.state_dict().values()} == {want}
    assert func.fc.dtype is want and func.layers[0] is not net.layers[0]
    # the original: same dtypes, same values, same Python objects
    for k, v in net.state_dict().items():
        assert v.dtype is before[k][0] and np.array_equal(v.numpy(), before[k][1])
    x = np.random.default_rng(1).standard_normal((2, 8)).astype(np.float32)
    ref = _run(net, [info], x)
    got = _run(func, args, x.astype(tp.core.dtypes.to_numpy(want)))
    assert np.allclose(got, ref, atol=0.1, rtol=0.05) and not np.array_equal(got, ref)


def test_int8_weight_only_quantizes_each_linear_per_output_channel():
    net = _net()
    info = tp.InputInfo((2, 8), tp.float32)
    func, args = variant(net, [info], quantize="int8")
    for layer, orig in ((func.fc, net.fc), (func.layers[0], net.layers[0])):
        assert layer.quant_dtype is tp.int8 and layer.weight_quant_dim == 0
        assert np.allclose(layer.weight_scale.numpy(), np.abs(orig.weight.numpy()).max(axis=1) / 127)
    assert net.fc.quant_dtype is None and net.fc.weight_scale is None
    x = np.random.default_rng(2).standard_normal((2, 8)).astype(np.float32)
    ref, got = _run(net, [info], x), _run(func, args, x)
    assert 0 < np.abs(got - ref).max() < 0.1
    # the same numbers by hand: round(w / s) * s per row
    w = net.fc.weight.numpy()
    s = int8_weight_scale(w)[:, None]
    assert np.allclose(func.fc.weight_scale.numpy()[:, None], s)


def test_float_arrays_and_tensors_in_args_are_cast_ints_are_not():
    func, args = variant(lambda a, b, c: a, [np.ones(3, np.float32), tp.Tensor([1.0, 2.0]), np.arange(3)],
                         dtype="float16")
    assert args[0].dtype == np.float16 and args[1].dtype is tp.float16 and args[2].dtype == np.arange(3).dtype


def test_bad_values_raise_naming_the_parameter():
    with pytest.raises(TripyException, match="dtype.*float64"):
        variant(_net(), [], dtype="float64")
    with pytest.raises(TripyException, match="quantize.*int4"):
        variant(_net(), [], quantize="int4")
    with pytest.raises(TripyException, match="plain function"):
        variant(lambda x: x, [], quantize="int8")
