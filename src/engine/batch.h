// Batch building: the scheduler's plan for a step (which requests, how many tokens each, their
// block tables) as the explicit batch the model computes. The only place that knows both shapes.
#pragma once

#include "model/batch.h"
#include "sched/scheduler.h"

namespace tmill {

// One SeqSlice per scheduled request, in order; tokens flattened in the same order. A request
// whose chunk reaches its last known token asks for its last logits row (it samples this step), or
// for every row when the chunk ends with speculative drafts (each row verifies the next draft).
ForwardBatch build_forward_batch(const SchedulerOutput& out);

}  // namespace tmill
