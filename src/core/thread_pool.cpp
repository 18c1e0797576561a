#include "core/thread_pool.h"

#include <linux/futex.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "core/log.h"

namespace tmill {
namespace {
inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}
constexpr int kSpinIterations = 1 << 14;  // tens of microseconds of pause before sleeping

// Raw futex calls: libstdc++ 12's std::atomic::wait loses wake-ups under this pattern.
void futex_wait(std::atomic<uint32_t>* addr, uint32_t expected) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(addr), FUTEX_WAIT_PRIVATE, expected, nullptr, nullptr, 0);
}
void futex_wake_all(std::atomic<uint32_t>* addr) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(addr), FUTEX_WAKE_PRIVATE, INT32_MAX, nullptr, nullptr, 0);
}
}  // namespace

void ThreadPool::publish() {
  generation_.fetch_add(1, std::memory_order_seq_cst);
  if (sleepers_.load(std::memory_order_seq_cst) > 0) futex_wake_all(&generation_);
}

ThreadPool::ThreadPool(int n_threads) : n_threads_(n_threads < 1 ? 1 : n_threads) {
  for (int i = 1; i < n_threads_; ++i) threads_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
  stop_.store(true);
  publish();
  for (auto& t : threads_) t.join();
}

void ThreadPool::worker_loop(int index) {
  uint32_t seen = 0;  // generation_ starts at 0; a late-starting thread must not skip a job
  for (;;) {
    uint32_t g;
    int spins = 0;
    while ((g = generation_.load(std::memory_order_acquire)) == seen) {
      if (++spins < kSpinIterations) {
        cpu_relax();
      } else {
        sleepers_.fetch_add(1, std::memory_order_seq_cst);
        if (generation_.load(std::memory_order_seq_cst) == seen) futex_wait(&generation_, seen);
        sleepers_.fetch_sub(1, std::memory_order_seq_cst);
        spins = 0;
      }
    }
    seen = g;
    if (stop_.load(std::memory_order_acquire)) return;
    (*job_)(index, n_threads_);
    pending_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

void ThreadPool::run(const std::function<void(int, int)>& fn) {
  if (n_threads_ == 1) {
    fn(0, 1);
    return;
  }
  TM_ASSERT(pending_.load() == 0, "ThreadPool::run is not re-entrant");
  job_ = &fn;
  pending_.store(n_threads_ - 1, std::memory_order_relaxed);
  publish();
  fn(0, n_threads_);
  while (pending_.load(std::memory_order_acquire) != 0) cpu_relax();
  job_ = nullptr;
}

void ThreadPool::parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t, int)>& fn) {
  if (n <= 0) return;
  if (grain < 1) grain = 1;
  if (n_threads_ == 1 || n <= grain) {
    fn(0, n, 0);
    return;
  }
  std::atomic<int64_t> next{0};
  run([&](int tid, int) {
    for (;;) {
      int64_t b = next.fetch_add(grain, std::memory_order_relaxed);
      if (b >= n) break;
      fn(b, b + grain < n ? b + grain : n, tid);
    }
  });
}

int default_thread_count() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) {
    int c = CPU_COUNT(&set);
    if (c > 0) return c;
  }
  unsigned h = std::thread::hardware_concurrency();
  return h ? static_cast<int>(h) : 1;
}

}  // namespace tmill
