"""ONNX export of a program, and the ``trtexec`` / ``polygraphy run`` command lines for its profile.

``export_onnx(program, path)`` writes the model ``onnx_lowering`` makes (the same graph the onnxruntime
engine runs), after ``onnx.checker.check_model(full_check=True)`` (which runs strict shape inference).
Models above 1.8 GB keep their initializers in ``<path>.data`` (protobuf cannot hold 2 GB).
"""

from __future__ import annotations

import os
import shlex

from tripy_lab.core.bounds import DimensionInputInfo, InputInfo
from tripy_lab.core.errors import TripyException

EXTERNAL_DATA_ABOVE = 1_800_000_000  # bytes


def check(model) -> None:
    """``onnx.checker`` with full shape inference; failures become a TripyException."""
    import onnx

    try:
        onnx.checker.check_model(model, full_check=True)
    except Exception as exc:  # onnx.checker.ValidationError, shape inference errors
        raise TripyException("The exported ONNX model does not pass onnx.checker.",
                             [str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__]) from exc


def export_onnx(program, path: str, lowering=None) -> str:
    """Write ``program`` as ONNX to ``path`` (checked); returns the path."""
    import onnx

    from tripy_lab.engine.onnx.lowering import lower_to_onnx

    model = (lowering or lower_to_onnx(program)).model
    big = model.ByteSize() > EXTERNAL_DATA_ABOVE
    if big:  # the checker reads large models from disk
        onnx.save(model, path, save_as_external_data=True, location=os.path.basename(path) + ".data")
        check(path)
    else:
        check(model)
        onnx.save(model, path)
    return path


def _dims(shape) -> str:
    return "x".join(str(d) for d in shape)


def shape_flags(program, style: str = "trtexec") -> dict[str, str]:
    """``{"min": "x:1x6,s:2", ...}`` (trtexec) or ``{"min": "x:[1,6] s:[2]", ...}`` (polygraphy).

    A DimensionInputInfo is a scalar shape-tensor input: trtexec and polygraphy take its *values* in the
    same flags.
    """
    out = {}
    for point in ("min", "opt", "max"):
        parts = []
        for name, info in program.input_infos.items():
            if isinstance(info, DimensionInputInfo):
                value = getattr(info.value_bounds, point)[0]
                parts.append(f"{name}:{value}" if style == "trtexec" else f"{name}:[{value}]")
            elif isinstance(info, InputInfo):
                shape = getattr(info.shape_bounds, point)
                parts.append(f"{name}:{_dims(shape)}" if style == "trtexec"
                             else f"{name}:[{','.join(str(d) for d in shape)}]")
        out[point] = ("," if style == "trtexec" else " ").join(parts)
    return out


def trtexec_command(program, onnx_path: str = "model.onnx") -> str:
    """The ``trtexec`` line that builds a TensorRT engine for the same profile as the InputInfos."""
    f = shape_flags(program, "trtexec")
    args = ["trtexec", f"--onnx={onnx_path}"]
    if any(f.values()):
        args += [f"--minShapes={f['min']}", f"--optShapes={f['opt']}", f"--maxShapes={f['max']}"]
    return " ".join(shlex.quote(a) for a in args)


def polygraphy_command(program, onnx_path: str = "model.onnx") -> str:
    """The ``polygraphy run`` line that compares TensorRT with onnxruntime over the same profile."""
    f = shape_flags(program, "polygraphy")
    args = ["polygraphy", "run", onnx_path, "--trt", "--onnxrt"]
    if any(f.values()):
        for point in ("min", "opt", "max"):
            args.append(f"--trt-{point}-shapes")
            args += f[point].split(" ")
        args.append("--input-shapes")
        args += f["opt"].split(" ")
    return " ".join(shlex.quote(a) for a in args)
