# ruff: noqa: E501  (HLO fixtures keep XLA's long lines)
"""The optimized-HLO parser of the xla engine (no jax needed: HLO text fixtures)."""

from tripy_lab.engine.xla.layers import kernel_instructions, layer_records, parse_hlo, parse_shapes, scope_indices

CPU_HLO = """\
HloModule jit_main, is_scheduled=true, entry_computation_layout={(f32[8,16]{1,0}, f32[16,32]{1,0})->f32[8,32]{1,0}}

%fused_computation (param_0: f32[8,16], param_1: f32[16,32]) -> f32[8,32] {
  %param_0 = f32[8,16]{1,0} parameter(0)
  %param_1 = f32[16,32]{1,0} parameter(1)
  ROOT %dot_general.0 = f32[8,32]{1,0} dot(%param_0, %param_1), lhs_contracting_dims={1}, rhs_contracting_dims={0}, metadata={op_name="jit(main)/t1__op2/dot_general"}
}

%fused_computation.1 (param_0.3: f32[8,32], param_1.5: f32[1,32]) -> f32[8,32] {
  %param_0.3 = f32[8,32]{1,0} parameter(0)
  %param_1.5 = f32[1,32]{1,0} parameter(1)
  %bitcast.1 = f32[32]{0} bitcast(%param_1.5), metadata={op_name="b"}
  %add.1 = f32[8,32]{1,0} broadcast(%bitcast.1), dimensions={1}, metadata={op_name="jit(main)/t2__op3/add"}
  %add.0 = f32[8,32]{1,0} add(%param_0.3, %add.1), metadata={op_name="jit(main)/t2__op3/add"}
  %tanh.0 = f32[8,32]{1,0} tanh(%add.0), metadata={op_name="jit(main)/t3__op4/tanh"}
  %constant.0 = f32[] constant(2)
  %mul.1 = f32[8,32]{1,0} broadcast(%constant.0), dimensions={}, metadata={op_name="jit(main)/t5__op6/mul"}
  ROOT %mul.0 = f32[8,32]{1,0} multiply(%tanh.0, %mul.1), metadata={op_name="jit(main)/t5__op6/mul"}
}

%wrapped_copy_computation (param_0.14: f32[8,32]) -> f32[8,32] {
  %param_0.14 = f32[8,32]{0,1} parameter(0)
  ROOT %copy.6 = f32[8,32]{1,0} copy(%param_0.14)
}

ENTRY %main.1 (x.1: f32[8,16], w.1: f32[16,32], b.1: f32[1,32]) -> (f32[8,32], s32[8,3]) {
  %x.1 = f32[8,16]{1,0} parameter(0), metadata={op_name="x"}
  %w.1 = f32[16,32]{1,0} parameter(1), metadata={op_name="w"}
  %b.1 = f32[1,32]{1,0} parameter(2), metadata={op_name="b"}
  %ynn_fusion = f32[8,32]{1,0} fusion(%x.1, %w.1), kind=kCustom, calls=%fused_computation, metadata={op_name="jit(main)/t1__op2/dot_general"}, backend_config={"fusion_config":{"kind":"__ynn_fusion"},"outer_dimension_partitions":[]}
  %wrapped_copy = f32[8,32]{1,0} fusion(%ynn_fusion), kind=kLoop, calls=%wrapped_copy_computation
  %broadcast_multiply_fusion = f32[8,32]{1,0} fusion(%wrapped_copy, %b.1), kind=kLoop, calls=%fused_computation.1, metadata={op_name="jit(main)/t5__op6/mul"}
  %custom-call = (f32[8,3]{1,0}, s32[8,3]{1,0}) custom-call(%x.1), custom_call_target="TopK", metadata={op_name="jit(main)/t9__op10/top_k"}
  %get-tuple-element.8 = s32[8,3]{1,0} get-tuple-element(%custom-call), index=1, metadata={op_name="jit(main)/t9__op10/top_k"}
  ROOT %tuple.2 = (f32[8,32]{1,0}, /*index=1*/s32[8,3]{1,0}) tuple(%broadcast_multiply_fusion, %get-tuple-element.8)
}
"""

