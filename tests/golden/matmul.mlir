#profile = #tensorrt.shape_profile<min = [2, 3], opt = [2, 3], max = [2, 3]>
#profile1 = #tensorrt.shape_profile<min = [3, 4], opt = [3, 4], max = [3, 4]>
module @"ins_a_b_outs_%t0" {
  func.func @main(%arg0: tensor<2x3xf32> {tensorrt.dimension_names = {}, tensorrt.shape_profile = #profile}, %arg1: tensor<3x4xf32> {tensorrt.dimension_names = {}, tensorrt.shape_profile = #profile1}) -> tensor<2x4xf32> {
    %0 = tensorrt.matrix_multiply {op0 = #tensorrt.matrix_operation<kNONE>, op1 = #tensorrt.matrix_operation<kNONE>} ins(%arg0, %arg1 : tensor<2x3xf32>, tensor<3x4xf32>) -> tensor<2x4xf32>
    return %0 : tensor<2x4xf32>
  }
}

