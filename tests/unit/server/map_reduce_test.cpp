// Map-reduce over long documents (server/map_reduce.h) on the stories260K tokenizer with a fake
// model: chunks end at paragraph boundaries and fit; the map runs once per chunk in one batch; reduce
// levels shrink until one answer; tokens and stages add up; progress is reported; errors are named.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include "server/map_reduce.h"
#include "test_support.h"
#include "tokenizer/tokenizer.h"

using namespace tmill;
using namespace tmill::server;

namespace {

const Tokenizer& stories_tok() {
  static std::shared_ptr<const Tokenizer> t = [] {
    auto r = Tokenizer::load(test::source_path("models/stories260K/stories260K.gguf"));
    EXPECT_TRUE(r.ok()) << r.error();
    return std::shared_ptr<const Tokenizer>(*r);
  }();
  return *t;
}

std::string document(int paragraphs) {
  std::string d;
  for (int i = 0; i < paragraphs; ++i) {
    d += fmt::format("Paragraph {} begins. Lily went to the park with her dog and they played all day.\n"
                     "Then the sun went down and they walked home happy.\n\n",
                     i);
  }
  return d;
}

PromptBuilder plain() {
  return [](const std::string& text) { return stories_tok().encode(text, true, false); };
}

// The fake model answers "S<n>" for the n-th generation, after recording its prompt.
struct FakeModel {
  std::vector<std::vector<std::string>> batches;  // prompt texts per run() call
  int next = 0;
  BatchRunner fn() {
    return [this](const std::vector<std::vector<int32_t>>& prompts,
                  const std::function<void(int32_t)>& done) -> Result<std::vector<StageOutput>> {
      batches.emplace_back();
      std::vector<StageOutput> outs;
      for (const auto& p : prompts) {
        batches.back().push_back(stories_tok().decode(p));
        outs.push_back({fmt::format(" summary {} of a part ", next++), static_cast<int32_t>(p.size()), 7});
        done(static_cast<int32_t>(outs.size()));
      }
      return outs;
    };
  }
};

}  // namespace

TEST(MapReduce, ChunksEndAtParagraphsAndFit) {
  const std::string doc = document(30);
  const auto chunks = chunk_document(doc, stories_tok(), 120);
  ASSERT_GT(chunks.size(), 3u);
  std::string joined;
  for (const std::string& c : chunks) {
    EXPECT_LE(stories_tok().encode(c, false, false).size(), 120u);
    EXPECT_EQ(c.rfind("Paragraph ", 0), 0u) << c;  // starts a paragraph
    EXPECT_EQ(c.back(), '.');                       // ends one
    joined += (joined.empty() ? "" : "\n\n") + c;
  }
  std::string expected = doc;
  while (!expected.empty() && expected.back() == '\n') expected.pop_back();
  EXPECT_EQ(joined, expected);  // nothing lost or reordered
}

TEST(MapReduce, AParagraphTooLongIsCutAtLinesThenSentencesThenTokens) {
  std::string para;
  for (int i = 0; i < 40; ++i) para += fmt::format("Sentence {} is about a cat. ", i);
  const auto chunks = chunk_document(para, stories_tok(), 50);
  ASSERT_GT(chunks.size(), 2u);
  for (const std::string& c : chunks) EXPECT_LE(stories_tok().encode(c, false, false).size(), 50u);
  EXPECT_EQ(chunks[0].rfind("Sentence 0 is about a cat. ", 0), 0u);
  std::string words(3000, 'x');  // no boundary at all: token slices
  for (const std::string& c : chunk_document(words, stories_tok(), 40)) EXPECT_LE(stories_tok().encode(c, false, false).size(), 48u);
}

