// The device side of gpu/emu/emu.h: CUDA threads as fibers, the barriers, shuffles and their checks,
// and run_grid (gpu/emu/fibers.h), which runs a launch's blocks. Compiled into tm_gpu in every build.
#include "gpu/emu/fibers.h"

#include "gpu/emu/emu.h"

#include <pthread.h>
#include <sys/mman.h>
// CUEMU_SWITCH_ASM: the register switch below (x86-64); elsewhere, or with -DCUEMU_UCONTEXT (to test that
// path here), ucontext's swapcontext.
#if defined(__x86_64__) && !defined(CUEMU_UCONTEXT)
#define CUEMU_SWITCH_ASM 1
#else
#include <ucontext.h>
#endif

#include <cstdlib>
#include <string>
#include <vector>

#if defined(__SANITIZE_ADDRESS__)
#define CUEMU_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CUEMU_ASAN 1
#endif
#endif
#ifdef CUEMU_ASAN
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif

#if defined(CUEMU_SWITCH_ASM)
// The switch between fibers: the callee-saved registers pushed on the current stack, its pointer saved,
// the other's loaded and its registers popped (System V x86-64). ucontext's swapcontext would do the
// same plus a signal-mask system call each way, which at the millions of switches of a forward pass
// (every shuffle meets the warp) costs more than the kernels: 5.1 M lane-shuffles took 0.13 s this way
// and 1.05 s with swapcontext (Intel Xeon, 2026-12-05).
extern "C" void cuemu_switch(void** save_sp, void* load_sp);
asm(R"(
  .text
  .globl cuemu_switch
  .hidden cuemu_switch
  .type cuemu_switch, @function
cuemu_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size cuemu_switch, .-cuemu_switch
)");
#endif

