# Fails when libbaton's code of one layer calls a function or reads a variable that only a
# higher layer defines (docs/ARCHITECTURE.md). check_layers.cmake sees includes; this sees
# what the objects need from each other, which a public header can hide: tensor.h declares
# Tensor, and a kernel calling a Tensor method that the ops layer implements would pass it.
#   cmake -DSOURCE_DIR=<repo> -DOBJECT_DIR=<build>/src/CMakeFiles/baton.dir -DNM=<nm> -P cmake/check_links.cmake
include(${CMAKE_CURRENT_LIST_DIR}/layers.cmake)

file(GLOB_RECURSE all_objects RELATIVE "${OBJECT_DIR}" "${OBJECT_DIR}/*.o")
set(objects "")
foreach(object IN LISTS all_objects)  # not those a source since removed left behind
  string(REGEX REPLACE "\\.o$" "" source "${object}")
  if(EXISTS "${SOURCE_DIR}/src/${source}")
    list(APPEND objects "${object}")
  endif()
endforeach()
if(NOT objects)
  message(FATAL_ERROR "no object files under ${OBJECT_DIR}: build libbaton first")
endif()

# Global symbols each object defines (strong ones: an inline function or a template is
# weak, defined wherever it is used) and those it needs; mangled names are valid variable
# names.
foreach(object IN LISTS objects)
  string(REGEX MATCH "^[a-z_]+" layer "${object}")
  if(NOT DEFINED rank_${layer})
    message(FATAL_ERROR "${object}: folder '${layer}' has no layer; add it to cmake/layers.cmake")
  endif()
  execute_process(COMMAND ${NM} --defined-only -g "${OBJECT_DIR}/${object}" OUTPUT_VARIABLE defined
                  RESULT_VARIABLE failed)
  execute_process(COMMAND ${NM} -u "${OBJECT_DIR}/${object}" OUTPUT_VARIABLE needed)
  if(failed)
    message(FATAL_ERROR "${NM} could not read ${object}")
  endif()
  string(REGEX MATCHALL "[0-9a-f]+ [TDBR] [^\n]+" strong "${defined}")
  foreach(line IN LISTS strong)
    string(REGEX REPLACE "^[0-9a-f]+ [TDBR] " "" symbol "${line}")
    set("defined_in_${symbol}" "${layer}")
  endforeach()
  string(REGEX MATCHALL "U [^\n]+" uses "${needed}")
  set("needs_${object}" "${uses}")
endforeach()

set(violations "")
foreach(object IN LISTS objects)
  string(REGEX MATCH "^[a-z_]+" layer "${object}")
  foreach(use IN LISTS "needs_${object}")
    string(REGEX REPLACE "^U " "" symbol "${use}")
    set(owner "${defined_in_${symbol}}")
    if(owner AND rank_${owner} GREATER rank_${layer})
      execute_process(COMMAND c++filt "${symbol}" OUTPUT_VARIABLE readable OUTPUT_STRIP_TRAILING_WHITESPACE)
      list(APPEND violations "${object} (${layer}) uses ${readable}, defined in the higher layer '${owner}'")
    endif()
  endforeach()
endforeach()

if(violations)
  list(JOIN violations "\n  " report)
  message(FATAL_ERROR "upward calls (a lower layer needs a hook, or the code belongs lower):\n  ${report}")
endif()
list(LENGTH objects count)
message(STATUS "layers: none of ${count} objects uses what a higher layer defines")
