// Internal: the bookkeeping shared by the CUDA backend's graph caches (lookup and
// join graphs, one cache per stream context). Plain C++, so the policy is unit
// tested without a GPU.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace gpujoin::engine::detail {

/// A small cache of entries keyed by shape (Entry::shape() == Shape), most
/// recently used first. A shape is captured on its second sight (the first is
/// only remembered), a shape whose capture failed is not tried again, and the
/// least recently used entry goes when the cache is full. Not thread-safe.
template <typename Shape, typename Entry>
class ShapeCache {
 public:
  /// At most `max_entries` entries; at most `max_remembered` shapes remembered as
  /// seen once, and as many as refused (oldest forgotten first).
  ShapeCache(size_t max_entries, size_t max_remembered)
      : max_entries_(max_entries), max_remembered_(max_remembered) {}

  /// The entry for `shape`: an existing one (now the most recently used), or one
  /// made now by `capture()` (returning absl::StatusOr<std::unique_ptr<Entry>>)
  /// when the shape was seen before; nullptr on the first sight and for a refused
  /// shape. A failed capture is returned as its status and refuses the shape.
  template <typename Capture>
  absl::StatusOr<Entry*> Get(const Shape& shape, Capture&& capture) {
    for (auto it = entries_.begin(); it != entries_.end(); ++it) {
      if ((*it)->shape() == shape) {
        entries_.splice(entries_.begin(), entries_, it);
        ++hits_;
        return entries_.front().get();
      }
    }
    if (std::find(refused_.begin(), refused_.end(), shape) != refused_.end()) return nullptr;
    auto seen = std::find(seen_.begin(), seen_.end(), shape);
    if (seen == seen_.end()) {
      Remember(seen_, shape);
      return nullptr;
    }
    seen_.erase(seen);
    absl::StatusOr<std::unique_ptr<Entry>> entry = capture();
    if (!entry.ok()) {
      Remember(refused_, shape);
      return entry.status();
    }
    ++captures_;
    if (entries_.size() >= max_entries_) entries_.pop_back();
    entries_.push_front(std::move(*entry));
    return entries_.front().get();
  }

  /// Entries made so far / requests served by an existing entry.
  uint64_t captures() const { return captures_; }
  uint64_t hits() const { return hits_; }

  /// Drops every entry and forgets every shape.
  void Clear() {
    entries_.clear();
    seen_.clear();
    refused_.clear();
  }

 private:
  void Remember(std::vector<Shape>& shapes, const Shape& shape) {
    if (shapes.size() >= max_remembered_) shapes.erase(shapes.begin());
    shapes.push_back(shape);
  }

  size_t max_entries_;
  size_t max_remembered_;
  std::list<std::unique_ptr<Entry>> entries_;  // most recently used first
  std::vector<Shape> seen_;                    // shapes seen once
  std::vector<Shape> refused_;                 // shapes whose capture failed
  uint64_t captures_ = 0;
  uint64_t hits_ = 0;
};

}  // namespace gpujoin::engine::detail
