// gpu/emu/emu.h: the CUDA runtime and the device side on the host (fibers for CUDA threads, host memory
// for device memory, recordings for graphs). Compiled into tm_gpu in every build; its names live in
// namespace cuemu, so a -DTM_CUDA=ON build links it beside the real runtime.
#include "gpu/emu/emu.h"

#include <pthread.h>
#include <sys/mman.h>
#if !defined(__x86_64__)
#include <ucontext.h>
#endif

#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
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

#if defined(__x86_64__)
// The switch between fibers: the callee-saved registers pushed on the current stack, its pointer saved,
// the other's loaded and its registers popped (System V x86-64). ucontext's swapcontext would do the
// same plus a signal-mask system call each way, which at the millions of switches of a forward pass
// (every shuffle meets the warp) costs more than the kernels.
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
#if defined(__x86_64__)
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

// One launch at a time in the process: blocks share their kernel's static "shared memory" and the
// fibers' stacks.
std::recursive_mutex g_mu;

struct Runner {
#if defined(__x86_64__)
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
#if defined(__x86_64__)
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
    // the warp's waiting lanes, grouped by their masks (each group checked once)
    unsigned seen[32];
    int n_seen = 0;
    for (size_t i = w0; i < w1; ++i) {
      Fiber& f = r.fibers[i];
      if (f.state != State::AtWarp) continue;
      bool known = false;
      for (int k = 0; k < n_seen; ++k) known = known || seen[k] == f.mask;
      if (known) continue;
      seen[n_seen++] = f.mask;
      bool all = true;
      for (size_t j = w0; j < w1; ++j) {
        if (!(f.mask >> (j - w0) & 1u)) continue;
        const Fiber& g = r.fibers[j];
        if (g.state == State::Done) {
          if (r.failure.empty())
            r.failure = "lane " + std::to_string(j - w0) + " of warp " + std::to_string(w0 / 32) +
                        " has exited, but " + where(f) + " waits for it at a warp-level call (__syncwarp, a shuffle, WMMA)";
          return false;
        }
        if (g.state != State::AtWarp || g.mask != f.mask) all = false;
      }
      if (!all) continue;
      for (size_t j = w0; j < w1; ++j)
        if (f.mask >> (j - w0) & 1u) {
          r.fibers[j].state = State::Ready;
          --r.at_warp[w0 / 32];
        }
      released = true;
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
#if defined(__x86_64__)
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

// ---- the runtime's state ----
struct Node {
  std::function<cudaError_t()> run;
};

struct Device {
  std::map<uintptr_t, size_t> allocs;
  size_t used = 0, total = 0;
  cudaError_t last = cudaSuccess;     // a launch's configuration error, until cudaGetLastError
  cudaError_t pending = cudaSuccess;  // a kernel's failure, until the next synchronize
  std::map<int, std::string> detail;  // what the last error of each code was about
  bool capturing = false, invalidated = false;
  std::thread::id capture_thread;
  std::vector<Node> captured;
};
Device& dev() {
  static Device* d = [] {
    auto* x = new Device;
    x->total = size_t{4} << 30;
    if (const char* e = std::getenv("TOKENMILL_CUDA_EMU_MEMORY"); e && *e) x->total = std::strtoull(e, nullptr, 10);
    return x;
  }();
  return *d;
}

cudaError_t set_error(cudaError_t e, const std::string& what) {
  dev().detail[e] = what;
  return e;
}

// The allocation holding [p, p + n), if any.
bool in_device_memory(const void* p, size_t n) {
  const auto& a = dev().allocs;
  const auto u = reinterpret_cast<uintptr_t>(p);
  auto it = a.upper_bound(u);
  if (it == a.begin()) return false;
  --it;
  return u >= it->first && u + n <= it->first + it->second;
}

bool capturing_here() { return dev().capturing && dev().capture_thread == std::this_thread::get_id(); }

// A call the capture does not allow: the capture is invalidated, as CUDA does.
cudaError_t refuse_in_capture(const char* what) {
  dev().invalidated = true;
  return set_error(cudaErrorStreamCaptureUnsupported, std::string(what) + " while the stream is being captured");
}

cudaError_t run_kernel(const char* name, dim3 grid, dim3 bd, const std::function<void()>& body) {
  Runner& r = runner();
  const Block saved = block;
  r.body = &body;
  for (unsigned z = 0; z < grid.z; ++z)
    for (unsigned y = 0; y < grid.y; ++y)
      for (unsigned x = 0; x < grid.x; ++x) {
        block = Block{uint3{x, y, z}, bd, grid};
        if (!run_block(r, bd)) {
          const std::string why = std::string("kernel ") + name + ", block (" + std::to_string(x) + "," +
                                  std::to_string(y) + "," + std::to_string(z) + "): " + r.failure;
          r.failure.clear();
          block = saved;
          std::fprintf(stderr, "cuda-emu: %s\n", why.c_str());
          dev().pending = set_error(cudaErrorLaunchFailure, why);
          return cudaErrorLaunchFailure;
        }
      }
  block = saved;
  return cudaSuccess;
}

}  // namespace

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

void launch(const char* name, dim3 grid, dim3 bd, std::function<void()> body) {
  std::lock_guard lock(g_mu);
  Device& d = dev();
  const uint64_t threads = static_cast<uint64_t>(bd.x) * bd.y * bd.z;
  if (threads == 0 || threads > 1024 || bd.z > 64 || grid.x == 0 || grid.y == 0 || grid.z == 0 || grid.y > 65535 ||
      grid.z > 65535 || grid.x > 0x7fffffffu) {
    d.last = set_error(cudaErrorInvalidConfiguration,
                       std::string("kernel ") + name + ": grid (" + std::to_string(grid.x) + "," + std::to_string(grid.y) + "," +
                           std::to_string(grid.z) + "), block (" + std::to_string(bd.x) + "," + std::to_string(bd.y) + "," +
                           std::to_string(bd.z) + ")");
    return;
  }
  if (capturing_here()) {
    d.captured.push_back(Node{[name, grid, bd, body]() { return run_kernel(name, grid, bd, body); }});
    return;
  }
  run_kernel(name, grid, bd, body);
}

}  // namespace detail