TEST(MapReduce, MapsEveryChunkInOneBatchThenReducesToOneAnswer) {
  FakeModel fake;
  MapReduceOptions o;
  o.max_tokens = 20;
  o.chunk_tokens = 100;
  std::vector<std::string> progress;
  const std::string doc = document(40);
  auto r = run_map_reduce(doc, stories_tok(), 256, o, plain(), fake.fn(),
                          [&](const StageReport& s, int32_t done, int32_t total) {
                            progress.push_back(fmt::format("{}{}:{}/{}", s.stage, s.level, done, total));
                          });
  ASSERT_TRUE(r.ok()) << r.error();
  ASSERT_GE(fake.batches.size(), 2u);
  EXPECT_EQ(static_cast<int32_t>(fake.batches[0].size()), r->chunks);  // one batch: every chunk
  EXPECT_GT(r->chunks, 5);
  for (const std::string& p : fake.batches[0]) EXPECT_NE(p.find("Summarize this part of a document"), std::string::npos);
  for (size_t b = 1; b < fake.batches.size(); ++b) {
    EXPECT_LT(fake.batches[b].size(), fake.batches[b - 1].size());  // each level shrinks
    for (const std::string& p : fake.batches[b]) {
      EXPECT_NE(p.find("Combine these summaries"), std::string::npos);
      EXPECT_NE(p.find("summary "), std::string::npos);
    }
  }
  EXPECT_EQ(fake.batches.back().size(), 1u);
  EXPECT_EQ(r->output, fmt::format("summary {} of a part", fake.next - 1));  // trimmed
  ASSERT_EQ(r->stages.size(), fake.batches.size());
  EXPECT_EQ(r->stages[0].stage, "map");
  EXPECT_EQ(r->stages[1].stage, "reduce");
  EXPECT_EQ(r->stages[1].level, 1);
  int64_t prompt = 0, completion = 0;
  for (const StageReport& s : r->stages) {
    prompt += s.prompt_tokens;
    completion += s.completion_tokens;
    EXPECT_EQ(s.completion_tokens, 7 * s.inputs);
    EXPECT_GE(s.seconds, 0);
  }
  EXPECT_EQ(r->prompt_tokens, prompt);
  EXPECT_EQ(r->completion_tokens, completion);
  EXPECT_EQ(r->document_tokens, static_cast<int64_t>(stories_tok().encode(doc, false, false).size()));
  EXPECT_EQ(progress.front(), fmt::format("map0:0/{}", r->chunks));
  EXPECT_EQ(progress[static_cast<size_t>(r->chunks)], fmt::format("map0:{}/{}", r->chunks, r->chunks));
  EXPECT_EQ(progress.back(), fmt::format("reduce{}:1/1", r->stages.back().level));
  const json j = map_reduce_json(*r, "stories");
  EXPECT_EQ(j["object"], "map_reduce");
  EXPECT_EQ(j["usage"]["total_tokens"], prompt + completion);
  EXPECT_EQ(j["stages"].size(), r->stages.size());
}

TEST(MapReduce, AShortDocumentIsOneMap) {
  FakeModel fake;
  MapReduceOptions o;
  o.max_tokens = 20;
  auto r = run_map_reduce("Lily saw a cat.", stories_tok(), 256, o, plain(), fake.fn());
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ(r->chunks, 1);
  EXPECT_EQ(r->stages.size(), 1u);
  EXPECT_EQ(r->output, "summary 0 of a part");
}

TEST(MapReduce, ErrorsAreNamed) {
  FakeModel fake;
  MapReduceOptions o;
  o.max_tokens = 20;
  EXPECT_FALSE(run_map_reduce("  \n\n ", stories_tok(), 256, o, plain(), fake.fn()).ok());
  MapReduceOptions no_chunk = o;
  no_chunk.map_prompt = "Summarize:";
  EXPECT_NE(run_map_reduce("text", stories_tok(), 256, no_chunk, plain(), fake.fn()).error().find("{chunk}"), std::string::npos);
  MapReduceOptions big = o;
  big.max_tokens = 120;  // two answers cannot fit a reduce in 256
  EXPECT_NE(run_map_reduce("text", stories_tok(), 256, big, plain(), fake.fn()).error().find("lower max_tokens"),
            std::string::npos);
  auto failing = [](const std::vector<std::vector<int32_t>>&, const std::function<void(int32_t)>&)
      -> Result<std::vector<StageOutput>> { return Error{"engine down"}; };
  EXPECT_NE(run_map_reduce(document(10), stories_tok(), 256, o, plain(), failing).error().find("engine down"),
            std::string::npos);
}