namespace cuemu {
namespace detail {

thread_local Fiber* current = nullptr;
thread_local Block block;

namespace {

#ifdef CUEMU_ASAN
constexpr size_t kStackBytes = size_t{512} << 10;  // the sanitizer's redzones and fake frames
#else
constexpr size_t kStackBytes = size_t{128} << 10;
#endif

enum class State { Ready, AtWarp, AtBlock, Done };

}  // namespace

struct Fiber {
#if defined(CUEMU_SWITCH_ASM)
  void* sp = nullptr;  // its saved stack pointer while switched out
#else
  ucontext_t ctx;
#endif
  void* fake_stack = nullptr;  // (AddressSanitizer's bookkeeping across switches)
  uint3 idx;
  int lane = 0, warp = 0;
  State state = State::Ready;
  unsigned mask = 0;  // the lanes it waits with, at a warp barrier
  uint64_t word[2] = {};  // its value in a shuffle, double-buffered: one barrier per shuffle suffices
  unsigned shuffles = 0;  // how many it has taken part in (the buffer is shuffles % 2)
  void* stack = nullptr;
};

namespace {

struct Runner {
#if defined(CUEMU_SWITCH_ASM)
  void* main_sp = nullptr;
#else
  ucontext_t main;
#endif
  void* main_fake_stack = nullptr;
  std::vector<Fiber> fibers;
  size_t n = 0;  // the running block's threads (fibers[0, n))
  std::vector<int> at_warp;  // per warp, its lanes waiting at a warp-level call
  const std::function<void()>* body = nullptr;
  std::string failure;  // the running block's failure, if any
};
Runner* const g_runner = new Runner;  // never destroyed (threads of other statics may launch at exit)
inline Runner& runner() { return *g_runner; }

#ifdef CUEMU_ASAN
// The launching thread's own stack, which AddressSanitizer is told of when a fiber switches back to it.
struct HostStack {
  void* bottom = nullptr;
  size_t size = 0;
};
HostStack host_stack() {
  thread_local HostStack h = [] {
    HostStack s;
    pthread_attr_t a;
    if (pthread_getattr_np(pthread_self(), &a) == 0) {
      pthread_attr_getstack(&a, &s.bottom, &s.size);
      pthread_attr_destroy(&a);
    }
    return s;
  }();
  return h;
}
#endif

// From `from` to `to` (null: the scheduler, on the launching thread's stack); returns when something
// switches back to `from` (never if it has ended).
void switch_between(Fiber* from, Fiber* to, bool from_ended) {
  Runner& r = runner();
#ifdef CUEMU_ASAN
  void** save = from ? (from_ended ? nullptr : &from->fake_stack) : &r.main_fake_stack;
  const HostStack h = host_stack();
  __sanitizer_start_switch_fiber(save, to ? to->stack : h.bottom, to ? kStackBytes : h.size);
#endif
  current = to;
#if defined(CUEMU_SWITCH_ASM)
  cuemu_switch(from ? &from->sp : &r.main_sp, to ? to->sp : r.main_sp);
#else
  swapcontext(from ? &from->ctx : &r.main, to ? &to->ctx : &r.main);
#endif
#ifdef CUEMU_ASAN
  __sanitizer_finish_switch_fiber(from ? from->fake_stack : r.main_fake_stack, nullptr, nullptr);
#endif
  current = from;
}

// The running fiber stops (it waits, or has ended): the next ready thread of the block after it
// runs, or, when none is ready, the scheduler (gpu barriers, the end, or a deadlock).
void leave(bool ended) {
  Runner& r = runner();
  Fiber* me = current;
  const size_t at = static_cast<size_t>(me - r.fibers.data());
  Fiber* next = nullptr;
  for (size_t k = 1; k < r.n && !next; ++k) {
    Fiber& f = r.fibers[(at + k) % r.n];
    if (f.state == State::Ready) next = &f;
  }
  switch_between(me, next, ended);
}

[[noreturn]] void fiber_entry() {
#ifdef CUEMU_ASAN
  __sanitizer_finish_switch_fiber(nullptr, nullptr, nullptr);
#endif
  (*runner().body)();
  current->state = State::Done;
  leave(true);
  std::abort();  // an ended fiber is never entered again
}

// The running fiber gives up: straight to the scheduler, which abandons the block (callers set
// r.failure first; nothing owning memory may be alive on the abandoned stack).
[[noreturn]] void abandon() {
  current->state = State::Done;
  switch_between(current, nullptr, true);
  std::abort();
}

// The lanes of me's warp in its mask all wait with that mask: they are released (the last to arrive
// carries on without a switch). Exited lanes are the scheduler's to report.
bool release_warp(Runner& r, Fiber* me) {
  const size_t w0 = static_cast<size_t>(me->warp) * 32;
  const size_t w1 = w0 + 32 < r.n ? w0 + 32 : r.n;
  const unsigned lanes = me->mask & (w1 - w0 == 32 ? 0xffffffffu : (1u << (w1 - w0)) - 1u);
  const int want = lanes == 0xffffffffu ? 32 : std::popcount(lanes);
  if (r.at_warp[static_cast<size_t>(me->warp)] < want) return false;  // not all there yet
  for (size_t j = w0; j < w1; ++j)
    if ((lanes >> (j - w0) & 1u) && (r.fibers[j].state != State::AtWarp || r.fibers[j].mask != me->mask)) return false;
  for (size_t j = w0; j < w1; ++j)
    if (lanes >> (j - w0) & 1u) r.fibers[j].state = State::Ready;
  r.at_warp[static_cast<size_t>(me->warp)] -= want;
  return true;
}

void wait(State s, unsigned mask) {
  Fiber* me = current;
  me->state = s;
  me->mask = mask;
  if (s == State::AtWarp) {
    Runner& r = runner();
    ++r.at_warp[static_cast<size_t>(me->warp)];
    if (release_warp(r, me)) return;
  }
  leave(false);
}

std::string where(const Fiber& f) {
  return "thread (" + std::to_string(f.idx.x) + "," + std::to_string(f.idx.y) + "," + std::to_string(f.idx.z) + ")";
}

// Releases the threads waiting at barriers that every participant has reached; false if none could be
// released (then `why` says what blocks).
bool release(Runner& r, size_t n, std::string* why) {
  bool released = false;
  size_t live = 0, at_block = 0;
  for (size_t w0 = 0; w0 < n; w0 += 32) {
    const size_t w1 = w0 + 32 < n ? w0 + 32 : n;
    // a waiting lane whose group names an exited lane can never go on; a complete group goes on (its
    // last lane to arrive has released it already, release_warp: this is the same rule again)
    for (size_t i = w0; i < w1; ++i) {
      Fiber& f = r.fibers[i];
      if (f.state != State::AtWarp) continue;
      for (size_t j = w0; j < w1; ++j)
        if ((f.mask >> (j - w0) & 1u) && r.fibers[j].state == State::Done) {
          if (r.failure.empty())
            r.failure = "lane " + std::to_string(j - w0) + " of warp " + std::to_string(w0 / 32) +
                        " has exited, but " + where(f) + " waits for it at a warp-level call (__syncwarp, a shuffle, WMMA)";
          return false;
        }
      released = release_warp(r, &f) || released;
    }
  }
  for (size_t i = 0; i < n; ++i) {
    if (r.fibers[i].state != State::Done) ++live;
    if (r.fibers[i].state == State::AtBlock) ++at_block;
  }
  if (live > 0 && at_block == live) {
    for (size_t i = 0; i < n; ++i)
      if (r.fibers[i].state == State::AtBlock) r.fibers[i].state = State::Ready;
    released = true;
  }
  if (!released && live > 0) {
    size_t at_warp = 0;
    for (size_t i = 0; i < n; ++i) at_warp += r.fibers[i].state == State::AtWarp;
    *why = "deadlock: of " + std::to_string(live) + " live threads, " + std::to_string(at_block) +
           " wait at __syncthreads and " + std::to_string(at_warp) + " at warp-level calls that not all their lanes reach";
  }
  return released;
}

// Runs one block to the end; false (and r.failure) if it failed.
bool run_block(Runner& r, const dim3& bd) {
  const size_t n = static_cast<size_t>(bd.x) * bd.y * bd.z;
  if (r.fibers.size() < n) r.fibers.resize(n);
  for (size_t i = 0; i < n; ++i) {
    Fiber& f = r.fibers[i];
    if (!f.stack) {
      f.stack = mmap(nullptr, kStackBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
      if (f.stack == MAP_FAILED) {
        f.stack = nullptr;
        r.failure = "out of host memory for the emulated threads' stacks";
        return false;
      }
    }
    f.idx = uint3{static_cast<unsigned>(i % bd.x), static_cast<unsigned>(i / bd.x % bd.y), static_cast<unsigned>(i / (static_cast<size_t>(bd.x) * bd.y))};
    f.lane = static_cast<int>(i % 32);
    f.warp = static_cast<int>(i / 32);
    f.state = State::Ready;
    f.shuffles = 0;
#ifdef CUEMU_ASAN
    // an ended fiber's frames never returned: their redzones are still poisoned on the reused stack
    __asan_unpoison_memory_region(f.stack, kStackBytes);
    f.fake_stack = nullptr;
#endif
#if defined(CUEMU_SWITCH_ASM)
    // a frame cuemu_switch "returns" into fiber_entry from: six saved registers, then fiber_entry's
    // address, then a slot standing for its caller's return address (so it starts with the stack
    // aligned as after a call)
    void** sp = reinterpret_cast<void**>(static_cast<char*>(f.stack) + kStackBytes);
    *--sp = nullptr;
    *--sp = reinterpret_cast<void*>(&fiber_entry);
    for (int k = 0; k < 6; ++k) *--sp = nullptr;
    f.sp = sp;
#else
    getcontext(&f.ctx);
    f.ctx.uc_stack.ss_sp = f.stack;
    f.ctx.uc_stack.ss_size = kStackBytes;
    f.ctx.uc_link = nullptr;
    makecontext(&f.ctx, reinterpret_cast<void (*)()>(&fiber_entry), 0);
#endif
  }
  r.n = n;
  r.at_warp.assign((n + 31) / 32, 0);
  for (;;) {
    for (size_t i = 0; i < n; ++i)
      if (r.fibers[i].state == State::Ready) {
        switch_between(nullptr, &r.fibers[i], false);  // back here when no thread is ready
        break;
      }
    if (!r.failure.empty()) return false;
    std::string why;
    if (!release(r, n, &why)) {
      if (!r.failure.empty()) return false;
      for (size_t i = 0; i < n; ++i)
        if (r.fibers[i].state != State::Done) {
          r.failure = why;
          return false;
        }
      return true;
    }
  }
}

}  // namespace

bool run_grid(dim3 grid, dim3 bd, const std::function<void()>& body, std::string* why) {
  Runner& r = runner();
  const Block saved = block;
  r.body = &body;
  for (unsigned z = 0; z < grid.z; ++z)
    for (unsigned y = 0; y < grid.y; ++y)
      for (unsigned x = 0; x < grid.x; ++x) {
        block = Block{uint3{x, y, z}, bd, grid};
        if (!run_block(r, bd)) {
          *why = "block (" + std::to_string(x) + "," + std::to_string(y) + "," + std::to_string(z) + "): " + r.failure;
          r.failure.clear();
          block = saved;
          return false;
        }
      }
  block = saved;
  return true;
}

void fail(const char* why) {
  if (runner().failure.empty()) runner().failure = why;
  abandon();
}

const uint3& thread_idx() { return current->idx; }
int lane() { return current->lane; }

void syncthreads() { wait(State::AtBlock, 0); }
void syncwarp(unsigned mask) { wait(State::AtWarp, mask); }

uint64_t exchange(unsigned mask, uint64_t value, int src) {
  Fiber* me = current;
  const unsigned buf = me->shuffles++ % 2;
  me->word[buf] = value;
  wait(State::AtWarp, mask);  // every lane has written; none can write this buffer again before the
                              // next shuffle's barrier, which waits for this lane's read below
  const size_t at = static_cast<size_t>(me->warp) * 32 + static_cast<size_t>(src);
  Runner& r = runner();
  // (the source may already be at its next shuffle, writing the other buffer)
  if (!(mask >> src & 1u) || at >= r.fibers.size() ||
      (r.fibers[at].shuffles != me->shuffles && r.fibers[at].shuffles != me->shuffles + 1)) {
    if (r.failure.empty())
      r.failure = "lane " + std::to_string(me->lane) + " of warp " + std::to_string(me->warp) + " shuffles from lane " +
                  std::to_string(src) + ", which does not take part";
    abandon();
  }
  return r.fibers[at].word[buf];
}

}  // namespace detail
}  // namespace cuemu
