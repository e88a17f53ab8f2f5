#include "sim/private_books.h"

#include <algorithm>

#include "absl/container/flat_hash_map.h"

namespace testbed::sim {

std::vector<PrivateBooks::Books> PrivateBooks::Plan(size_t links, std::span<const CommPhase* const> fixed,
                                                    std::span<const CommPlan* const> others) {
  sums_.clear();
  links_.clear();
  // Links another plan crosses are booked on their own.
  std::vector<char> own(links, 0);
  for (const CommPlan* plan : others) {
    for (const CommPhase& ph : plan->phases) {
      for (const auto& [link, bytes] : ph.link_bytes) own[static_cast<size_t>(link)] = 1;
    }
  }
  // Each other link's signature: the fixed phases that cross it, with their bytes there.
  using Signature = std::vector<std::pair<std::int32_t, double>>;
  absl::flat_hash_map<std::int32_t, Signature> signature;
  for (size_t k = 0; k < fixed.size(); ++k) {
    for (const auto& [link, bytes] : fixed[k]->link_bytes) {
      if (!own[static_cast<size_t>(link)]) signature[link].emplace_back(static_cast<std::int32_t>(k), bytes);
    }
  }
  // Links of one signature make a class (numbered in link order, whatever the map's order).
  std::vector<std::int32_t> sorted;
  sorted.reserve(signature.size());
  for (const auto& [link, sig] : signature) sorted.push_back(link);
  std::sort(sorted.begin(), sorted.end());
  absl::flat_hash_map<Signature, std::int32_t> class_of_signature;
  absl::flat_hash_map<std::int32_t, std::int32_t> class_of_link;
  for (std::int32_t link : sorted) {
    const auto [it, fresh] = class_of_signature.try_emplace(signature[link], static_cast<std::int32_t>(links_.size()));
    if (fresh) links_.emplace_back();
    links_[static_cast<size_t>(it->second)].push_back(link);
    class_of_link[link] = it->second;
  }
  sums_.assign(links_.size(), SimLinkStats{});
  // Each fixed phase's books: its classes once each, its own links each.
  std::vector<Books> books(fixed.size());
  for (size_t k = 0; k < fixed.size(); ++k) {
    for (const auto& [link, bytes] : fixed[k]->link_bytes) {
      if (own[static_cast<size_t>(link)]) {
        books[k].emplace_back(-(link + 1), bytes);
        continue;
      }
      const std::int32_t c = class_of_link[link];
      const bool booked = std::any_of(books[k].begin(), books[k].end(), [c](const auto& b) { return b.first == c; });
      if (!booked) books[k].emplace_back(c, bytes);
    }
  }
  return books;
}

void PrivateBooks::Into(std::vector<SimLinkStats>& stats) const {
  for (size_t c = 0; c < links_.size(); ++c) {
    for (std::int32_t link : links_[c]) stats[static_cast<size_t>(link)] = sums_[c];
  }
}

}  // namespace testbed::sim
