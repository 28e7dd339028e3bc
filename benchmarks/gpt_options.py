"""Where the GPT's time goes on the GPU, and which XLA options move it (H200 exploration, one process):

    python benchmarks/gpt_options.py [--out-dir DIR]

For B8 T1024 and B1 T128 (static shapes): build the GPT-2-small decoder (benchmarks/gpt.py) under each
option set of ``VARIANTS`` (passed to XLA as optimization level 3's options), time back-to-back calls
and print the per-kind time of the lab's per-layer profile; at B1 T128 also the host overhead of the
Executable vs the raw jitted call.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpt  # noqa: E402
from bench_gpu import timed  # noqa: E402

import tripy_lab as tp  # noqa: E402
from tripy_lab.core.files import write_atomic  # noqa: E402

_CMDBUF_ALL = "FUSION,CUBLAS,CUBLASLT,CUSTOM_CALL,CUDNN"
_LT = {"xla_gpu_enable_triton_gemm": False, "xla_gpu_enable_cublaslt": True}
_BODY = {**_LT, "xla_gpu_experimental_enable_fusion_block_level_rewriter": True}  # xla_split.BODY_OPTIONS
VARIANTS = {
    "defaults": {},
    "cublaslt": {"xla_gpu_enable_cublaslt": True},
    "no_triton_gemm": {"xla_gpu_enable_triton_gemm": False},
    "no_triton_gemm+cublaslt": {"xla_gpu_enable_triton_gemm": False, "xla_gpu_enable_cublaslt": True},
    # the HLO pass is named "dot-merger" (an earlier run spelled it "dot_merger", which disabled nothing)
    "no_dot_merger": {"xla_disable_hlo_passes": "dot-merger"},
    "no_dot_merger+cublaslt": {"xla_disable_hlo_passes": "dot-merger", "xla_gpu_enable_cublaslt": True},
    "cmdbuf_all": {"xla_gpu_enable_command_buffer": "FUSION,CUBLAS,CUBLASLT,CUSTOM_CALL,CUDNN"},
    "no_dot_merger+cmdbuf_all": {"xla_disable_hlo_passes": "dot-merger",
                                 "xla_gpu_enable_command_buffer": "FUSION,CUBLAS,CUBLASLT,CUSTOM_CALL,CUDNN"},
    "no_dot_merger+no_triton_gemm+cublaslt": {"xla_disable_hlo_passes": "dot-merger",
                                              "xla_gpu_enable_triton_gemm": False, "xla_gpu_enable_cublaslt": True},
    "triton_gemm_any": {"xla_gpu_triton_gemm_any": True},
    # Hopper features of XLA's Triton GEMMs (TMA loads, warp specialization), and cuDNN GEMM fusions
    # (a cuDNN graph may take the GEMM's element-wise epilogue)
    "triton_tma": {"xla_gpu_experimental_enable_triton_tma": True},
    "triton_warp_spec": {"xla_gpu_experimental_enable_triton_tma": True,
                         "xla_gpu_experimental_enable_triton_warp_specialization": True},
    "cudnn_gemm_fusion_1": {"xla_gpu_cudnn_gemm_fusion_level": 1},
    "cudnn_gemm_fusion_2": {"xla_gpu_cudnn_gemm_fusion_level": 2},
    "cudnn_gemm_fusion_3": {"xla_gpu_cudnn_gemm_fusion_level": 3},
    "triton_heroless": {"xla_gpu_experimental_enable_triton_heroless_priority_fusion": True},
    "heroless+cmdbuf_lt": {"xla_gpu_experimental_enable_triton_heroless_priority_fusion": True,
                           "xla_gpu_enable_command_buffer": "FUSION,CUBLAS,CUBLASLT,CUSTOM_CALL"},
    "heroless+cmdbuf_all": {"xla_gpu_experimental_enable_triton_heroless_priority_fusion": True,
                            "xla_gpu_enable_command_buffer": "FUSION,CUBLAS,CUBLASLT,CUSTOM_CALL,CUDNN"},
    "cmdbuf_lt": {"xla_gpu_enable_command_buffer": "FUSION,CUBLAS,CUBLASLT,CUSTOM_CALL"},
    "graph_min_1": {"xla_gpu_graph_min_graph_size": 1},
    # what a call costs between two back-to-back executions (command buffer updates for new buffer addresses);
    # xla_gpu_temp_buffer_use_separate_color crashed this jaxlib (no allocator for memory space 2)
    "exclusive_lock": {"xla_gpu_require_exclusive_lock": True},
    # the lm head's N = 50257: XLA pads it to a multiple of 8 for cuBLAS (and slices the padded logits)
    "no_cublas_pad": {"xla_disable_hlo_passes": "cublas-pad-for-gemms"},
    "no_cublas_pad+no_triton_gemm": {"xla_disable_hlo_passes": "cublas-pad-for-gemms",
                                     "xla_gpu_enable_triton_gemm": False},
    "no_cublas_pad+cublaslt": {"xla_disable_hlo_passes": "cublas-pad-for-gemms", "xla_gpu_enable_cublaslt": True},
    "no_cublas_pad+heroless": {"xla_disable_hlo_passes": "cublas-pad-for-gemms",
                               "xla_gpu_experimental_enable_triton_heroless_priority_fusion": True},
    "triton_multi_output": {"xla_gpu_unsupported_enable_triton_multi_output_fusion": True},
    "generic_triton_gemm": {"xla_gpu_unsupported_enable_generic_triton_emitter_for_gemms": True},
    "no_command_buffer": {"xla_gpu_enable_command_buffer": ""},
    # the lm head's Triton GEMM (N = 50257): a wider search of its tiles
    "exhaustive_tiling": {"xla_gpu_exhaustive_tiling_search": True},
    "exhaustive_tiling+cmdbuf_all": {"xla_gpu_exhaustive_tiling_search": True,
                                     "xla_gpu_enable_command_buffer": "FUSION,CUBLAS,CUBLASLT,CUSTOM_CALL,CUDNN"},
    # a GEMM reading a contiguous slice of a weight (q/k/v rows of c_attn) in place instead of a copy
    "dynamic_slice_fusion": {"xla_gpu_enable_dynamic_slice_fusion": True},
    # keys starting with "_" are ours, not XLA's: "_attention" sets xla_attention.MODE for the variant
    "attention_off": {"_attention": "off"},
    # "_linear" sets xla_linear.MODE: "auto" runs Linear + GELU and the packed q/k/v projection as Pallas kernels
    "pallas_linear": {"_linear": "auto"},
    "pallas_linear+attention_off": {"_linear": "auto", "_attention": "off"},
    "attention_off+cmdbuf_all": {"_attention": "off",
                                 "xla_gpu_enable_command_buffer": "FUSION,CUBLAS,CUBLASLT,CUSTOM_CALL,CUDNN"},
    # let Triton GEMM fusions (which can fuse an element-wise producer such as the GELU into the GEMM's
    # operand load) win even where cuBLAS alone is faster for the bare GEMM
    "no_cublas_fallback": {"xla_gpu_cublas_fallback": False},
    "triton_gemm_any+no_cublas_fallback": {"xla_gpu_triton_gemm_any": True, "xla_gpu_cublas_fallback": False},
    # a Triton GEMM fusion with several outputs: the merged q/k/v GEMM writing q, k and v (+ bias) itself
    "triton_multi_output+no_cublas_fallback": {"xla_gpu_unsupported_enable_triton_multi_output_fusion": True,
                                               "xla_gpu_cublas_fallback": False},
    "gemm_fusion_v2": {"xla_gpu_experimental_gemm_fusion_v2": True},
    "force_triton_gemm+multi_output": {"xla_gpu_unsupported_force_triton_gemm": True,
                                       "xla_gpu_unsupported_enable_triton_multi_output_fusion": True},
    "block_level_rewriter": {"xla_gpu_experimental_enable_fusion_block_level_rewriter": True},
    # XLA offers every GEMM to Triton (triton_gemm_any); a GEMM whose autotuning then picks cuBLAS loses the
    # bias / residual epilogue cuBLASLt takes when the GEMM is rewritten directly. Off, pure GEMMs go to
    # cuBLASLt with their epilogues -- and so does the lm head (N = 50257), padded, or unpadded without the
    # padding pass
    "no_triton_gemm_any": {"xla_gpu_triton_gemm_any": False},
    "no_triton_gemm_any+cublaslt": {"xla_gpu_triton_gemm_any": False, "xla_gpu_enable_cublaslt": True},
    "no_triton_gemm_any+no_dot_merger": {"xla_gpu_triton_gemm_any": False, "xla_disable_hlo_passes": "dot-merger"},
    "no_triton_gemm_any+no_cublas_pad": {"xla_gpu_triton_gemm_any": False,
                                         "xla_disable_hlo_passes": "cublas-pad-for-gemms"},
    # Triton GEMMs off: cuBLASLt takes the epilogues, also inside command buffers
    "lt_epilogues": {"xla_gpu_enable_triton_gemm": False, "xla_gpu_enable_cublaslt": True,
                     "xla_gpu_enable_command_buffer": "FUSION,CUBLAS,CUBLASLT,CUSTOM_CALL"},
    # "_split" sets xla_split.MODE ("off" in this benchmark unless a variant says "auto"): the lm head in an executable
    # of its own (XLA's Triton GEMM writes its unaligned rows), the rest with "_body" (default: xla_split.BODY_OPTIONS)
    "split": {"_split": "auto"},
    "split+lt_only": {"_split": "auto", "_body": _LT},  # the seventh session's body options
    # without GEMM autotuning (the profile's min and max, xla.TUNE_OPT_ONLY): all of it, the body or the head only
    "untuned": {"xla_gpu_autotune_level": 0},
    "split+untuned": {"_split": "auto", "xla_gpu_autotune_level": 0},
    "split+untuned_body": {"_split": "auto", "_body": {**_BODY, "xla_gpu_autotune_level": 0}},
    "split+untuned_head": {"_split": "auto", "_head": {"xla_gpu_autotune_level": 0}},
    "split+lt_only+untuned": {"_split": "auto", "_body": _LT, "xla_gpu_autotune_level": 0},
    "split+lt_cmdbuf": {"_split": "auto", "_body": {
        "xla_gpu_enable_triton_gemm": False, "xla_gpu_enable_cublaslt": True,
        "xla_gpu_enable_command_buffer": "FUSION,CUBLAS,CUBLASLT,CUSTOM_CALL"}},
    "split+block_level": {"_split": "auto", "_body": {
        "xla_gpu_enable_triton_gemm": False, "xla_gpu_enable_cublaslt": True,
        "xla_gpu_experimental_enable_fusion_block_level_rewriter": True}},
    "split_any_off": {"_split": "auto", "_body": {"xla_gpu_triton_gemm_any": False}},
    # cuBLASLt GEMMs for q, k and v apart (each with its bias epilogue, in the attention kernel's layout) instead of
    # XLA merging them into one GEMM followed by a bias-add and slice copy
    "split+no_dot_merger": {"_split": "auto", "_body": {
        "xla_gpu_enable_triton_gemm": False, "xla_gpu_enable_cublaslt": True, "xla_disable_hlo_passes": "dot-merger"}},
    # "_head": xla_split.HEAD_OPTIONS: the lm head on cuBLASLt, unpadded (torch.compile's is cuBLAS on N = 50257)
    "split+head_lt_nopad": {"_split": "auto", "_head": {**_LT, "xla_disable_hlo_passes": "cublas-pad-for-gemms"}},
    "split+head_lt": {"_split": "auto", "_head": _LT},
    "split+head_nopad": {"_split": "auto", "_head": {"xla_gpu_enable_triton_gemm": False,
                                                     "xla_disable_hlo_passes": "cublas-pad-for-gemms"}},
    "split+heroless": {"_split": "auto", "_body": {
        **_LT, "xla_gpu_experimental_enable_triton_heroless_priority_fusion": True}},
    "split+no_dot_merger+heroless": {"_split": "auto", "_body": {
        **_LT, "xla_disable_hlo_passes": "dot-merger",
        "xla_gpu_experimental_enable_triton_heroless_priority_fusion": True}},
    "split+head_exhaustive": {"_split": "auto", "_head": {"xla_gpu_exhaustive_tiling_search": True}},
    "split+cmdbuf_all": {"_split": "auto", "_body": {**_LT, "xla_gpu_enable_command_buffer": _CMDBUF_ALL}},
    "split+body_cmdbuf_all": {"_split": "auto", "_body": {**_BODY, "xla_gpu_enable_command_buffer": _CMDBUF_ALL}},
    "split+no_dot_merger+heroless+cmdbuf_all": {"_split": "auto", "_body": {
        **_LT, "xla_disable_hlo_passes": "dot-merger", "xla_gpu_enable_command_buffer": _CMDBUF_ALL,
        "xla_gpu_experimental_enable_triton_heroless_priority_fusion": True}},
    "split+no_dot_merger+heroless+cmdbuf_all+head_exhaustive": {"_split": "auto", "_body": {
        **_LT, "xla_disable_hlo_passes": "dot-merger", "xla_gpu_enable_command_buffer": _CMDBUF_ALL,
        "xla_gpu_experimental_enable_triton_heroless_priority_fusion": True},
        "_head": {"xla_gpu_exhaustive_tiling_search": True}},
    "split+block_level+heroless": {"_split": "auto", "_body": {
        **_LT, "xla_gpu_experimental_enable_fusion_block_level_rewriter": True,
        "xla_gpu_experimental_enable_triton_heroless_priority_fusion": True}},
    "split+no_dot_merger+block_level": {"_split": "auto", "_body": {
        "xla_gpu_enable_triton_gemm": False, "xla_gpu_enable_cublaslt": True, "xla_disable_hlo_passes": "dot-merger",
        "xla_gpu_experimental_enable_fusion_block_level_rewriter": True}},
    # the q/k/v GEMMs kept apart read their rows of c_attn's weight and bias in place (dynamic-slice fusion)
    # instead of through per-call slice copies
    "split+no_dot_merger+block_level+dsf": {"_split": "auto", "_body": {
        **_BODY, "xla_disable_hlo_passes": "dot-merger", "xla_gpu_enable_dynamic_slice_fusion": True}},
    # "_qkv_apart": xla_attention.QKV_APART (packed q/k/v GEMMs on weights cut apart at build time; "auto" is on)
    "split+no_qkv_apart": {"_split": "auto", "_qkv_apart": "off"},
    # "_head_layout": xla_split.HEAD_LAYOUT: the logits with the vocabulary dimension major, so the lm head GEMM writes
    # aligned rows (of the transposed product) and cuBLAS can take it unpadded
    "split+n_major": {"_split": "auto", "_head_layout": "n_major"},
    "split+rows": {"_split": "auto", "_head_layout": "rows"},  # the eighth session's split
    "split+n_major+head_nopad": {"_split": "auto", "_head_layout": "n_major", "_head": {
        "xla_gpu_enable_triton_gemm": False, "xla_disable_hlo_passes": "cublas-pad-for-gemms"}},
    "split+n_major+head_lt_nopad": {"_split": "auto", "_head_layout": "n_major", "_head": {
        **_LT, "xla_disable_hlo_passes": "cublas-pad-for-gemms"}},
    # Programmatic Dependent Launch: a kernel starts while the one before it drains (the ~1.6 us a kernel
    # boundary the thirteenth session measured between the GPT's 113 kernels)
    "split+pdl": {"_split": "auto", "_body": {**_BODY, "xla_gpu_enable_pdl": True},
                  "_head": {"xla_gpu_enable_pdl": True}},
    "split+pdl+cmdbuf_all": {"_split": "auto", "_body": {**_BODY, "xla_gpu_enable_pdl": True,
                                                         "xla_gpu_enable_command_buffer": _CMDBUF_ALL},
                             "_head": {"xla_gpu_enable_pdl": True}},
    "split+fusion_autotuner": {"_split": "auto", "_body": {
        **_BODY, "xla_gpu_experimental_enable_fusion_autotuner": True}},
    "split+all_fusions_triton": {"_split": "auto", "_body": {
        **_BODY, "xla_gpu_experimental_all_fusions_with_triton": True}},
    "split+cudnn_layer_norm": {"_split": "auto", "_body": {**_BODY, "xla_gpu_enable_cudnn_layer_norm": True}},
    "split+tiling_propagation": {"_split": "auto", "_body": {
        **_BODY, "xla_gpu_experimental_enable_tiling_propagation": True}},
}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--out-dir", default=None)
    p.add_argument("--variants", default=",".join(VARIANTS))
    p.add_argument("--shapes", default="8x1024,1x128")
    p.add_argument("--profile-all", action="store_true", help="per-layer profile of every variant")
    p.add_argument("--separate-qkv", action="store_true", help="q, k, v from three Linear layers")
    p.add_argument("--split-qkv", action="store_true", help="q, k, v by tp.split (gpt.SplitAttention)")
    a = p.parse_args()
    import jax

    from tripy_lab import pipeline
    from tripy_lab.engine import xla
    from tripy_lab.engine.xla import attention as xla_attention
    from tripy_lab.engine.xla import linear as xla_linear
    from tripy_lab.engine.xla import split as xla_split
    from tripy_lab.lab import profile

    rng = np.random.default_rng(0)
    params = gpt.weights(rng)
    model = gpt.tripy_gpt(params, separate_qkv=a.separate_qkv, split_qkv=a.split_qkv)
    gpu = jax.devices()[0]
    results = {}
    body_defaults = dict(xla_split.BODY_OPTIONS)
    for b, t in (tuple(int(v) for v in bt.split("x")) for bt in a.shapes.split(",")):
        lowered = pipeline.trace(model, args=[tp.InputInfo((b, t), tp.int32)]).lower()
        idx = jax.device_put(rng.integers(0, gpt.V, (b, t)).astype(np.int32), gpu)
        for name in a.variants.split(","):
            options = dict(VARIANTS[name])
            xla_attention.MODE = options.pop("_attention", "auto")
            xla_attention.QKV_APART = options.pop("_qkv_apart", "auto")
            xla_linear.MODE = options.pop("_linear", "off")
            xla_split.MODE = options.pop("_split", "off")
            xla_split.BODY_OPTIONS = options.pop("_body", body_defaults)
            xla_split.HEAD_OPTIONS = options.pop("_head", {})
            xla_split.HEAD_LAYOUT = options.pop("_head_layout", "auto")
            xla.OPT_LEVEL_OPTIONS[3] = options
            try:
                built = lowered.build(engine="xla", shapes="opt")
            except Exception as exc:
                results[f"B{b}_T{t} {name}"] = {"error": f"{type(exc).__name__}: {str(exc)[:200]}"}
                continue
            exe = built.executable()
            logits = np.asarray(exe(idx)).astype(np.float32)
            first = results.setdefault(f"B{b}_T{t} logits", logits)
            ms = timed(lambda exe=exe, idx=idx: exe(idx), exe.synchronize, iters=20) * 1e3
            row = {"ms": ms, "tflops": gpt.flops(b, t) / ms / 1e9, "compile_s": built.seconds,
                   "notes": [n for n in built.report.notes if "dropped" in n or "fused" in n],
                   "max_abs_diff_vs_first_variant": float(np.max(np.abs(logits - first)))}
            if name == "defaults" or a.profile_all:
                layers = profile(exe, calls=10)
                row["compute_ms"], row["layers_ms"] = layers.attrs["compute_ms"], layers.attrs["layers_ms"]
                row["by_kind_ms"] = {k: round(float(v), 4) for k, v in
                                     layers.groupby("kind")["time_ms"].sum().sort_values(ascending=False).items()}
                by_line = layers.groupby(["kind", "source_lines"])["time_ms"].agg(["sum", "count"])
                row["by_kind_and_line"] = [f"{k[0]} @ {k[1]}: {r['sum']:.4f} ms / {int(r['count'])}"
                                           for k, r in by_line.sort_values("sum", ascending=False).iterrows()]
                top = layers.sort_values("time_ms", ascending=False).head(15)
                row["top"] = [f"{r['layer']} [{r['kind']}] {r['time_ms']:.4f} ms {r['source_lines']}"
                              for r in top.to_dict("records")]
                if a.out_dir:
                    write_atomic(os.path.join(a.out_dir, f"hlo_B{b}_T{t}_{name.replace('+', '_')}.txt"),
                                 built.report.extra_stages.get("hlo", ""))
                    csv = f"layers_B{b}_T{t}_{name.replace('+', '_')}.csv"
                    write_atomic(os.path.join(a.out_dir, csv), layers.to_csv(index=False))
                c = exe._compiled
                raw, consts = c._opt.call, tuple(c._consts)
                last = {}

                def raw_call(raw=raw, consts=consts, last=last, idx=idx):
                    last["o"] = raw(idx, *consts)

                row["raw_jit_ms"] = timed(raw_call, lambda last=last: last["o"][0].block_until_ready(),
                                          iters=10) * 1e3
                row["n_args"] = 1 + len(consts)
            results[f"B{b}_T{t} {name}"] = row
            print(f"B{b}_T{t} {name}", json.dumps(row, indent=1), flush=True)
    xla.OPT_LEVEL_OPTIONS[3] = {}
    results = {k: v for k, v in results.items() if not k.endswith(" logits")}
    if a.out_dir:
        write_atomic(os.path.join(a.out_dir, "gpt_options.json"), json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
