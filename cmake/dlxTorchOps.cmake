# dlx::torch_ops: dlx's torch operators for a program without Python (dlx/dlx_torch.h's
# dlx_torch_register). Included by dlxConfig.cmake when find_package(Torch) came first:
# builds libdlx_torch_ops from the sources shipped in <dlx package>/addon (the addon's
# operator code, compiled with DLX_TORCH_NO_PYTHON, and the core's pure C it needs) against
# that Torch, once per build tree.
if(TARGET dlx::torch_ops)
  return()
endif()
enable_language(C) # the core's sources are C11 (a CXX-only project gets C too)
get_filename_component(_dlx_addon "${CMAKE_CURRENT_LIST_DIR}/../../../addon" ABSOLUTE)
add_library(dlx_torch_ops SHARED
  "${_dlx_addon}/dlx_torch_ops.cc"
  "${_dlx_addon}/dlx_discover.c" "${_dlx_addon}/dlx_invoke.c" "${_dlx_addon}/dlx_sig.c"
  "${_dlx_addon}/dlx_derive.c" "${_dlx_addon}/dlx_elf.c" "${_dlx_addon}/dlx_layout.c"
  "${_dlx_addon}/dlx_error.c" "${_dlx_addon}/dlx_identity.c"
  "${_dlx_addon}/dlx_package_check.c" "${_dlx_addon}/dlx_backend.c")
add_library(dlx::torch_ops ALIAS dlx_torch_ops)
set_target_properties(dlx_torch_ops PROPERTIES CXX_STANDARD 17 CXX_STANDARD_REQUIRED ON
                      C_STANDARD 11 C_STANDARD_REQUIRED ON POSITION_INDEPENDENT_CODE ON
                      CXX_VISIBILITY_PRESET hidden C_VISIBILITY_PRESET hidden)
target_include_directories(dlx_torch_ops PUBLIC "${dlx_INCLUDE_DIR}" PRIVATE "${_dlx_addon}")
target_compile_definitions(dlx_torch_ops PRIVATE DLX_TORCH_NO_PYTHON _GNU_SOURCE)
if(TORCH_CUDA_LIBRARIES) # a CUDA torch: the operators run on torch's current CUDA stream
  target_compile_definitions(dlx_torch_ops PRIVATE BUILD_WITH_CUDA)
endif()
target_link_libraries(dlx_torch_ops PUBLIC ${TORCH_LIBRARIES} PRIVATE ${CMAKE_DL_LIBS} m)
unset(_dlx_addon)
