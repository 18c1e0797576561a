// The draft-model proposer: a small GGUF with the target's tokenizer drafts k tokens greedily per
// sequence. It keeps its own paged KV cache (its own KvStorage and block tables from its own
// KvCacheManager, no prefix caching) so its memory never competes with the target's blocks, and
// runs its own Forward on the engine's thread pool. Each proposal round is k forwards of the draft
// over all drafting sequences together: the first catches the sequence up on the tokens it has not
// seen (the whole prompt for a new sequence, else the tokens accepted since its last round) and
// drafts token 1; each further forward feeds the previous draft and drafts the next. Only the
// sequence's real tokens count as computed afterwards (the drafted positions are rolled back), so a
// rejected draft never stays in the draft's cache either.
#include <algorithm>
#include <unordered_map>

#include <fmt/format.h>

#include "core/log.h"
#include "engine/speculative.h"
#include "kv/kv_cache_manager.h"
#include "model/forward.h"
#include "model/kv_storage.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace tmill {

namespace {

class DraftModelProposer final : public Proposer {
 public:
  DraftModelProposer(std::shared_ptr<const Model> m, std::unique_ptr<Forward> f, KvStorage kv, KvCacheManager mgr,
                     int32_t n_vocab)
      : model_(std::move(m)), forward_(std::move(f)), kv_(std::move(kv)), mgr_(std::move(mgr)), n_vocab_(n_vocab) {}

  void propose(std::vector<DraftJob>& jobs) override {
    struct Seq {
      DraftJob* job;
      int32_t computed;  // positions the draft holds for this sequence
    };
    std::vector<Seq> seqs;
    std::vector<DraftJob*> ran;
    for (DraftJob& j : jobs) {
      const auto len = static_cast<int32_t>(j.tokens.size());
      int32_t& computed = computed_[j.seq];
      // Nothing new since the last round (the sequence was not scheduled): recompute the last token
      // for its logits row (its K/V is rewritten with the same values).
      computed = std::min(computed, len - 1);
      // The catch-up chunk and k - 1 drafted positions: slots for positions [computed, len + k - 1).
      if (!mgr_.allocate_slots(j.seq, computed, len + j.k - 1 - computed)) continue;  // full: no drafts
      seqs.push_back({&j, computed});
      ran.push_back(&j);
    }
    for (int32_t round = 0; !seqs.empty(); ++round) {
      ForwardBatch batch;
      for (const Seq& s : seqs) {
        const DraftJob& j = *s.job;
        const auto len = static_cast<int32_t>(j.tokens.size());
        SeqSlice slice;
        slice.token_begin = static_cast<int32_t>(batch.tokens.size());
        slice.block_table = mgr_.block_table(j.seq);
        slice.logits = SeqSlice::Logits::Last;
        if (round == 0) {
          slice.pos_begin = s.computed;
          slice.n_tokens = len - s.computed;
          batch.tokens.insert(batch.tokens.end(), j.tokens.begin() + s.computed, j.tokens.end());
        } else {
          slice.pos_begin = len + round - 1;
          slice.n_tokens = 1;
          batch.tokens.push_back(j.drafts.back());
        }
        batch.seqs.push_back(std::move(slice));
      }
      forward_->run(batch, kv_, logits_);
      const auto row_len = static_cast<size_t>(model_->config().n_vocab);
      std::vector<Seq> next;
      for (size_t i = 0; i < seqs.size(); ++i) {
        DraftJob& j = *seqs[i].job;
        const float* row = logits_.data() + i * row_len;
        j.drafts.push_back(static_cast<int32_t>(std::max_element(row, row + n_vocab_) - row));  // first maximum
        if (static_cast<int32_t>(j.drafts.size()) < j.k) next.push_back(seqs[i]);
      }
      seqs.swap(next);
    }
    // Only real tokens stay computed; the drafted positions' slots go back.
    for (DraftJob* j : ran) {
      const auto len = static_cast<int32_t>(j->tokens.size());
      computed_[j->seq] = len;
      mgr_.truncate(j->seq, len);
    }
  }

