"""Small versions of NVIDIA's Tripy example programs, written with the same API patterns (our own code).

Each program is compiled, run and compared with numpy, then saved, loaded and compared again, on the
``reference``, ``xla`` and ``onnxruntime`` engines (the ``engine`` fixture)."""

import numpy as np
import pytest

import tripy_lab as tp


@pytest.fixture(params=["reference", "xla", "onnxruntime"])
def engine(request, monkeypatch):
    if request.param == "xla":
        pytest.importorskip("jax")
    if request.param == "onnxruntime":
        pytest.importorskip("onnxruntime")
    monkeypatch.setattr(tp.config, "engine", request.param)
    return request.param


@pytest.fixture
def check_program(engine, tmp_path):
    """compile ``func`` with ``args``; every (inputs, expected) case must match, and the last one again after
    save/load (xla compiles each new shape, so the loaded executable runs one)."""

    def run(func, args, cases, rtol=1e-4, atol=1e-4, kwargs=None):
        exe = tp.compile(func, args=args, kwargs=kwargs or {}, engine=engine)
        path = str(tmp_path / "program.json")
        exe.save(path)
        loaded = tp.Executable.load(path, engine=engine)
        for which, e, todo in (("compiled", exe, cases), ("loaded", loaded, cases[-1:])):
            for inputs, want in todo:
                got = e(*[tp.Tensor(np.asarray(a)).eval() if not isinstance(a, tp.Tensor) else a for a in inputs])
                got = got if isinstance(got, (tuple, list)) else (got,)
                want = want if isinstance(want, (tuple, list)) else (want,)
                assert len(got) == len(want)
                for g, w in zip(got, want):
                    np.testing.assert_allclose(np.asarray(g), w, rtol=rtol, atol=atol,
                                               err_msg=f"{which} executable ({engine})")
        return exe

    return run
