#profile = #tensorrt.shape_profile<min = [1, 16], opt = [4, 16], max = [8, 16]>
module @"ins_a_b_outs_%t0" {
  func.func @main(%arg0: tensor<?x16xf32> {tensorrt.dimension_names = {"0" = "batch"}, tensorrt.shape_profile = #profile}, %arg1: tensor<?x16xf32> {tensorrt.dimension_names = {"0" = "batch"}, tensorrt.shape_profile = #profile}) -> tensor<?x16xf32> {
    %0 = tensorrt.element_wise <kPROD>(%arg0, %arg1 : tensor<?x16xf32>, tensor<?x16xf32>) -> tensor<?x16xf32>
    return %0 : tensor<?x16xf32>
  }
}