  void release(uint64_t seq) override {
    mgr_.free(seq);
    computed_.erase(seq);
  }

 private:
  std::shared_ptr<const Model> model_;
  std::unique_ptr<Forward> forward_;
  KvStorage kv_;
  KvCacheManager mgr_;
  int32_t n_vocab_;  // draft ids valid for both models
  std::unordered_map<uint64_t, int32_t> computed_;
  std::vector<float> logits_;
};

// The draft must spell every token as the target does, or its ids would mean other text.
Status same_tokenizer(const Tokenizer& target, const Tokenizer& draft, const std::string& path) {
  if (target.n_vocab() != draft.n_vocab())
    return Error{fmt::format("speculative config: the draft model {} has a different tokenizer: {} tokens, the target "
                             "has {}",
                             path, draft.n_vocab(), target.n_vocab())};
  const auto a = target.token_bytes_all(), b = draft.token_bytes_all();
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i] != b[i])
      return Error{fmt::format("speculative config: the draft model {} has a different tokenizer: token {} differs "
                               "from the target's",
                               path, i)};
  return {};
}

}  // namespace

Result<std::unique_ptr<Proposer>> make_draft_model_proposer(const SpeculativeConfig& c, const Tokenizer& target_tok,
                                                            int32_t target_vocab, int32_t block_size, ThreadPool* pool) {
  auto m = Model::load(c.model);
  if (!m.ok()) return Error{fmt::format("speculative config: draft model {}: {}", c.model, m.error())};
  std::shared_ptr<const Model> model = *m;
  auto tok = Tokenizer::from_gguf(model->file());
  if (!tok.ok()) return Error{fmt::format("speculative config: draft model {}: tokenizer: {}", c.model, tok.error())};
  TM_TRY(same_tokenizer(target_tok, **tok, c.model));
  const ModelConfig& mc = model->config();
  if (mc.n_ssm_layers() > 0)  // (its drafts past a rejection would need the state before them)
    return Error{fmt::format("speculative config: draft model {}: models with recurrent layers ({}) cannot draft",
                             c.model, mc.arch.name)};
  auto forward = std::make_unique<Forward>(model, pool);
  KvLayout lay = KvLayout::for_model(mc, block_size, 0, model->main_weight_type() == DType::F32 ? DType::F32 : DType::F16,
                                     c.num_speculative_tokens);
  // As many tokens as the draft's trained context for 64 sequences, at most 256 MiB.
  const int64_t per_block = static_cast<int64_t>(lay.bytes_per_block());
  const int64_t want = std::max<int64_t>(mc.n_ctx_train, 4096) * 64 / block_size + 1;
  lay.num_blocks = std::max<int64_t>(2, std::min<int64_t>(want, (int64_t{256} << 20) / std::max<int64_t>(per_block, 1)));
  TM_ASSIGN_OR_RETURN(KvStorage kv, KvStorage::create(lay));
  KvCacheConfig kc;
  kc.num_blocks = static_cast<int32_t>(lay.num_blocks);
  kc.block_size = block_size;
  kc.enable_prefix_caching = false;
  TM_ASSIGN_OR_RETURN(KvCacheManager mgr, KvCacheManager::create(kc));
  forward->set_context_length(mc.n_ctx_train);
  const auto n_vocab = static_cast<int32_t>(std::min<int64_t>(mc.n_vocab, target_vocab));
  log_info("speculative decoding: draft model {} ({} layers, {} params), KV {} blocks of {} tokens", c.model,
           mc.n_layer, model->n_params(), lay.num_blocks - 1, block_size);
  return std::unique_ptr<Proposer>(
      new DraftModelProposer(std::move(model), std::move(forward), std::move(kv), std::move(mgr), n_vocab));
}

}  // namespace tmill
