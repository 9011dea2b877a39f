# Fails when a source file includes a header of a higher layer (docs/ARCHITECTURE.md).
#   cmake -DSOURCE_DIR=<repo> -P cmake/check_layers.cmake
# A layer is a folder of src/ (tools/ is the top one; the ranks are in layers.cmake). A
# folder may include headers of its own rank and below. Public headers (baton/...) are the
# API and may be included anywhere: they declare, and check_links.cmake checks that no
# layer calls what only a higher layer defines.
include(${CMAKE_CURRENT_LIST_DIR}/layers.cmake)

file(GLOB_RECURSE files RELATIVE "${SOURCE_DIR}"
     "${SOURCE_DIR}/src/*.h" "${SOURCE_DIR}/src/*.cpp" "${SOURCE_DIR}/tools/*.h" "${SOURCE_DIR}/tools/*.cpp")
set(violations "")
foreach(file IN LISTS files)
  if(file MATCHES "^src/([a-z_]+)/")
    set(layer ${CMAKE_MATCH_1})
  else()
    set(layer tools)
  endif()
  if(NOT DEFINED rank_${layer})
    list(APPEND violations "${file}: folder '${layer}' has no layer; add it to cmake/check_layers.cmake")
    continue()
  endif()
  file(STRINGS "${SOURCE_DIR}/${file}" includes REGEX "^#include \"[a-z_]+/")
  foreach(line IN LISTS includes)
    string(REGEX MATCH "^#include \"([a-z_]+)/[^\"]*\"" _ "${line}")
    set(target ${CMAKE_MATCH_1})
    if(target STREQUAL "baton" OR NOT DEFINED rank_${target})
      continue()  # the public API, or a folder of tools/ itself
    endif()
    if(rank_${target} GREATER rank_${layer})
      list(APPEND violations "${file} (${layer}) includes ${CMAKE_MATCH_0} from the higher layer '${target}'")
    endif()
  endforeach()
endforeach()

if(violations)
  list(JOIN violations "\n  " report)
  message(FATAL_ERROR "upward includes (a lower layer needs a hook instead):\n  ${report}")
endif()
message(STATUS "layers: every include goes down or across")
