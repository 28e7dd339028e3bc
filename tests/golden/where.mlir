#profile = #tensorrt.shape_profile<min = [2, 2], opt = [2, 2], max = [2, 2]>
module @"ins_x_y_outs_%t1" {
  func.func @main(%arg0: tensor<2x2xf32> {tensorrt.dimension_names = {}, tensorrt.shape_profile = #profile}, %arg1: tensor<2x2xf32> {tensorrt.dimension_names = {}, tensorrt.shape_profile = #profile}) -> tensor<2x2xf32> {
    %0 = tensorrt.element_wise <kGREATER>(%arg0, %arg1 : tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x2xi1>
    %1 = tensorrt.select ins(%0, %arg0, %arg1 : tensor<2x2xi1>, tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x2xf32>
    return %1 : tensor<2x2xf32>
  }
}

