#profile = #tensorrt.shape_profile<min = [2, 2], opt = [3, 2], max = [4, 2]>
module @"ins_x_outs_%t15" {
  func.func @main(%arg0: tensor<?x2xf32> {tensorrt.dimension_names = {}, tensorrt.shape_profile = #profile}) -> tensor<?x2xf32> {
    %0 = tensorrt.shape %arg0 : tensor<?x2xf32> -> tensor<2xi32>
    %1 = tensorrt.slice %0[0][1][1] : tensor<2xi32> to tensor<1xi32>
    %2 = tensorrt.collapse_rank %1 : tensor<1xi32> to tensor<i32>
    %cst_i32 = tensorrt.constant dense<1> : tensor<i32>
    %3 = tensorrt.element_wise <kMIN>(%cst_i32, %2 : tensor<i32>, tensor<i32>) -> tensor<i32>
    %cst_i32_0 = tensorrt.constant dense<1> : tensor<1xi32>
    %4 = tensorrt.reshape %3 shape(%cst_i32_0: tensor<1xi32>) : tensor<i32> to tensor<1xi32>
    %cst_i32_1 = tensorrt.constant dense<0> : tensor<1xi32>
    %5 = tensorrt.concatenation {axis = 0 : i32} ins(%4, %cst_i32_1 : tensor<1xi32>, tensor<1xi32>) -> tensor<2xi32>
    %6 = tensorrt.element_wise <kSUB>(%2, %3 : tensor<i32>, tensor<i32>) -> tensor<i32>
    %cst_i32_2 = tensorrt.constant dense<0> : tensor<i32>
    %7 = tensorrt.element_wise <kMAX>(%6, %cst_i32_2 : tensor<i32>, tensor<i32>) -> tensor<i32>
    %cst_i32_3 = tensorrt.constant dense<1> : tensor<1xi32>
    %8 = tensorrt.reshape %7 shape(%cst_i32_3: tensor<1xi32>) : tensor<i32> to tensor<1xi32>
    %cst_i32_4 = tensorrt.constant dense<2> : tensor<1xi32>
    %9 = tensorrt.concatenation {axis = 0 : i32} ins(%8, %cst_i32_4 : tensor<1xi32>, tensor<1xi32>) -> tensor<2xi32>
    %10 = tensorrt.slice %arg0[%5: tensor<2xi32>][%9: tensor<2xi32>][1, 1] : tensor<?x2xf32> to tensor<?x2xf32>
    return %10 : tensor<?x2xf32>
  }
}

