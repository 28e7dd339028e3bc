"""CPU steady state (issue 31 item 4): GPT-2 on the xla and onnxruntime engines against their peers.

    python benchmarks/bench_cpu_steady.py              # GPT-2 small (12 layers, d 768, vocab 50257), T=64
    python benchmarks/bench_cpu_steady.py --small      # 2 layers, d 128, vocab 1000 (a shared 2-core VM)

One process, one set of f32 weights (``bench_onnx.GPT``: nanoGPT, exact GELU, tied head), ids [B, T]:
  (a) ``tp.compile(engine="xla")``  vs the same forward pass written in jax.numpy under ``jax.jit``
  (b) ``tp.compile(engine="onnxruntime")`` vs the same model written in torch, exported by
      ``torch.onnx.export`` (the legacy exporter; ``--exporter dynamo`` needs onnxscript) with a dynamic T
      (our engine's one session covers the profile too), run by an ``onnxruntime.InferenceSession`` with
      the options a user sets: ORT's defaults (ORT_ENABLE_ALL, one intra-op thread per physical core, as
      in the onnxruntime engine's session).
Timing: one comparison at a time, ``--reps`` rounds; each round times both runners ``--calls`` times back to
back (which goes first alternates, so load spikes hit both) and keeps the round's median; reported: the
median over rounds of each runner, and the median (and range) over rounds of the within-round ratios.
Outputs are compared (xla vs jax.jit, ours vs torch's ONNX, both vs torch eager). Goals: (a) <= 1.05x,
(b) <= 1.1x.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
import warnings

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_onnx import GPT, jax_forward, randomize  # noqa: E402  (the model bench_onnx measures)

import tripy_lab as tp  # noqa: E402

GOALS = {"xla_vs_jit": 1.05, "ort_vs_torch_ort": 1.1}


def torch_forward(cfg, weights):
    """The same GPT in torch (F.linear, F.layer_norm, exact GELU, explicit causal softmax), on ``weights``."""
    import torch
    import torch.nn.functional as F

    d, h, layers = cfg["d"], cfg["heads"], cfg["layers"]

    class Torch(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.p = torch.nn.ParameterDict({k.replace(".", "_"): torch.nn.Parameter(torch.from_numpy(v.copy()),
                                                                                     requires_grad=False)
                                             for k, v in weights.items()})
            self.register_buffer("mask", torch.tril(torch.ones(cfg["ctx"], cfg["ctx"], dtype=torch.bool)))

        def forward(self, idx):
            p = lambda n: self.p[n.replace(".", "_")]  # noqa: E731
            b, t = idx.shape
            x = p("wte.weight")[idx] + p("wpe.weight")[:t]
            mask = self.mask[:t, :t]
            for i in range(layers):
                k = f"blocks.{i}."
                y = F.layer_norm(x, (d,), p(k + "ln1.weight"), p(k + "ln1.bias"))
                qkv = F.linear(y, p(k + "qkv.weight"), p(k + "qkv.bias")).view(b, t, 3, h, d // h)
                q, kk, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)
                att = (q @ kk.transpose(-1, -2)) * (1.0 / (d // h) ** 0.5)
                att = torch.softmax(att.masked_fill(~mask, float("-inf")), dim=-1)
                y = (att @ v).transpose(1, 2).reshape(b, t, d)
                x = x + F.linear(y, p(k + "proj.weight"), p(k + "proj.bias"))
                y = F.layer_norm(x, (d,), p(k + "ln2.weight"), p(k + "ln2.bias"))
                x = x + F.linear(F.gelu(F.linear(y, p(k + "fc.weight"), p(k + "fc.bias"))),
                                 p(k + "out.weight"), p(k + "out.bias"))
            return F.layer_norm(x, (d,), p("ln.weight"), p("ln.bias")) @ p("wte.weight").T

    return Torch().eval()


def export_torch(module, path: str, batch: int, t: int, exporter: str) -> None:
    """``torch.onnx.export`` with a dynamic T: the legacy (TorchScript) exporter, or the dynamo one (needs
    onnxscript)."""
    import torch

    example = (torch.zeros((batch, t), dtype=torch.int64),)
    if exporter == "dynamo":
        torch.onnx.export(module, example, path, input_names=["idx"], output_names=["logits"],
                          dynamic_shapes={"idx": {1: torch.export.Dim("T", min=2, max=module.mask.shape[0])}},
                          dynamo=True, external_data=False)
    else:
        torch.onnx.export(module, example, path, input_names=["idx"], output_names=["logits"],
                          dynamic_axes={"idx": {1: "T"}, "logits": {1: "T"}}, dynamo=False, opset_version=17)


def session(path_or_bytes, optimized: str):
    import onnxruntime as ort

    so = ort.SessionOptions()  # ORT's defaults: ORT_ENABLE_ALL, intra-op threads = physical cores, spinning
    so.optimized_model_filepath = optimized  # (to count its nodes)
    so.log_severity_level = 3
    return ort.InferenceSession(path_or_bytes, so, providers=["CPUExecutionProvider"])


def timed_rounds(runners: dict, reps: int, calls: int) -> dict[str, list[float]]:
    """ms per call: each round runs every runner ``calls`` times (rotating order) and keeps its median."""
    names = list(runners)
    out: dict[str, list[float]] = {n: [] for n in names}
    for r in range(reps):
        for n in names[r % len(names):] + names[:r % len(names)]:
            fn, times = runners[n], []
            for _ in range(calls):
                t0 = time.perf_counter()
                fn()
                times.append((time.perf_counter() - t0) * 1e3)
            out[n].append(statistics.median(times))
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--small", action="store_true", help="2 layers, d 128, 4 heads, vocab 1000, context 128")
    ap.add_argument("--layers", type=int)
    ap.add_argument("--d", type=int)
    ap.add_argument("--heads", type=int)
    ap.add_argument("--vocab", type=int)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--t", type=int, default=64, help="sequence length timed (the profile is T in [1, ctx])")
    ap.add_argument("--reps", type=int, default=9, help="rounds")
    ap.add_argument("--calls", type=int, default=5, help="calls per runner per round")
    ap.add_argument("--only", default="xla,onnxruntime", help="which comparisons: xla, onnxruntime")
    ap.add_argument("--exporter", choices=("legacy", "dynamo"), default="legacy",
                    help="torch.onnx.export's exporter (dynamo needs onnxscript)")
    ap.add_argument("--json", help="write the results here")
    args = ap.parse_args(argv)
    cfg = (dict(vocab=1000, ctx=128, d=128, heads=4, layers=2) if args.small
           else dict(vocab=50257, ctx=1024, d=768, heads=12, layers=12))
    for k in ("layers", "d", "heads", "vocab"):
        if getattr(args, k):
            cfg[k] = getattr(args, k)
    only = set(args.only.split(","))
    import jax

    tp.config.compilation_cache_dir = tempfile.mkdtemp(prefix="bench_cpu_steady_")  # no stale executables
    model = GPT(**cfg)
    weights = randomize(model)
    b, t = args.batch, args.t
    ids = np.random.default_rng(1).integers(0, cfg["vocab"], size=(b, t)).astype(np.int32)
    results = {"config": cfg, "batch": b, "t": t, "cpus": os.cpu_count(),
               "machine": platform.processor() or platform.machine(), "jax": jax.__version__,
               "load_before": os.getloadavg()[0]}
    runners, outputs = {}, {}
    info = tp.InputInfo((b, (1, t, cfg["ctx"])), tp.int32)
    x = tp.Tensor(ids)
    if "xla" in only:
        exe = tp.compile(model, args=[info], engine="xla")
        jitted = jax_forward(cfg)
        p = {k: jax.device_put(v) for k, v in weights.items()}
        # the same work on both sides: ids from host memory in, logits to host memory out
        runners["xla"] = lambda: np.asarray(exe(x))
        runners["jax.jit"] = lambda: np.asarray(jitted(p, ids))
        outputs["xla"], outputs["jax.jit"] = np.asarray(exe(x)), np.asarray(jitted(p, ids))
    if "onnxruntime" in only:
        import onnx
        import onnxruntime as ort
        import torch

        ours = tp.compile(model, args=[info], engine="onnxruntime")
        tm = torch_forward(cfg, weights)
        path = os.path.join(tempfile.mkdtemp(prefix="bench_cpu_steady_onnx_"), "gpt_torch.onnx")
        t0 = time.perf_counter()
        results["torch_exporter"] = args.exporter
        with warnings.catch_warnings():  # torch's note that the legacy exporter is not its default any more
            warnings.simplefilter("ignore", DeprecationWarning)
            export_torch(tm, path, b, t, args.exporter)
        results["torch_export_s"] = time.perf_counter() - t0
        theirs = session(path, optimized=os.path.join(os.path.dirname(path), "optimized.onnx"))
        results["ort_nodes_torch"] = len(onnx.load(os.path.join(os.path.dirname(path), "optimized.onnx")).graph.node)
        feed = {theirs.get_inputs()[0].name: ids.astype(np.int64)}
        results["onnxruntime"] = ort.__version__
        results["torch"] = torch.__version__
        results["ort_nodes_ours"] = len(ours._compiled.optimized_model.graph.node)
        runners["onnxruntime"] = lambda: np.asarray(ours(x))
        runners["torch->ort"] = lambda: theirs.run(None, feed)
        outputs["onnxruntime"], outputs["torch->ort"] = np.asarray(ours(x)), theirs.run(None, feed)[0]
        with torch.no_grad():
            outputs["torch eager"] = tm(torch.from_numpy(ids.astype(np.int64))).numpy()
    ref = outputs.get("torch eager", outputs.get("jax.jit"))
    for name, out in outputs.items():
        err = float(np.max(np.abs(out - ref)))
        results[f"max_abs_diff[{name}]"] = err
        np.testing.assert_allclose(out, ref, rtol=2e-3, atol=2e-3, err_msg=f"{name} disagrees")

    for fn in runners.values():  # warm: first-call allocations, thread pools
        fn(), fn()
    ms = {}
    for pair in (("xla", "jax.jit"), ("onnxruntime", "torch->ort")):  # a pair at a time: a spinning
        if pair[0] in runners:  # onnxruntime pool must not slow the runner after it (a 2-core VM shows it)
            ms.update(timed_rounds({n: runners[n] for n in pair}, args.reps, args.calls))
    for name, times in ms.items():
        results[f"{name}_ms"] = statistics.median(times)
    for key, (mine, peer) in {"xla_vs_jit": ("xla", "jax.jit"),
                              "ort_vs_torch_ort": ("onnxruntime", "torch->ort")}.items():
        if mine in ms:
            ratios = sorted(a / b_ for a, b_ in zip(ms[mine], ms[peer]))
            results[key] = statistics.median(ratios)
            results[key + "_range"] = f"{ratios[0]:.3f} .. {ratios[-1]:.3f} over {len(ratios)} rounds"
            results[key + "_goal"] = f"<= {GOALS[key]} ({'met' if results[key] <= GOALS[key] else 'missed'})"
    results["load_after"] = os.getloadavg()[0]
    for k, v in results.items():
        print(f"{k:32s} {v:.3g}" if isinstance(v, float) and abs(v) < 0.01 else
              f"{k:32s} {v:.3f}" if isinstance(v, float) else f"{k:32s} {v}")
    if args.json:
        from tripy_lab.core.files import write_atomic  # a half-written result never replaces a whole one

        write_atomic(args.json, json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
