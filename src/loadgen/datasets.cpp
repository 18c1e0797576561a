#include "loadgen/datasets.h"

#include <algorithm>
#include <cmath>

#include "core/mmap.h"

namespace tmill::loadgen {

const std::vector<std::string_view>& word_list() {
  // Frequent, short, lower-case English words: single tokens in common BPE vocabularies.
  static const std::vector<std::string_view> words = {
      "the", "of", "and", "to", "in", "is", "was", "for", "on", "that", "with", "as", "it", "by",
      "at", "from", "his", "an", "he", "are", "be", "this", "which", "or", "had", "not", "first",
      "but", "their", "one", "they", "have", "were", "its", "after", "also", "all", "new", "has",
      "two", "been", "who", "her", "other", "when", "more", "time", "she", "into", "during",
      "there", "would", "years", "only", "most", "some", "over", "city", "three", "about", "many",
      "can", "world", "school", "later", "up", "then", "year", "these", "them", "state", "may",
      "where", "such", "made", "out", "used", "so", "while", "part", "known", "people", "between",
      "well", "under", "both", "team", "what", "film", "before", "second", "through", "season",
      "since", "work", "being", "each", "war", "name", "high", "any", "same", "than", "game",
      "national", "number", "group", "north", "life", "music", "area", "long", "four", "early",
      "family", "until", "river", "house", "album", "series", "you", "several", "government",
      "because", "old", "public", "end", "south", "back", "home", "will", "way", "around",
      "university", "band", "best", "party", "could", "line", "left", "water", "near",
      "small", "did", "based", "days", "power", "station", "march", "place", "led", "five",
      "village", "day", "still", "down", "last", "town", "own", "even", "large", "book", "field",
      "head", "point", "church", "local", "west", "general", "system", "club", "won", "again",
      "great", "main", "top", "form", "next", "set", "air", "right", "road", "story", "east",
      "island", "free", "land", "light", "red", "open", "run", "age", "body", "art", "low",
      "king", "song", "six", "half", "order", "ten", "green", "black", "white", "blue",
      "gold", "tree", "ship", "car", "door", "hand", "eye", "sea", "sun", "moon", "star", "rain",
      "wind", "fire", "stone", "bird", "fish", "dog", "cat", "horse", "bread", "milk", "tea",
      "bridge", "garden", "window", "table", "chair", "paper", "letter", "word", "voice",
      "face", "heart", "mind", "idea", "plan", "task", "test", "code", "data", "file", "list",
      "map", "key", "note", "page", "rule", "step", "view", "class", "model", "value", "price",
      "market", "trade", "money", "bank", "office", "court", "law", "army", "force", "crew",
      "guest", "child", "woman", "man", "friend", "doctor", "teacher", "student", "writer",
      "quick", "slow", "warm", "cold", "dark", "bright", "happy", "quiet", "strong", "young"};
  return words;
}

std::string random_words(int count, std::mt19937_64& rng) {
  const auto& w = word_list();
  std::uniform_int_distribution<size_t> pick(0, w.size() - 1);
  std::string out;
  out.reserve(static_cast<size_t>(std::max(count, 0)) * 6);
  for (int i = 0; i < count; ++i) {
    if (i) out.push_back(' ');
    out.append(w[pick(rng)]);
  }
  return out;
}

int sample_length(int len, double r, std::mt19937_64& rng) {
  r = std::clamp(r, 0.0, 1.0);
  if (r == 0.0) return std::max(len, 1);
  int lo = std::max(1, static_cast<int>(std::floor(len * (1.0 - r))));
  int hi = std::max(lo, static_cast<int>(std::ceil(len * (1.0 + r))));
  return std::uniform_int_distribution<int>(lo, hi)(rng);
}

std::vector<Prompt> build_random_dataset(const RandomDatasetConfig& cfg) {
  std::mt19937_64 rng(cfg.seed);
  std::vector<Prompt> out(cfg.num_prompts);
  for (auto& p : out) {
    int in = sample_length(cfg.input_len, cfg.range_ratio, rng);
    p.max_tokens = sample_length(cfg.output_len, cfg.range_ratio, rng);
    p.text = random_words(in, rng);
    p.approx_tokens = in;
  }
  return out;
}

std::vector<Prompt> build_shared_prefix_dataset(const SharedPrefixConfig& cfg) {
  std::mt19937_64 rng(cfg.seed);
  std::vector<std::string> prefixes(static_cast<size_t>(std::max(cfg.num_prefixes, 1)));
  for (auto& p : prefixes) p = random_words(cfg.prefix_len, rng);
  std::vector<Prompt> out(cfg.num_prompts);
  for (size_t i = 0; i < out.size(); ++i) {
    auto& p = out[i];
    int suffix = sample_length(cfg.suffix_len, cfg.range_ratio, rng);
    p.max_tokens = sample_length(cfg.output_len, cfg.range_ratio, rng);
    p.text = prefixes[i % prefixes.size()];
    if (suffix > 0) p.text += " " + random_words(suffix, rng);
    p.approx_tokens = cfg.prefix_len + suffix;
  }
  return out;
}

Result<std::vector<Prompt>> parse_jsonl_dataset(std::string_view text, size_t num_prompts,
                                                int default_max_tokens) {
  std::vector<Prompt> all;
  size_t line_no = 0, pos = 0;
  while (pos < text.size()) {
    size_t eol = text.find('\n', pos);
    if (eol == std::string_view::npos) eol = text.size();
    std::string_view line = text.substr(pos, eol - pos);
    pos = eol + 1;
    ++line_no;
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t'))
      line.remove_suffix(1);
    if (line.find_first_not_of(" \t") == std::string_view::npos) continue;
    nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    auto where = "dataset line " + std::to_string(line_no);
    if (j.is_discarded() || !j.is_object()) return Error{where + ": not a JSON object"};
    Prompt p;
    p.max_tokens = default_max_tokens;
    if (auto it = j.find("max_tokens"); it != j.end()) {
      if (!it->is_number_integer() || it->get<int64_t>() < 1)
        return Error{where + ": max_tokens must be a positive integer"};
      p.max_tokens = it->get<int>();
    }
    if (auto it = j.find("prompt"); it != j.end() && it->is_string()) {
      p.text = it->get<std::string>();
      p.approx_tokens = static_cast<int>(p.text.size() / 4);
    } else if (auto m = j.find("messages"); m != j.end() && m->is_array() && !m->empty()) {
      for (const auto& msg : *m)
        if (!msg.is_object() || !msg.contains("role") || !msg.contains("content"))
          return Error{where + ": each message needs \"role\" and \"content\""};
      p.messages = *m;
      p.approx_tokens = static_cast<int>(m->dump().size() / 4);
    } else {
      return Error{where + ": needs a string \"prompt\" or a non-empty \"messages\" array"};
    }
    all.push_back(std::move(p));
  }
  if (all.empty()) return Error{"dataset has no prompts"};
  if (num_prompts == 0) return all;
  std::vector<Prompt> out;
  out.reserve(num_prompts);
  for (size_t i = 0; i < num_prompts; ++i) out.push_back(all[i % all.size()]);
  return out;
}

Result<std::vector<Prompt>> load_jsonl_dataset(const std::string& path, size_t num_prompts,
                                               int default_max_tokens) {
  TM_ASSIGN_OR_RETURN(auto text, read_file(path));
  auto r = parse_jsonl_dataset(text, num_prompts, default_max_tokens);
  if (!r) return Error{path + ": " + r.error()};
  return r;
}

}  // namespace tmill::loadgen
