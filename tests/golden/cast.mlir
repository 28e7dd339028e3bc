#profile = #tensorrt.shape_profile<min = [3], opt = [3], max = [3]>
module @"ins_x_outs_%t0" {
  func.func @main(%arg0: tensor<3xf32> {tensorrt.dimension_names = {}, tensorrt.shape_profile = #profile}) -> tensor<3xi32> {
    %0 = tensorrt.cast %arg0 : tensor<3xf32> to tensor<3xi32>
    return %0 : tensor<3xi32>
  }
}

