#include "results/merge.h"

#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "results/results_file.h"

namespace testbed {
namespace {

// The first line where two texts differ (1-based), for the message.
int FirstDifferentLine(const std::string& a, const std::string& b) {
  int line = 1;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    if (a[i] != b[i]) return line;
    if (a[i] == '\n') ++line;
  }
  return line;
}

}  // namespace

absl::StatusOr<MergeSummary> MergeResults(const std::vector<std::filesystem::path>& inputs,
                                          const std::filesystem::path& output) {
  if (inputs.empty()) return absl::InvalidArgumentError("merge: no results files given");
  std::error_code ec;
  for (const auto& in : inputs) {
    if (std::filesystem::exists(output, ec) && std::filesystem::equivalent(in, output, ec)) {
      return absl::InvalidArgumentError(absl::StrCat("merge: the output ", output.string(), " is also an input"));
    }
  }
  std::vector<ResultsFile::Contents> files;
  for (const auto& in : inputs) {
    auto c = ResultsFile::Read(in, true);
    if (!c.ok()) return absl::Status(c.status().code(), absl::StrCat("merge: ", in.string(), ": ", c.status().message()));
    files.push_back(std::move(*c));
  }
  const ResultsHeader& first = files.front().header;
  for (size_t f = 1; f < files.size(); ++f) {
    const ResultsHeader& h = files[f].header;
    if (h.experiment != first.experiment) {
      return absl::InvalidArgumentError(absl::StrCat("merge: ", inputs[f].string(), " holds experiment '", h.experiment,
                                                     "', ", inputs[0].string(), " holds '", first.experiment,
                                                     "': files of different experiments are not merged"));
    }
    if (h.source_text != first.source_text) {
      return absl::InvalidArgumentError(absl::StrCat(
          "merge: ", inputs[f].string(), " and ", inputs[0].string(), " hold experiment '", h.experiment,
          "' from different files (they differ from line ", FirstDifferentLine(h.source_text, first.source_text),
          " of ", h.source_file, "); run every part from the same file"));
    }
    if (h.sets != first.sets) {
      auto list = [](const std::vector<std::string>& v) { return v.empty() ? std::string("none") : absl::StrJoin(v, " "); };
      return absl::InvalidArgumentError(absl::StrCat("merge: ", inputs[f].string(), " was run with --set ", list(h.sets),
                                                     ", ", inputs[0].string(), " with ", list(first.sets),
                                                     ": the parts of one experiment share their settings"));
    }
  }
  MergeSummary summary;
  summary.files = static_cast<int>(files.size());
  std::map<std::string, std::pair<const StoredRun*, size_t>> chosen;  // id -> run, file
  for (size_t f = 0; f < files.size(); ++f) {
    for (const StoredRun& r : files[f].runs) {
      auto [it, fresh] = chosen.try_emplace(r.id, &r, f);
      if (fresh) continue;
      ++summary.duplicates;
      const StoredRun& kept = *it->second.first;
      if (kept.config_hash != r.config_hash) {
        return absl::InvalidArgumentError(absl::StrCat("merge: run '", r.id, "' is in ", inputs[it->second.second].string(),
                                                       " and in ", inputs[f].string(),
                                                       " with different configurations (hashes ", kept.config_hash,
                                                       " and ", r.config_hash, ")"));
      }
      if (kept.status != "ok" && r.status == "ok") it->second = {&r, f};
    }
  }
  std::vector<const StoredRun*> runs;
  for (const auto& [id, v] : chosen) runs.push_back(v.first);
  std::sort(runs.begin(), runs.end(), [](const StoredRun* a, const StoredRun* b) { return a->index < b->index; });
  auto out = ResultsFile::Open(output, first);
  if (!out.ok()) return absl::Status(out.status().code(), absl::StrCat("merge: ", out.status().message()));
  for (const StoredRun* r : runs) {
    if (absl::Status st = out->Append(*r); !st.ok()) return st;
    ++summary.runs;
  }
  return summary;
}

}  // namespace testbed
