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
# weak, defined wherever it is used) and those it needs, read by two nm runs over all the
# objects and matched in one awk program (nm takes ~0.1 s to start: two runs for each
# object took most of a minute).
set(manifest "")
foreach(object IN LISTS objects)
  string(REGEX MATCH "^[a-z_]+" layer "${object}")
  if(NOT DEFINED rank_${layer})
    message(FATAL_ERROR "${object}: folder '${layer}' has no layer; add it to cmake/layers.cmake")
  endif()
  string(APPEND manifest "${rank_${layer}}\t${layer}\t${OBJECT_DIR}/${object}\n")
endforeach()
set(match [=[
# Runs nm with `options` over every object at once; "defined" lines record which layer
# owns a symbol, "needed" ones print each use of a symbol a higher layer owns.
function read_symbols(options, kind,    command, line, at, object, count, f) {
  command = nm " -A " options paths
  while ((command | getline line) > 0) {
    at = index(line, ":")
    object = substr(line, 1, at - 1)
    count = split(substr(line, at + 1), f, " ")
    if (kind == "defined" && count == 3 && f[2] ~ /^[TDBR]$/) {
      owner_rank[f[3]] = rank[object]
      owner[f[3]] = layer[object]
    }
    if (kind == "needed" && count == 2 && (f[2] in owner_rank) && owner_rank[f[2]] > rank[object])
      print object "\t" layer[object] "\t" f[2] "\t" owner[f[2]]
  }
  if (close(command) != 0) { print nm " -A " options " failed on the objects"; exit 1 }
}
BEGIN {
  count = split(manifest, lines, "\n")
  for (i = 1; i <= count; i++)
    if (split(lines[i], f, "\t") == 3) { rank[f[3]] = f[1] + 0; layer[f[3]] = f[2]; paths = paths " '" f[3] "'" }
  read_symbols("-g --defined-only", "defined")
  read_symbols("-u", "needed")
}
]=])
execute_process(COMMAND awk -v "nm=${NM}" -v "manifest=${manifest}" "${match}"
                OUTPUT_VARIABLE found RESULT_VARIABLE failed)
if(failed)
  message(FATAL_ERROR "reading the objects' symbols failed: ${found}")
endif()

set(violations "")
string(REGEX MATCHALL "[^\n]+" found_lines "${found}")
foreach(line IN LISTS found_lines)
  string(REPLACE "\t" ";" fields "${line}")
  list(GET fields 0 object)
  list(GET fields 1 layer)
  list(GET fields 2 symbol)
  list(GET fields 3 owner)
  file(RELATIVE_PATH object "${OBJECT_DIR}" "${object}")
  execute_process(COMMAND c++filt "${symbol}" OUTPUT_VARIABLE readable OUTPUT_STRIP_TRAILING_WHITESPACE)
  list(APPEND violations "${object} (${layer}) uses ${readable}, defined in the higher layer '${owner}'")
endforeach()

if(violations)
  list(JOIN violations "\n  " report)
  message(FATAL_ERROR "upward calls (a lower layer needs a hook, or the code belongs lower):\n  ${report}")
endif()
list(LENGTH objects count)
message(STATUS "layers: none of ${count} objects uses what a higher layer defines")
