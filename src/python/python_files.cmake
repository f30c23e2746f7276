# The CPython extension's sources (src/python and every folder under it) and its include
# folders, for the main CMakeLists.txt: DLX_PY_SOURCES, DLX_PY_INCLUDES. Headers are included
# by bare name (as src/core's are: core_files.cmake), so each folder holding one is on the
# include path.
file(GLOB_RECURSE DLX_PY_SOURCES CONFIGURE_DEPENDS ${CMAKE_CURRENT_LIST_DIR}/*.c)
file(GLOB_RECURSE _dlx_py_headers CONFIGURE_DEPENDS ${CMAKE_CURRENT_LIST_DIR}/*.h)
set(DLX_PY_INCLUDES ${CMAKE_CURRENT_LIST_DIR})
foreach(h ${_dlx_py_headers})
  get_filename_component(d ${h} DIRECTORY)
  list(APPEND DLX_PY_INCLUDES ${d})
endforeach()
list(REMOVE_DUPLICATES DLX_PY_INCLUDES)
unset(_dlx_py_headers)
