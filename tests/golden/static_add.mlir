#profile = #tensorrt.shape_profile<min = [2, 3], opt = [2, 3], max = [2, 3]>
module @"ins_a_b_outs_%t0" {
  func.func @main(%arg0: tensor<2x3xf32> {tensorrt.dimension_names = {}, tensorrt.shape_profile = #profile}, %arg1: tensor<2x3xf32> {tensorrt.dimension_names = {}, tensorrt.shape_profile = #profile}) -> tensor<2x3xf32> {
    %0 = tensorrt.element_wise <kSUM>(%arg0, %arg1 : tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
    return %0 : tensor<2x3xf32>
  }
}

