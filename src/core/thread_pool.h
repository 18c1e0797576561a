// A small fork-join pool for kernels. The calling thread is worker 0. Idle workers spin with
// `pause` for a short while before sleeping on a futex, so the ~200 dispatches per decoded token
// cost microseconds, not OS wake-ups.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <thread>
#include <vector>

namespace tmill {

class ThreadPool {
 public:
  // n_threads counts the caller; n_threads <= 1 runs everything inline.
  explicit ThreadPool(int n_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }

  // fn(thread_index, n_threads) once on every thread; returns when all are done.
  void run(const std::function<void(int, int)>& fn);

  // Splits [0, n) into chunks of `grain` handed out dynamically; fn(begin, end, thread_index).
  void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t, int)>& fn);

 private:
  void worker_loop(int index);
  void publish();  // start a new generation and wake sleeping workers

  int n_threads_;
  std::vector<std::thread> threads_;
  std::atomic<uint32_t> generation_{0};
  std::atomic<int> pending_{0};
  std::atomic<int> sleepers_{0};
  std::atomic<bool> stop_{false};
  const std::function<void(int, int)>* job_ = nullptr;
};

// Default thread count: physical cores visible to this process (sched_getaffinity).
int default_thread_count();

}  // namespace tmill
