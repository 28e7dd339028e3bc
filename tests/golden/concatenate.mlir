#profile = #tensorrt.shape_profile<min = [2, 1], opt = [2, 1], max = [2, 1]>
#profile1 = #tensorrt.shape_profile<min = [2, 3], opt = [2, 3], max = [2, 3]>
module @"ins_a_b_outs_%t0" {
  func.func @main(%arg0: tensor<2x1xf32> {tensorrt.dimension_names = {}, tensorrt.shape_profile = #profile}, %arg1: tensor<2x3xf32> {tensorrt.dimension_names = {}, tensorrt.shape_profile = #profile1}) -> tensor<2x4xf32> {
    %0 = tensorrt.concatenation {axis = 1 : i32} ins(%arg0, %arg1 : tensor<2x1xf32>, tensor<2x3xf32>) -> tensor<2x4xf32>
    return %0 : tensor<2x4xf32>
  }
}

