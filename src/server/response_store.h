// The Responses API's stored responses (a request's "store", true by default, as OpenAI's): each
// response object kept with the input items it answered (the stored conversation it continued, then
// its own input), so that previous_response_id continues it (those items, the response's output items,
// then the new input) and GET /v1/responses/{id}, its /input_items and DELETE read or drop it. In
// memory, bounded by a count and by bytes (the JSON's size), the least recently used dropped first;
// a count of 0 keeps nothing. Each response belongs to the API key that made it (its name; "" without
// keys): other keys find nothing under its id. Thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

#include "server/api_error.h"

namespace tmill::server {

class ResponseStore {
 public:
  struct Entry {
    json response;     // the response object, as the API returned it
    json input_items;  // every input item the response answered, oldest first, each with an "id"
  };

  ResponseStore(size_t max_entries, uint64_t max_bytes) : max_entries_(max_entries), max_bytes_(max_bytes) {}

  bool enabled() const { return max_entries_ > 0; }
  // Keeps a response (its "id" names it; input items without an "id" get one); a response larger
  // than the byte bound is not kept. Drops the least recently used ones beyond the bounds.
  void put(json response, json input_items, const std::string& owner = "");
  std::optional<Entry> get(const std::string& id, const std::string& owner = "");  // (marks it recently used)
  bool erase(const std::string& id, const std::string& owner = "");
  // An item of a stored response (an input item or an output item) by its "id", for item_reference.
  std::optional<json> find_item(const std::string& item_id, const std::string& owner = "") const;
  size_t size() const;
  uint64_t bytes() const;

 private:
  struct Slot {
    Entry entry;
    std::string owner;
    uint64_t bytes;
    std::list<std::string>::iterator lru;
  };
  void drop_locked(std::unordered_map<std::string, Slot>::iterator it);

  const size_t max_entries_;
  const uint64_t max_bytes_;
  mutable std::mutex mu_;
  std::unordered_map<std::string, Slot> slots_;
  std::list<std::string> lru_;  // most recently used first
  uint64_t bytes_ = 0;
};

// The conversation a stored response continues into: its input items, then its output items.
json continued_items(const ResponseStore::Entry& e);

}  // namespace tmill::server
