# dlx_add_kernels(NAME SOURCES src...): a kernel library, loadable with dlx.load().
#
# One MODULE library from C, C++ or CUDA sources, built with the dlx headers alone
# (dlx::headers) and hidden visibility, so the library exports only what DLX_KERNEL marks.
# The file is NAME.so (no "lib" prefix). Used by the dlx project itself for its examples
# and test kernels, and installed with dlxConfig.cmake for kernel authors.
function(dlx_add_kernels name)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "" "SOURCES")
  if(NOT arg_SOURCES)
    message(FATAL_ERROR "dlx_add_kernels(${name}): no SOURCES given")
  endif()
  if(arg_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "dlx_add_kernels(${name}): unexpected arguments ${arg_UNPARSED_ARGUMENTS}")
  endif()
  foreach(src IN LISTS arg_SOURCES)
    if(src MATCHES "\\.cu$" AND NOT CMAKE_CUDA_COMPILER)
      message(FATAL_ERROR "dlx_add_kernels(${name}): ${src} is CUDA: call "
                          "enable_language(CUDA) (or project(... CUDA)) first")
    endif()
  endforeach()
  add_library(${name} MODULE ${arg_SOURCES})
  target_link_libraries(${name} PRIVATE dlx::headers)
  set_target_properties(${name} PROPERTIES
    PREFIX ""
    POSITION_INDEPENDENT_CODE ON
    C_VISIBILITY_PRESET hidden
    CXX_VISIBILITY_PRESET hidden
    CUDA_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON)
endfunction()
