"""``tripy-lab doctor``: what this machine can run, one line per check, and whether the default path works.

The default path is the README's first command: JupyterLab with widgets on the tutorials, traces drawn by
graphviz, and the default engine compiling and running a small function correctly. A broken default path
makes the exit code 1; missing extras (TensorRT, onnxruntime, the extension) are reported, not fatal.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import platform
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass

OK, WARN, FAIL, INFO = "ok", "warn", "FAIL", "--"


@dataclass
class Check:
    status: str  # OK, WARN, FAIL or INFO
    name: str
    detail: str

    def line(self) -> str:
        return f"{self.status:<5} {self.name:<22} {self.detail}"


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def _package(name: str, dist: str, needed: bool, why: str) -> Check:
    v = _version(dist) if importlib.util.find_spec(name) is not None else None
    if v is not None:
        return Check(OK, dist, v)
    return Check(FAIL if needed else INFO, dist, f"not installed ({why})")


def _engine_checks() -> list[Check]:
    """Each engine: can it build and run a small dynamic-shape function here, and does it match numpy."""
    import numpy as np

    import tripy_lab as tp
    from tripy_lab.engine.registry import ENGINES, _has, _has_cuda_gpu, default_engine

    default, reason = default_engine()
    out = []
    for name in ENGINES:
        if name == "xla" and not _has("jax"):
            out.append(Check(FAIL if default == name else INFO, "engine xla", "not usable: jax is not installed"))
            continue
        missing = [m for m in ("onnx", "onnxruntime") if not _has(m)] if name == "onnxruntime" else []
        if missing:
            out.append(Check(INFO, "engine onnxruntime", f"not usable: {' and '.join(missing)} not installed "
                                                         "(pip install '.[onnx]')"))
            continue
        if name == "tensorrt" and not (_has("tensorrt") and _has_cuda_gpu()):
            why = "TensorRT is not installed" if not _has("tensorrt") else "no CUDA GPU is visible"
            out.append(Check(INFO, "engine tensorrt", f"not usable: {why}"))
            continue
        try:
            info = tp.InputInfo(((1, 2, 3), 4), tp.float32)
            exe = tp.compile(lambda a, b: tp.exp(a) * b + 1.0, args=[info, info], engine=name)
            a = np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4)
            got = np.asarray(exe(tp.Tensor(a).eval(), tp.Tensor(a).eval()))
            err = float(np.max(np.abs(got - (np.exp(a) * a + 1.0))))
            status = OK if err < 1e-5 else FAIL
            out.append(Check(status, f"engine {name}", f"usable: compiled and ran exp(a)*b+1, max error {err:.1e}"))
        except Exception as exc:  # report, don't crash: this is the point of the doctor
            out.append(Check(FAIL, f"engine {name}", f"not usable: {type(exc).__name__}: {exc}".splitlines()[0]))
    status = next((c.status for c in out if c.name == f"engine {default}"), FAIL)
    out.append(Check(status, "default engine", f"{default} ({reason})"))
    return out


def _jax_devices() -> Check:
    if importlib.util.find_spec("jax") is None:
        return Check(INFO, "jax devices", "jax is not installed")
    try:
        import jax

        devices = ", ".join(f"{d.platform}:{d.id}" for d in jax.devices())
        return Check(OK, "jax devices", f"jax {jax.__version__}: {devices}")
    except Exception as exc:
        return Check(WARN, "jax devices", f"{type(exc).__name__}: {exc}".splitlines()[0])


def _graphviz() -> Check:
    dot = shutil.which("dot")
    if dot is None:
        return Check(FAIL, "graphviz dot", "not on PATH: traces are not drawn (apt-get install graphviz)")
    run = subprocess.run([dot, "-V"], capture_output=True, text=True, timeout=20)
    return Check(OK, "graphviz dot", f"{dot}: {(run.stderr or run.stdout).strip()}")


def _extension() -> Check:
    """The JupyterLab extension (the crosswalk renderer), as ``jupyter labextension list`` sees it."""
    if importlib.util.find_spec("jupyterlab") is None:
        return Check(INFO, "lab extension", "JupyterLab is not installed")
    try:
        run = subprocess.run([sys.executable, "-m", "jupyter", "labextension", "list"], capture_output=True,
                             text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return Check(WARN, "lab extension", f"could not run `jupyter labextension list`: {exc}")
    text = re.sub(r"\x1b\[[0-9;]*m", "", run.stdout + run.stderr)  # its colours
    line = next((ln.strip() for ln in text.splitlines() if ln.strip().startswith("tripy-lab ")), None)
    if line is None:
        return Check(WARN, "lab extension", "tripy-lab is not installed: the Crosswalk tab shows its static "
                                            "fallback (pip install . builds it)")
    if "enabled" in line and "OK" in line:
        return Check(OK, "lab extension", line)
    return Check(WARN, "lab extension", f"{line} (not enabled: jupyter labextension enable tripy-lab)")


def run_checks() -> list[Check]:
    import tripy_lab

    checks = [
        Check(OK, "python", f"{platform.python_version()} ({sys.executable})"),
        Check(OK, "tripy-lab", f"{tripy_lab.__version__} ({tripy_lab.__file__.rsplit('/', 1)[0]})"),
        _package("jupyterlab", "jupyterlab", True, "the lab needs it: pip install '.[lab]'"),
        _package("ipywidgets", "ipywidgets", True, "%%tpcompile widgets need it"),
        _package("pandas", "pandas", True, "tables need it"),
        _graphviz(),
        _extension(),
        *_engine_checks(),
        _jax_devices(),
        _package("tensorrt", "tensorrt", False, "the tensorrt engine needs it and a CUDA GPU"),
        _package("onnxruntime", "onnxruntime", False, "the onnxruntime engine needs it"),
        _package("onnx", "onnx", False, "the onnxruntime engine and ONNX export need it"),
    ]
    return checks


def main() -> int:
    checks = run_checks()
    for check in checks:
        print(check.line())
    broken = [c.name for c in checks if c.status == FAIL]
    if broken:
        print(f"\nThe default path is broken: {', '.join(broken)}.")
        return 1
    print("\nThe default path works: `tripy-lab` opens the tutorials.")
    return 0
