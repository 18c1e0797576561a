// Python-compatible string helpers for the Jinja interpreter. Strings are UTF-8 (kept valid by the
// interpreter); Python indexes strings by code point, so these helpers work on code points.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tmill::jinja::py {

// Decodes the code point at `pos` and advances `pos`. Invalid bytes decode as U+FFFD (one byte).
uint32_t next_cp(std::string_view s, size_t& pos);
void append_utf8(std::string& out, uint32_t cp);
std::u32string decode(std::string_view s);
std::string encode(std::u32string_view s);
size_t cp_len(std::string_view s);
// Byte offset of code point index `cp_index` (clamped to s.size()).
size_t byte_offset(std::string_view s, size_t cp_index);
// Code point index of byte offset `byte_pos`.
size_t cp_index(std::string_view s, size_t byte_pos);

bool is_space(uint32_t cp);  // str.isspace()
bool is_alpha(uint32_t cp);  // approximation: ASCII, Latin-1, Latin Ext-A, Greek, Cyrillic, CJK
bool is_digit(uint32_t cp);
bool is_upper(uint32_t cp);
bool is_lower(uint32_t cp);
uint32_t to_upper(uint32_t cp);
uint32_t to_lower(uint32_t cp);

std::string upper(std::string_view s);
std::string lower(std::string_view s);
std::string capitalize(std::string_view s);   // str.capitalize()
std::string title(std::string_view s);        // str.title()
std::string swapcase(std::string_view s);

// str.strip/lstrip/rstrip; chars == nullptr strips whitespace.
std::string strip(std::string_view s, const std::string* chars, bool left, bool right);
// str.split / str.rsplit; sep == nullptr splits on whitespace runs. maxsplit < 0: no limit.
std::vector<std::string> split(std::string_view s, const std::string* sep, int64_t maxsplit, bool from_right);
std::vector<std::string> splitlines(std::string_view s, bool keepends);
std::string replace(std::string_view s, std::string_view old, std::string_view repl, int64_t count);
size_t count(std::string_view s, std::string_view sub);

// repr() of a str: quotes and escapes the way Python does.
std::string repr_str(std::string_view s);
// repr() of a float ("1.0", "1e+16", "1.5e-05", "inf", "nan").
std::string float_repr(double d);

}  // namespace tmill::jinja::py