using detail::dev;
using detail::set_error;

cudaError_t cudaGetDeviceCount(int* n) {
  *n = 1;
  return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp* p, int device) {
  if (device != 0) return set_error(cudaErrorInvalidDevice, "the emulator has one device, 0");
  *p = cudaDeviceProp{};
  std::snprintf(p->name, sizeof p->name, "%s", "tokenmill CUDA emulator (CPU)");
  p->major = 9;
  p->minor = 0;
  p->multiProcessorCount = 1;
  std::lock_guard lock(detail::g_mu);
  p->totalGlobalMem = dev().total;
  return cudaSuccess;
}

cudaError_t cudaSetDevice(int device) {
  return device == 0 ? cudaSuccess : set_error(cudaErrorInvalidDevice, "the emulator has one device, 0");
}

cudaError_t cudaMemGetInfo(size_t* free_bytes, size_t* total_bytes) {
  std::lock_guard lock(detail::g_mu);
  *total_bytes = dev().total;
  *free_bytes = dev().total - dev().used;
  return cudaSuccess;
}

cudaError_t cudaMalloc(void** p, size_t bytes) {
  std::lock_guard lock(detail::g_mu);
  detail::Device& d = dev();
  *p = nullptr;
  if (detail::capturing_here()) return detail::refuse_in_capture("cudaMalloc");
  if (bytes > d.total - d.used) return set_error(cudaErrorMemoryAllocation, "the emulated device is full");
  // 256-byte aligned as cudaMalloc's, and exactly `bytes` long, so that AddressSanitizer catches a
  // kernel reading or writing past its buffer
  void* m = nullptr;
  if (posix_memalign(&m, 256, bytes == 0 ? 1 : bytes) != 0) return set_error(cudaErrorMemoryAllocation, "host memory");
  d.allocs[reinterpret_cast<uintptr_t>(m)] = bytes;
  d.used += bytes;
  *p = m;
  return cudaSuccess;
}

cudaError_t cudaFree(void* p) {
  if (!p) return cudaSuccess;
  std::lock_guard lock(detail::g_mu);
  detail::Device& d = dev();
  if (detail::capturing_here()) return detail::refuse_in_capture("cudaFree");
  auto it = d.allocs.find(reinterpret_cast<uintptr_t>(p));
  if (it == d.allocs.end()) return set_error(cudaErrorInvalidValue, "cudaFree of a pointer cudaMalloc did not return");
  d.used -= it->second;
  d.allocs.erase(it);
  std::free(p);
  return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind, cudaStream_t) {
  std::lock_guard lock(detail::g_mu);
  if (bytes == 0) return cudaSuccess;
  const bool dst_dev = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
  const bool src_dev = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
  if ((dst_dev && !detail::in_device_memory(dst, bytes)) || (src_dev && !detail::in_device_memory(src, bytes)))
    return set_error(cudaErrorInvalidValue, "a copy's device side is not (wholly) in device memory");
  if (detail::capturing_here()) {
    dev().captured.push_back(detail::Node{[dst, src, bytes]() {
      std::memmove(dst, src, bytes);
      return cudaSuccess;
    }});
    return cudaSuccess;
  }
  std::memmove(dst, src, bytes);
  return cudaSuccess;
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* s, unsigned) {
  static int the_stream;
  *s = reinterpret_cast<cudaStream_t>(&the_stream);
  return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t) {
  std::lock_guard lock(detail::g_mu);
  if (detail::capturing_here()) return detail::refuse_in_capture("cudaStreamSynchronize");
  const cudaError_t e = dev().pending;
  dev().pending = cudaSuccess;
  return e;
}

