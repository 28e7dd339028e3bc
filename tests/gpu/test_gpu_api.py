"""tp.copy between host and GPU memory, and GPU-resident constants in graphs: run on the GPU machine with
`pytest -m gpu tests/gpu`."""

import numpy as np
import pytest

import tripy_lab as tp

pytestmark = pytest.mark.gpu


def _gpu_library():
    for name in ("cupy", "torch"):
        try:
            lib = __import__(name)
        except ImportError:
            continue
        if name == "cupy" or lib.cuda.is_available():
            return name
    return None


if _gpu_library() is None:
    pytest.skip("no cupy or torch with a CUDA device", allow_module_level=True)


def test_copy_to_gpu_and_back():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    gpu = tp.copy(tp.Tensor(a), tp.device("gpu"))
    assert gpu.device.kind == "gpu"
    assert gpu.__dlpack_device__()[0] == 2  # kDLCUDA
    host = tp.copy(gpu, tp.device("cpu"))
    assert host.device.kind == "cpu"
    np.testing.assert_array_equal(np.asarray(host), a)
    with pytest.raises(tp.TripyException, match="Copying within the same device kind"):
        tp.copy(gpu, tp.device("gpu"))


def test_gpu_constant_in_a_graph():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    gpu = tp.copy(tp.Tensor(a), tp.device("gpu"))
    out = tp.sum(tp.flip(gpu, dim=1) * 2.0, dim=0)
    np.testing.assert_allclose(np.asarray(tp.copy(out, tp.device("cpu"))), (a[:, ::-1] * 2).sum(0))


def test_tensor_from_python_data_on_the_gpu():
    t = tp.Tensor([[1.0, 2.0]], device=tp.device("gpu"))
    assert t.device.kind == "gpu"
    assert tp.copy(t, tp.device("cpu")).tolist() == [[1.0, 2.0]]
