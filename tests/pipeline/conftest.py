import pytest


@pytest.fixture(params=["reference", "xla"], autouse=True)
def engine(request, monkeypatch):
    """Every pipeline test runs on the reference interpreter and on XLA (CPU here, GPU on the GPU machine)."""
    import tripy_lab as tp

    if request.param == "xla":
        pytest.importorskip("jax")
    monkeypatch.setattr(tp.config, "engine", request.param)
    return request.param
