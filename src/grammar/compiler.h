// Syntax tree (gbnf_parser.h) to Program (program.h): small non-recursive rules without loops are
// inlined into their callers, code points are lowered to UTF-8 byte sequences, every remaining rule
// is built as an NFA and determinized. Left recursion (a rule that can call itself before reading a
// byte) is refused: the stack matcher would expand it forever.
#pragma once

#include <string_view>

#include "core/result.h"
#include "grammar/gbnf_parser.h"
#include "grammar/grammar.h"
#include "grammar/program.h"

namespace tmill::grammar {

struct CompileLimits {
  int32_t max_nfa_states = 1'000'000;
  int32_t max_dfa_states = 500'000;
  int32_t max_rule_dfa_states = 50'000;  // one rule, after the conservative rebuild (compiler.cpp)
  int32_t inline_max_states = 256;  // NFA states of a rule body inlined into its caller
  int32_t inline_max_loop_states = 64;  // rules with * + {m,}: inlined into rules without loops only,
  int32_t max_loop_inlined_rule = 200000;  // and only when the caller stays this small
  // {m,n} with more copies than this, whose unrolled copies would also make more NFA states than
  // max_unrolled_states, are counted on the stack (Program::Repeat); a short body ([a-z]{162}) is
  // unrolled: one automaton, one stack, however ambiguous what surrounds it.
  int32_t max_unrolled_repeat = 48;
  int64_t max_unrolled_states = 1024;
};

Result<Program> compile_program(const gbnf::Syntax& syntax, std::string_view root, const CompileLimits& lim = {});

// compile_gbnf (grammar.h) under other limits (tests: forcing counted repetitions).
Result<std::shared_ptr<const Grammar>> compile_gbnf(std::string_view gbnf, std::shared_ptr<const Vocabulary> vocab,
                                                    std::string_view root, const CompileLimits& lim);

// The UTF-8 encodings of the code points in [lo, hi] as sequences of byte ranges (all sequences of a
// result have the same length). Appends to out.
struct ByteRange {
  uint8_t lo, hi;
};
void utf8_sequences(uint32_t lo, uint32_t hi, std::vector<std::vector<ByteRange>>& out);

}  // namespace tmill::grammar
