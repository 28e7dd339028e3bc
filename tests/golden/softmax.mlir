#profile = #tensorrt.shape_profile<min = [2, 5], opt = [2, 5], max = [2, 5]>
module @"ins_x_outs_%t0" {
  func.func @main(%arg0: tensor<2x5xf32> {tensorrt.dimension_names = {}, tensorrt.shape_profile = #profile}) -> tensor<2x5xf32> {
    %0 = tensorrt.softmax {axis = 1 : i64} %arg0 : tensor<2x5xf32>
    return %0 : tensor<2x5xf32>
  }
}

