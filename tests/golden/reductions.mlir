#profile = #tensorrt.shape_profile<min = [2, 3], opt = [2, 3], max = [2, 3]>
module @"ins_x_outs_%t0_%t1_%t2" {
  func.func @main(%arg0: tensor<2x3xf32> {tensorrt.dimension_names = {}, tensorrt.shape_profile = #profile}) -> (tensor<2xf32>, tensor<1x3xf32>, tensor<f32>) {
    %0 = tensorrt.reduce <kSUM> %arg0 {reduceAxes = array<i64: 1>} : tensor<2x3xf32> -> tensor<2xf32>
    %1 = tensorrt.reduce <kMAX> %arg0 {keepDimensions = true, reduceAxes = array<i64: 0>} : tensor<2x3xf32> -> tensor<1x3xf32>
    %2 = tensorrt.reduce <kAVG> %arg0 {reduceAxes = array<i64: 0, 1>} : tensor<2x3xf32> -> tensor<f32>
    return %0, %1, %2 : tensor<2xf32>, tensor<1x3xf32>, tensor<f32>
  }
}

