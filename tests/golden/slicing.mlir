#profile = #tensorrt.shape_profile<min = [4, 2], opt = [4, 2], max = [4, 2]>
module @"ins_x_outs_%t9" {
  func.func @main(%arg0: tensor<4x2xf32> {tensorrt.dimension_names = {}, tensorrt.shape_profile = #profile}) -> tensor<1x2xf32> {
    %0 = tensorrt.slice %arg0[1, 1][3, 2][1, -1] : tensor<4x2xf32> to tensor<3x2xf32>
    %1 = tensorrt.slice %0[0, 0][1, 2][1, 1] : tensor<3x2xf32> to tensor<1x2xf32>
    %cst_i32 = tensorrt.constant dense<[1, 2]> : tensor<2xi32>
    %2 = tensorrt.reshape %1 shape(%cst_i32: tensor<2xi32>) : tensor<1x2xf32> to tensor<1x2xf32>
    return %2 : tensor<1x2xf32>
  }
}

