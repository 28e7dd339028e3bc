"""GPU tests are collected only where jax sees a CUDA device (the GPU machine); elsewhere they are not
collected at all rather than reported as skipped."""


def _has_cuda() -> bool:
    try:
        import jax

        return any(d.platform == "gpu" for d in jax.devices())
    except Exception:
        return False


def pytest_ignore_collect(collection_path, config):
    if collection_path.suffix == ".py" and collection_path.name.startswith("test_"):
        return not _has_cuda()
    return None
