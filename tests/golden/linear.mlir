#map = affine_map<(d0, d1) -> (d1, d0)>
#profile = #tensorrt.shape_profile<min = [1, 3], opt = [2, 3], max = [4, 3]>
module @"ins_x_outs_%t4" {
  func.func @main(%arg0: tensor<?x3xf32> {tensorrt.dimension_names = {}, tensorrt.shape_profile = #profile}) -> tensor<?x2xf32> {
    %cst_f32 = tensorrt.constant dense<[[0.000000e+00, 1.000000e+00, 2.000000e+00], [3.000000e+00, 4.000000e+00, 5.000000e+00]]> : tensor<2x3xf32>
    %0 = tensorrt.transpose {permutation = #map} %cst_f32 : tensor<2x3xf32> to tensor<3x2xf32>
    %1 = tensorrt.matrix_multiply {op0 = #tensorrt.matrix_operation<kNONE>, op1 = #tensorrt.matrix_operation<kNONE>} ins(%arg0, %0 : tensor<?x3xf32>, tensor<3x2xf32>) -> tensor<?x2xf32>
    %cst_f32_0 = tensorrt.constant dense<[5.000000e-01, -5.000000e-01]> : tensor<2xf32>
    %cst_i32 = tensorrt.constant dense<[1, 2]> : tensor<2xi32>
    %2 = tensorrt.reshape %cst_f32_0 shape(%cst_i32: tensor<2xi32>) : tensor<2xf32> to tensor<1x2xf32>
    %3 = tensorrt.element_wise <kSUM>(%1, %2 : tensor<?x2xf32>, tensor<1x2xf32>) -> tensor<?x2xf32>
    return %3 : tensor<?x2xf32>
  }
}

