// The embedding thread of an embedding model's engine (engine/embed.cpp): callers' jobs queue here;
// the thread packs whole sequences of the oldest jobs into forwards of at most batch_tokens tokens.
#pragma once

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <future>
#include <memory>
#include <mutex>
#include <span>
#include <thread>
#include <vector>

#include "model/embedder.h"

namespace tmill {

struct EmbedWorker {
  struct Job {
    const std::vector<std::vector<int32_t>>* inputs = nullptr;
    std::vector<std::vector<float>> out;
    size_t next = 0;  // inputs handed to a batch so far
    size_t done = 0;
    bool failed = false;  // the engine stopped first, or the forward failed (an output came back empty)
    std::promise<void> finished;
  };
  std::unique_ptr<Embedder> embedder;
  int64_t batch_tokens = 0;
  std::mutex mu;
  std::condition_variable cv;
  std::deque<Job*> queue;
  bool stopping = false;
  std::thread thread;

  void loop() {
    std::vector<std::span<const int32_t>> seqs;
    std::vector<std::pair<Job*, size_t>> owners;
    std::vector<std::vector<float>> out;
    for (;;) {
      seqs.clear();
      owners.clear();
      {
        std::unique_lock<std::mutex> lock(mu);
        cv.wait(lock, [&] { return stopping || !queue.empty(); });
        if (stopping) return;
        // whole sequences, oldest job first, up to the token budget (at least one sequence)
        int64_t tokens = 0;
        for (Job* j : queue) {
          while (j->next < j->inputs->size()) {
            const auto& in = (*j->inputs)[j->next];
            const auto n = static_cast<int64_t>(in.size());
            if (!seqs.empty() && tokens + n > batch_tokens) break;
            seqs.emplace_back(in);
            owners.emplace_back(j, j->next++);
            tokens += n;
          }
          if (j->next < j->inputs->size()) break;
        }
      }
      embedder->run(seqs, out);
      std::lock_guard<std::mutex> lock(mu);
      for (size_t i = 0; i < owners.size(); ++i) {
        auto [j, k] = owners[i];
        if (out[i].empty()) j->failed = true;
        j->out[k] = std::move(out[i]);
        if (++j->done == j->inputs->size()) {
          queue.erase(std::find(queue.begin(), queue.end(), j));
          j->finished.set_value();
        }
      }
    }
  }
};

}  // namespace tmill