cudaError_t cudaGetLastError() {
  std::lock_guard lock(detail::g_mu);
  cudaError_t e = dev().last;
  dev().last = cudaSuccess;
  if (e == cudaSuccess) e = dev().pending;  // a kernel that failed shows at its launch's check too
  dev().pending = cudaSuccess;
  return e;
}

cudaError_t cudaPeekAtLastError() {
  std::lock_guard lock(detail::g_mu);
  return dev().last != cudaSuccess ? dev().last : dev().pending;
}

const char* cudaGetErrorString(cudaError_t e) {
  static thread_local std::string s;
  const char* name = "unknown error";
  switch (e) {
    case cudaSuccess: name = "no error"; break;
    case cudaErrorInvalidValue: name = "invalid argument"; break;
    case cudaErrorMemoryAllocation: name = "out of memory"; break;
    case cudaErrorInvalidConfiguration: name = "invalid configuration argument"; break;
    case cudaErrorInvalidDevice: name = "invalid device ordinal"; break;
    case cudaErrorNoDevice: name = "no CUDA-capable device is detected"; break;
    case cudaErrorInvalidResourceHandle: name = "invalid resource handle"; break;
    case cudaErrorIllegalState: name = "the operation cannot be performed in the present state"; break;
    case cudaErrorLaunchFailure: name = "unspecified launch failure"; break;
    case cudaErrorStreamCaptureUnsupported: name = "operation not permitted when stream is capturing"; break;
    case cudaErrorStreamCaptureInvalidated: name = "operation failed due to a previous error during capture"; break;
    case cudaErrorStreamCaptureWrongThread: name = "attempt to terminate a thread-local capture sequence from another thread"; break;
  }
  std::lock_guard lock(detail::g_mu);
  auto it = dev().detail.find(e);
  s = it == dev().detail.end() ? std::string(name) : std::string(name) + " (cuda-emu: " + it->second + ")";
  return s.c_str();
}

struct CUgraph_st {
  std::vector<detail::Node> nodes;
};
struct CUgraphExec_st {
  std::vector<detail::Node> nodes;
};

cudaError_t cudaStreamBeginCapture(cudaStream_t, cudaStreamCaptureMode) {
  std::lock_guard lock(detail::g_mu);
  detail::Device& d = dev();
  if (d.capturing) return set_error(cudaErrorIllegalState, "the stream is already being captured");
  d.capturing = true;
  d.invalidated = false;
  d.capture_thread = std::this_thread::get_id();
  d.captured.clear();
  return cudaSuccess;
}

cudaError_t cudaStreamEndCapture(cudaStream_t, cudaGraph_t* g) {
  std::lock_guard lock(detail::g_mu);
  detail::Device& d = dev();
  *g = nullptr;
  if (!d.capturing) return set_error(cudaErrorIllegalState, "cudaStreamEndCapture without a capture");
  if (d.capture_thread != std::this_thread::get_id())
    return set_error(cudaErrorStreamCaptureWrongThread, "the capture began on another thread");
  d.capturing = false;
  std::vector<detail::Node> nodes = std::move(d.captured);
  d.captured.clear();
  if (d.invalidated) {
    d.invalidated = false;
    return set_error(cudaErrorStreamCaptureInvalidated, "a call during the capture was not allowed");
  }
  *g = new CUgraph_st{std::move(nodes)};
  return cudaSuccess;
}

cudaError_t cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t g, unsigned long long) {
  if (!g) return set_error(cudaErrorInvalidValue, "cudaGraphInstantiate of a null graph");
  *exec = new CUgraphExec_st{g->nodes};
  return cudaSuccess;
}

cudaError_t cudaGraphDestroy(cudaGraph_t g) {
  delete g;
  return cudaSuccess;
}

cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t) {
  std::lock_guard lock(detail::g_mu);
  if (!exec) return set_error(cudaErrorInvalidResourceHandle, "cudaGraphLaunch of a null graph");
  if (detail::capturing_here()) return detail::refuse_in_capture("cudaGraphLaunch");
  for (const detail::Node& n : exec->nodes)
    if (n.run() != cudaSuccess) break;  // the failure is pending for the next synchronize
  return cudaSuccess;
}

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) {
  delete exec;
  return cudaSuccess;
}

}  // namespace cuemu
