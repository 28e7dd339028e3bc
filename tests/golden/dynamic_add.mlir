#profile = #tensorrt.shape_profile<min = [1, 4], opt = [2, 4], max = [3, 4]>
module @"ins_a_b_outs_%t0" {
  func.func @main(%arg0: tensor<?x4xf32> {tensorrt.dimension_names = {}, tensorrt.shape_profile = #profile}, %arg1: tensor<?x4xf32> {tensorrt.dimension_names = {}, tensorrt.shape_profile = #profile}) -> tensor<?x4xf32> {
    %0 = tensorrt.element_wise <kSUM>(%arg0, %arg1 : tensor<?x4xf32>, tensor<?x4xf32>) -> tensor<?x4xf32>
    return %0 : tensor<?x4xf32>
  }
}

