// Every public op. Each takes a defaulted SourceLoc so errors name the caller's line.
#pragma once
#include "baton/ops/elementwise.h"
#include "baton/ops/linalg.h"
#include "baton/ops/loss.h"
#include "baton/ops/nn.h"
#include "baton/ops/optim_ops.h"
#include "baton/ops/reduce.h"
#include "baton/ops/shape_ops.h"
#include "baton/ops/signal.h"
#include "baton/ops/text.h"
