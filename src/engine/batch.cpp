#include "engine/batch.h"

namespace tmill {

ForwardBatch build_forward_batch(const SchedulerOutput& out) {
  ForwardBatch batch;
  batch.tokens.reserve(static_cast<size_t>(out.total_tokens));
  batch.seqs.reserve(out.scheduled.size());
  for (const ScheduledRequest& s : out.scheduled) {
    SeqSlice slice;
    slice.token_begin = static_cast<int32_t>(batch.tokens.size());
    slice.n_tokens = s.num_tokens;
    slice.pos_begin = s.start_pos;
    slice.block_table = s.block_table;
    slice.state_slot = s.state_slot;
    // A chunk with speculative drafts needs a row per position: each scores the next draft.
    slice.logits = !s.produces_sample         ? SeqSlice::Logits::None
                   : s.num_draft_tokens > 0 ? SeqSlice::Logits::All
                                            : SeqSlice::Logits::Last;
    batch.tokens.insert(batch.tokens.end(), s.token_ids.begin(), s.token_ids.end());
    batch.seqs.push_back(std::move(slice));
  }
  return batch;
}

}  // namespace tmill
