# find_package(dlx CONFIG): the interface target dlx::headers and dlx_add_kernels().
# This file sits in <dlx package>/share/cmake/dlx (print it: python -m dlx --cmake-dir);
# every path is relative to it, so an installed wheel works wherever it lies.
get_filename_component(dlx_INCLUDE_DIR "${CMAKE_CURRENT_LIST_DIR}/../../../include" ABSOLUTE)
if(NOT EXISTS "${dlx_INCLUDE_DIR}/dlx/dlx.h")
  set(dlx_FOUND FALSE)
  set(dlx_NOT_FOUND_MESSAGE "dlx/dlx.h is not in ${dlx_INCLUDE_DIR}")
  return()
endif()
if(NOT TARGET dlx::headers)
  add_library(dlx::headers INTERFACE IMPORTED)
  set_target_properties(dlx::headers PROPERTIES
    INTERFACE_INCLUDE_DIRECTORIES "${dlx_INCLUDE_DIR}")
endif()
include("${CMAKE_CURRENT_LIST_DIR}/dlxKernels.cmake")
# dlx::torch_ops (dlx/dlx_torch.h) when the project found Torch first.
if(TARGET torch)
  include("${CMAKE_CURRENT_LIST_DIR}/dlxTorchOps.cmake")
endif()
