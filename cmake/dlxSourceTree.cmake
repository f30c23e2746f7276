# dlx_source_tree(ROOT PREFIX): ${PREFIX}_SOURCES, every .c file under ROOT, and
# ${PREFIX}_INCLUDES, ROOT and each folder under it that holds a header. Headers are included
# by bare name, as they are where they ship (flat, dlx/addon/), so each such folder is on the
# include path. For src/core (the main build and tests/fuzz) and src/python. Not installed.
function(dlx_source_tree root prefix)
  file(GLOB_RECURSE sources CONFIGURE_DEPENDS ${root}/*.c)
  file(GLOB_RECURSE headers CONFIGURE_DEPENDS ${root}/*.h)
  set(includes ${root})
  foreach(h ${headers})
    get_filename_component(d ${h} DIRECTORY)
    list(APPEND includes ${d})
  endforeach()
  list(REMOVE_DUPLICATES includes)
  set(${prefix}_SOURCES ${sources} PARENT_SCOPE)
  set(${prefix}_INCLUDES ${includes} PARENT_SCOPE)
endfunction()
