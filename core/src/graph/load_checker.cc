#include "graph/load_checker.h"

#include "absl/strings/str_cat.h"

namespace testbed {

LoadChecker::LoadChecker(std::int64_t vertices)
    : vertices_(vertices),
      is_resident_(static_cast<size_t>(vertices), 0),
      copied_(static_cast<size_t>(vertices), 0),
      in_batch_(static_cast<size_t>(vertices), 0),
      kept_(static_cast<size_t>(vertices), 0) {}

bool LoadChecker::Mark(std::vector<std::uint32_t>& stamps, std::int64_t v) const {
  std::uint32_t& s = stamps[static_cast<size_t>(v)];
  if (s == generation_) return false;
  s = generation_;
  return true;
}

absl::Status LoadChecker::Apply(const FeatureLoad& load, std::span<const std::int64_t> batch, const std::string& owner,
                                const std::string& call) {
  if (++generation_ == 0) {  // wrapped: start the stamps over
    for (auto* stamps : {&copied_, &in_batch_, &kept_}) stamps->assign(stamps->size(), 0);
    generation_ = 1;
  }
  auto bad = [&](std::string what) {
    return absl::InvalidArgumentError(absl::StrCat("feature_loader '", owner, "', ", call, ": ", what));
  };
  auto outside = [&](std::int64_t v) { return v < 0 || v >= vertices_; };
  for (std::int64_t v : load.copied) {
    if (outside(v)) return bad(absl::StrCat("copies vertex ", v, ", outside the graph's ", vertices_));
    if (is_resident_[static_cast<size_t>(v)] != 0) return bad(absl::StrCat("copies vertex ", v, ", already resident"));
    if (!Mark(copied_, v)) return bad(absl::StrCat("copies vertex ", v, " twice"));
  }
  std::int64_t rows = 0;
  for (std::int64_t v : batch) {
    if (outside(v)) return bad(absl::StrCat("the batch holds vertex ", v, ", outside the graph's ", vertices_));
    if (is_resident_[static_cast<size_t>(v)] == 0 && !Marked(copied_, v)) {
      return bad(absl::StrCat("the batch needs vertex ", v, ", neither resident nor copied"));
    }
    rows += Mark(in_batch_, v) ? 1 : 0;
  }
  for (std::int64_t v : load.kept) {
    if (outside(v)) return bad(absl::StrCat("keeps vertex ", v, ", outside the graph's ", vertices_));
    if (is_resident_[static_cast<size_t>(v)] == 0 && !Marked(copied_, v)) {
      return bad(absl::StrCat("keeps vertex ", v, ", neither resident nor copied"));
    }
    if (!Mark(kept_, v)) return bad(absl::StrCat("keeps vertex ", v, " twice"));
    rows += Marked(in_batch_, v) ? 0 : 1;
  }
  device_rows_ = rows;
  for (std::int64_t v : resident_) is_resident_[static_cast<size_t>(v)] = 0;
  resident_.assign(load.kept.begin(), load.kept.end());
  for (std::int64_t v : resident_) is_resident_[static_cast<size_t>(v)] = 1;
  return absl::OkStatus();
}

}  // namespace testbed
