#profile = #tensorrt.shape_profile<min = [3, 4], opt = [3, 4], max = [3, 4]>
#profile1 = #tensorrt.shape_profile<min = [1], opt = [2], max = [4]>
module @"ins_x_s_outs_%t7" {
  func.func @main(%arg0: tensor<3x4xf32> {tensorrt.dimension_names = {}, tensorrt.shape_profile = #profile}, %arg1: tensor<i32> {plan.memory_space = #plan.memory_space<host>, tensorrt.value_bounds = #profile1}) -> tensor<?x?xf32> {
    %cst_i32 = tensorrt.constant dense<12> : tensor<i32>
    %0 = tensorrt.element_wise <kFLOOR_DIV>(%cst_i32, %arg1 : tensor<i32>, tensor<i32>) -> tensor<i32>
    %cst_i32_0 = tensorrt.constant dense<1> : tensor<1xi32>
    %1 = tensorrt.reshape %0 shape(%cst_i32_0: tensor<1xi32>) : tensor<i32> to tensor<1xi32>
    %cst_i32_1 = tensorrt.constant dense<1> : tensor<1xi32>
    %2 = tensorrt.reshape %arg1 shape(%cst_i32_1: tensor<1xi32>) : tensor<i32> to tensor<1xi32>
    %3 = tensorrt.concatenation {axis = 0 : i32} ins(%1, %2 : tensor<1xi32>, tensor<1xi32>) -> tensor<2xi32>
    %4 = tensorrt.reshape %arg0 shape(%3: tensor<2xi32>) : tensor<3x4xf32> to tensor<?x?xf32>
    return %4 : tensor<?x?xf32>
  }
}

