#include "server/response_store.h"

#include <fmt/format.h>

namespace tmill::server {

void ResponseStore::put(json response, json input_items, const std::string& owner) {
  if (!enabled() || !response.is_object() || !response.contains("id") || !response["id"].is_string()) return;
  const std::string id = response["id"].get<std::string>();
  if (!input_items.is_array()) input_items = json::array();
  size_t k = 0;
  for (json& item : input_items)
    if (item.is_object() && !item.contains("id")) item["id"] = fmt::format("msg_{}_{}", id.substr(id.find('_') + 1), k++);
  const uint64_t bytes = response.dump().size() + input_items.dump().size();
  if (bytes > max_bytes_) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (auto it = slots_.find(id); it != slots_.end()) drop_locked(it);
  lru_.push_front(id);
  slots_.emplace(id, Slot{Entry{std::move(response), std::move(input_items)}, owner, bytes, lru_.begin()});
  bytes_ += bytes;
  while (slots_.size() > max_entries_ || bytes_ > max_bytes_) drop_locked(slots_.find(lru_.back()));
}

std::optional<ResponseStore::Entry> ResponseStore::get(const std::string& id, const std::string& owner) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = slots_.find(id);
  if (it == slots_.end() || it->second.owner != owner) return std::nullopt;
  lru_.splice(lru_.begin(), lru_, it->second.lru);
  return it->second.entry;
}

bool ResponseStore::erase(const std::string& id, const std::string& owner) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = slots_.find(id);
  if (it == slots_.end() || it->second.owner != owner) return false;
  drop_locked(it);
  return true;
}

std::optional<json> ResponseStore::find_item(const std::string& item_id, const std::string& owner) const {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [id, slot] : slots_) {
    if (slot.owner != owner) continue;
    for (const json* list : {&slot.entry.input_items, slot.entry.response.contains("output") ? &slot.entry.response["output"] : nullptr})
      if (list && list->is_array())
        for (const json& item : *list)
          if (item.is_object() && item.value("id", "") == item_id) return item;
  }
  return std::nullopt;
}

size_t ResponseStore::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return slots_.size();
}

uint64_t ResponseStore::bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return bytes_;
}

void ResponseStore::drop_locked(std::unordered_map<std::string, Slot>::iterator it) {
  bytes_ -= it->second.bytes;
  lru_.erase(it->second.lru);
  slots_.erase(it);
}

json continued_items(const ResponseStore::Entry& e) {
  json items = e.input_items;
  if (e.response.contains("output") && e.response["output"].is_array())
    for (const json& item : e.response["output"]) items.push_back(item);
  return items;
}

}  // namespace tmill::server
