// The control-flow ops, If and Loop (control_flow.cpp). Their results are typed by their
// subgraphs, not by an infer rule: the verifier checks them against these definitions.
#pragma once
#include "dispatch/registry.h"

namespace baton::trace {

const ops::OpDef& if_op();
const ops::OpDef& loop_op();

}  // namespace baton::trace
