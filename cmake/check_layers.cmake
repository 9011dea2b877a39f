# Fails when a source file includes a header of a higher layer (docs/ARCHITECTURE.md).
#   cmake -DSOURCE_DIR=<repo> -P cmake/check_layers.cmake
# A layer is a folder of src/ (tools/ is the top one). The list is lowest first; folders
# joined by '|' are peers of one rank and may include each other. A folder may include
# headers of its own rank and below. Public headers (baton/...) are the API and may be
# included anywhere: they declare, the layer that implements them is linked.
set(ranks core kernels dispatch ops graph "autograd|trace" passes runtime "nn|optim|data|io" tools)

set(index 0)
foreach(rank IN LISTS ranks)
  string(REPLACE "|" ";" folders "${rank}")
  foreach(folder IN LISTS folders)
    set(rank_${folder} ${index})
  endforeach()
  math(EXPR index "${index} + 1")
endforeach()

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
