// Sets of parse stacks over a Program, shared as a graph: each stack node is (state, parent node),
// hash-consed so equal stacks are the same node and a set of stacks is a sorted list of node ids.
// Stacks in a set are always expanded: their top state has a byte edge (calls are pushed, returns
// popped until a byte can be read). Reaching the bottom of the root rule makes the set accepting.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "grammar/program.h"

namespace tmill::grammar {

class Stacks {
 public:
  static constexpr int32_t kBottom = -1;
  explicit Stacks(const Program* prog) : prog_(prog) {}

  int32_t state(int32_t n) const { return nodes_[static_cast<size_t>(n)].state; }
  int32_t parent(int32_t n) const { return nodes_[static_cast<size_t>(n)].parent; }
  int32_t cons(int32_t state, int32_t parent);
  size_t num_nodes() const { return nodes_.size(); }

  // Expands the stack `n` (whose top may be any state) into `out` (appended, not sorted); returns
  // whether some path returns from the root rule (the text so far is complete).
  bool expand(int32_t n, std::vector<int32_t>& out);
  // The stacks after reading byte b from `in` (expanded, sorted, unique) into out; returns accepting.
  bool advance(std::span<const int32_t> in, uint8_t b, std::vector<int32_t>& out);
  // Expands several stacks into out (sorted, unique); returns accepting.
  bool expand_all(std::span<const int32_t> seeds, std::vector<int32_t>& out);
  // The bytes some stack of the (expanded) set can read next.
  ByteSet first_bytes(std::span<const int32_t> set) const;
  // Start: the root rule's start state on an empty stack.
  bool initial(std::vector<int32_t>& out);

  // Rebuilds the node pool keeping only the stacks in `live` (renumbered in place): the pool grows by
  // a few nodes per byte and per mask, this keeps it proportional to what is alive.
  void compact(std::vector<int32_t>& live);

  const Program& program() const { return *prog_; }

 private:
  struct Node {
    int32_t state, parent;
  };
  const Program* prog_;
  std::vector<Node> nodes_;
  // Open addressing: key (state, parent) -> node id + 1 (0 empty).
  std::vector<int32_t> table_;
  std::vector<uint32_t> mark_;
  uint32_t epoch_ = 0;
  std::vector<int32_t> work_;

  void grow();
  static uint64_t hash(int32_t s, int32_t p) {
    uint64_t k = (static_cast<uint64_t>(static_cast<uint32_t>(s)) << 32) | static_cast<uint32_t>(p);
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdull;
    k ^= k >> 33;
    return k;
  }
  void sort_unique(std::vector<int32_t>& v, size_t from);
};

}  // namespace tmill::grammar
