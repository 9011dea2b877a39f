// baton: one header for the whole public API.
#pragma once
#include <iostream>

#include "baton/autograd.h"
#include "baton/checkpoint.h"
#include "baton/data.h"
#include "baton/dtype.h"
#include "baton/error.h"
#include "baton/graph.h"
#include "baton/memory.h"
#include "baton/nn.h"
#include "baton/optim.h"
#include "baton/profiler.h"
#include "baton/ops.h"
#include "baton/runtime.h"
#include "baton/shape.h"
#include "baton/tensor.h"