GPU_HLO = """\
HloModule jit_main

%gemm_fusion_dot.1_computation (parameter_0: f16[64,128], parameter_1: f16[128,256]) -> f16[64,256] {
  %parameter_0 = f16[64,128]{1,0} parameter(0)
  %parameter_1 = f16[128,256]{1,0} parameter(1)
  ROOT %dot.1 = f16[64,256]{1,0} dot(%parameter_0, %parameter_1), lhs_contracting_dims={1}, rhs_contracting_dims={0}, metadata={op_name="jit(main)/t3__op1/dot_general"}
}

%fused_reduce (param_0.2: f32[64,256]) -> f32[64] {
  %param_0.2 = f32[64,256]{1,0} parameter(0)
  %constant_1 = f32[] constant(0)
  ROOT %reduce.1 = f32[64]{0} reduce(%param_0.2, %constant_1), dimensions={1}, to_apply=%region_add, metadata={op_name="jit(main)/t4__op2/reduce_sum"}
}

%command_buffer (p0: f16[64,128], p1: f16[128,256], p2: f32[64,256], p3: f32[256,64]) -> (f16[64,256], f32[64], f32[64,64]) {
  %p0 = f16[64,128]{1,0} parameter(0)
  %p1 = f16[128,256]{1,0} parameter(1)
  %p2 = f32[64,256]{1,0} parameter(2)
  %p3 = f32[256,64]{1,0} parameter(3)
  %gemm_fusion_dot.1 = f16[64,256]{1,0} fusion(%p0, %p1), kind=kCustom, calls=%gemm_fusion_dot.1_computation, metadata={op_name="jit(main)/t3__op1/dot_general"}, backend_config={"operation_queue_id":"0","fusion_backend_config":{"kind":"__triton_gemm","triton_gemm_config":{"block_m":"64"}}}
  %input_reduce_fusion = f32[64]{0} fusion(%p2), kind=kInput, calls=%fused_reduce, metadata={op_name="jit(main)/t4__op2/reduce_sum"}
  %custom-call.1 = (f32[64,64]{1,0}, s8[4194304]{0}) custom-call(%p2, %p3), custom_call_target="__cublas$gemm", metadata={op_name="jit(main)/t7__op5/dot_general"}
  %get-tuple-element = f32[64,64]{1,0} get-tuple-element(%custom-call.1), index=0
  ROOT %tuple = (f16[64,256]{1,0}, f32[64]{0}, f32[64,64]{1,0}) tuple(%gemm_fusion_dot.1, %input_reduce_fusion, %get-tuple-element)
}

ENTRY %main.2 (a.1: f16[64,128], b.1: f16[128,256], c.1: f32[64,256], d.1: f32[256,64]) -> (f16[64,256], f32[64], f32[64,64]) {
  %a.1 = f16[64,128]{1,0} parameter(0)
  %b.1 = f16[128,256]{1,0} parameter(1)
  %c.1 = f32[64,256]{1,0} parameter(2)
  %d.1 = f32[256,64]{1,0} parameter(3)
  ROOT %call = (f16[64,256]{1,0}, f32[64]{0}, f32[64,64]{1,0}) call(%a.1, %b.1, %c.1, %d.1), to_apply=%command_buffer
}
"""


def test_parse_computations_and_kernels():
    m = parse_hlo(CPU_HLO)
    assert m.entry == "main.1"
    assert set(m.computations) == {"fused_computation", "fused_computation.1", "wrapped_copy_computation", "main.1"}
    names = [i.name for i in kernel_instructions(m)]
    assert names == ["ynn_fusion", "wrapped_copy", "broadcast_multiply_fusion", "custom-call"]


def test_shapes_and_scopes():
    assert parse_shapes("(f32[8,3]{1,0}, s32[8,3]{1,0})") == (((8, 3), (8, 3)), ("float32", "int32"))
    assert parse_shapes("pred[]") == (((),), ("bool",))
    assert parse_shapes("bf16[<=4,2]{1,0}") == (((4, 2),), ("bfloat16",))
    assert scope_indices("jit(main)/t5__op12/jit(_take)/gather") == [12]
    assert scope_indices("jit(main)/mul") == []


def test_cpu_rows():
    names = {2: "%t1", 3: "%t2", 4: "%t3", 6: "%t5", 10: "%t9"}
    lines = {"%t1": "cell:1", "%t2": "cell:1", "%t3": "cell:2", "%t5": "cell:2"}
    rows = {r.name: r for r in layer_records(CPU_HLO, names, lines)}
    gemm = rows["ynn_fusion"]
    assert gemm.kind == "GEMM (XNNPACK)" and gemm.source_ops == ("%t1",) and gemm.mlir_ops == (2,)
    fused = rows["broadcast_multiply_fusion"]
    assert fused.kind == "loop fusion"
    assert fused.source_ops == ("%t2", "%t3", "%t5") and fused.mlir_ops == (3, 4, 6)
    assert fused.source_lines == ("cell:1", "cell:2")
    assert fused.output_shapes == ((8, 32),) and fused.output_dtypes == ("float32",)
    assert fused.kernel == "fused_computation.1"
    copy = rows["wrapped_copy"]  # no metadata: takes its user's op_name
    assert copy.kind == "copy" and copy.source_ops == ("%t5",)
    topk = rows["custom-call"]
    assert topk.kind == "custom call" and topk.kernel == "TopK" and topk.output_shapes == ((8, 3), (8, 3))


def test_gpu_rows_walk_command_buffers():
    rows = layer_records(GPU_HLO, {1: "%t3", 2: "%t4", 5: "%t7"})
    kinds = [(r.name, r.kind, r.source_ops) for r in rows]
    assert kinds == [("gemm_fusion_dot.1", "GEMM (Triton)", ("%t3",)),
                     ("input_reduce_fusion", "input fusion (reduction)", ("%t4",)),
                     ("custom-call.1", "GEMM (cuBLAS)", ("%t7",))]
    assert rows[2].output_shapes == ((64, 64),)  # workspace dropped
    assert rows[2].kernel == "__cublas$gemm"
