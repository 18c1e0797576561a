// A small fork-join pool for kernels. The calling thread is worker 0. Idle workers spin with
// `pause` for a short while before sleeping on a futex, so the ~200 dispatches per decoded token
// cost microseconds, not OS wake-ups.
//
// parallel_for never waits for a worker that has not started: each job has an entry gate, and the
// caller closes it once all chunks are handed out, then waits only for workers inside the job. On a
// loaded machine (more runnable threads than cores) a descheduled worker therefore cannot stall the
// caller; the caller simply does the chunks itself.
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

  // fn(thread_index, n_threads) once on every thread; returns when all are done. Unlike
  // parallel_for this waits for every worker, so prefer parallel_for for splittable work.
  void run(const std::function<void(int, int)>& fn);

  // Splits [0, n) into chunks of `grain` handed out dynamically; fn(begin, end, thread_index).
  void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t, int)>& fn);

 private:
  struct Job {
    const std::function<void(int, int)>* run_fn = nullptr;                      // run()
    const std::function<void(int64_t, int64_t, int)>* for_fn = nullptr;        // parallel_for()
    int64_t n = 0, grain = 1;
    std::atomic<int64_t> next{0};
    std::atomic<int> finished{0};  // workers that completed a run() job
  };
  void worker_loop(int index);
  void execute(Job& job, int index);
  uint32_t open_job(Job& job);   // publish and wake; returns the job's generation
  void close_job();              // no more entries; wait for workers inside

  static constexpr uint64_t kClosed = 1ull << 31;
  static constexpr uint64_t kActiveMask = kClosed - 1;

  int n_threads_;
  std::vector<std::thread> threads_;
  std::atomic<uint32_t> wake_{0};       // futex word: bumped for every job and at shutdown
  std::atomic<uint64_t> ctl_{0};        // job generation (high 32) | closed bit | workers inside
  std::atomic<int> sleepers_{0};
  std::atomic<bool> stop_{false};
  Job* job_ = nullptr;
  uint32_t gen_ = 0;
};

// Default thread count: CPUs this process may run on (sched_getaffinity).
int default_thread_count();

}  // namespace tmill
