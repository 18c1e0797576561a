#include "core/thread_pool.h"

#include <linux/futex.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <climits>

#include "core/cpu.h"
#include "core/log.h"

namespace tmill {
namespace {
constexpr int kSpinIterations = 1 << 14;  // tens of microseconds of pause before sleeping

// Raw futex calls: libstdc++ 12's std::atomic::wait lost wake-ups in this pattern.
void futex_wait(std::atomic<uint32_t>* addr, uint32_t expected) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(addr), FUTEX_WAIT_PRIVATE, expected, nullptr, nullptr, 0);
}
void futex_wake_all(std::atomic<uint32_t>* addr) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(addr), FUTEX_WAKE_PRIVATE, INT_MAX, nullptr, nullptr, 0);
}
}  // namespace

ThreadPool::ThreadPool(int n_threads) : n_threads_(n_threads < 1 ? 1 : n_threads) {
  ctl_.store(kClosed);  // no job open
  for (int i = 1; i < n_threads_; ++i) threads_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
  stop_.store(true);
  wake_.fetch_add(1, std::memory_order_seq_cst);
  futex_wake_all(&wake_);
  for (auto& t : threads_) t.join();
}

void ThreadPool::execute(Job& job, int index) {
  if (job.run_fn) {
    (*job.run_fn)(index, n_threads_);
    return;
  }
  for (;;) {
    const int64_t b = job.next.fetch_add(job.grain, std::memory_order_relaxed);
    if (b >= job.n) break;
    (*job.for_fn)(b, b + job.grain < job.n ? b + job.grain : job.n, index);
  }
}

void ThreadPool::worker_loop(int index) {
  uint32_t seen_wake = 0;
  uint64_t last_gen = 0;  // generations start at 1
  for (;;) {
    // Wait for a wake-up, spinning first.
    int spins = 0;
    while (wake_.load(std::memory_order_acquire) == seen_wake) {
      if (++spins < kSpinIterations) {
        cpu_relax();
      } else {
        sleepers_.fetch_add(1, std::memory_order_seq_cst);
        if (wake_.load(std::memory_order_seq_cst) == seen_wake) futex_wait(&wake_, seen_wake);
        sleepers_.fetch_sub(1, std::memory_order_seq_cst);
        spins = 0;
      }
    }
    seen_wake = wake_.load(std::memory_order_acquire);
    if (stop_.load(std::memory_order_acquire)) return;
    // Try to enter the current job (once per generation, only while its gate is open).
    uint64_t v = ctl_.load(std::memory_order_acquire);
    for (;;) {
      if ((v & kClosed) || (v >> 32) == last_gen) break;
      if (ctl_.compare_exchange_weak(v, v + 1, std::memory_order_acq_rel)) {
        last_gen = v >> 32;
        Job* job = job_;
        execute(*job, index);
        if (job->run_fn) job->finished.fetch_add(1, std::memory_order_acq_rel);
        ctl_.fetch_sub(1, std::memory_order_acq_rel);
        break;
      }
    }
  }
}

uint32_t ThreadPool::open_job(Job& job) {
  job_ = &job;
  const uint32_t g = ++gen_;
  ctl_.store(static_cast<uint64_t>(g) << 32, std::memory_order_release);
  wake_.fetch_add(1, std::memory_order_seq_cst);
  if (sleepers_.load(std::memory_order_seq_cst) > 0) futex_wake_all(&wake_);
  return g;
}

void ThreadPool::close_job() {
  ctl_.fetch_or(kClosed, std::memory_order_acq_rel);
  while ((ctl_.load(std::memory_order_acquire) & kActiveMask) != 0) cpu_relax();
  job_ = nullptr;
}

void ThreadPool::run(const std::function<void(int, int)>& fn) {
  if (n_threads_ == 1) {
    fn(0, 1);
    return;
  }
  TM_ASSERT(job_ == nullptr, "ThreadPool is not re-entrant");
  Job job;
  job.run_fn = &fn;
  open_job(job);
  fn(0, n_threads_);
  while (job.finished.load(std::memory_order_acquire) != n_threads_ - 1) cpu_relax();
  close_job();
}

void ThreadPool::parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t, int)>& fn) {
  if (n <= 0) return;
  if (grain < 1) grain = 1;
  if (n_threads_ == 1 || n <= grain) {
    fn(0, n, 0);
    return;
  }
  TM_ASSERT(job_ == nullptr, "ThreadPool is not re-entrant");
  Job job;
  job.for_fn = &fn;
  job.n = n;
  job.grain = grain;
  open_job(job);
  execute(job, 0);
  close_job();
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
