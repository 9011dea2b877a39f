# The layers of src/ (docs/ARCHITECTURE.md), lowest first; folders joined by '|' are peers
# of one rank and may use each other. Sets rank_<folder> for each folder of src/ (and
# tools, the top one). Included by check_layers.cmake and check_links.cmake.
set(ranks core kernels dispatch ops graph "autograd|trace" passes runtime "nn|optim|data|io" tools)

set(index 0)
foreach(rank IN LISTS ranks)
  string(REPLACE "|" ";" folders "${rank}")
  foreach(folder IN LISTS folders)
    set(rank_${folder} ${index})
  endforeach()
  math(EXPR index "${index} + 1")
endforeach()
