# The core's sources (src/core and every folder under it) and its include folders, for the
# main CMakeLists.txt and tests/fuzz: DLX_CORE_SOURCES, DLX_CORE_INCLUDES. Headers are
# included by bare name, as they are where they ship (flat, dlx/addon/), so each folder
# holding one is on the include path.
file(GLOB_RECURSE DLX_CORE_SOURCES CONFIGURE_DEPENDS ${CMAKE_CURRENT_LIST_DIR}/*.c)
file(GLOB_RECURSE _dlx_core_headers CONFIGURE_DEPENDS ${CMAKE_CURRENT_LIST_DIR}/*.h)
set(DLX_CORE_INCLUDES ${CMAKE_CURRENT_LIST_DIR})
foreach(h ${_dlx_core_headers})
  get_filename_component(d ${h} DIRECTORY)
  list(APPEND DLX_CORE_INCLUDES ${d})
endforeach()
list(REMOVE_DUPLICATES DLX_CORE_INCLUDES)
unset(_dlx_core_headers)
