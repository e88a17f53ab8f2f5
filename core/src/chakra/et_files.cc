// Chakra trace files on disk: reading and writing one rank's file atomically, the files of a
// trace set (`<prefix>.<rank>.et`) and the communicator group JSON beside them.
#include "chakra/et_io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"

namespace testbed::chakra {
namespace {

// ---- Files.

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return absl::ErrnoToStatus(errno, absl::StrCat(path, ": cannot open"));
  // Read straight into the string, sized from the file's size plus one byte, so that the end
  // of the file is seen without growing it (it grows only for a file that grew meanwhile).
  struct stat st {};
  const std::size_t expected = ::fstat(fd, &st) == 0 && st.st_size > 0 ? static_cast<std::size_t>(st.st_size) : 0;
  std::string bytes(expected + 1, '\0');
  std::size_t used = 0;
  while (true) {
    if (used == bytes.size()) bytes.resize(2 * bytes.size());
    const ssize_t n = ::read(fd, bytes.data() + used, bytes.size() - used);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      ::close(fd);
      return absl::ErrnoToStatus(err, absl::StrCat(path, ": cannot read at byte ", used));
    }
    if (n == 0) break;
    used += static_cast<std::size_t>(n);
  }
  ::close(fd);
  bytes.resize(used);
  return bytes;
}

// Writes `bytes` to `path + ".tmp-<pid>"`, flushes it to disk and renames it to `path`,
// creating the parent directories; the temporary file is removed on failure.
absl::Status WriteFileAtomically(const std::string& path, absl::string_view bytes) {
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  std::error_code ec;
  if (!parent.empty()) std::filesystem::create_directories(parent, ec);
  if (ec) return absl::UnavailableError(absl::StrCat(path, ": cannot create its directory: ", ec.message()));
  const std::string tmp = absl::StrCat(path, ".tmp-", ::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return absl::ErrnoToStatus(errno, absl::StrCat(tmp, ": cannot create"));
  absl::Status status;
  std::size_t done = 0;
  while (status.ok() && done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) status = absl::ErrnoToStatus(errno, absl::StrCat(tmp, ": cannot write at byte ", done));
    if (n > 0) done += static_cast<std::size_t>(n);
  }
  if (status.ok() && ::fsync(fd) != 0) status = absl::ErrnoToStatus(errno, absl::StrCat(tmp, ": cannot flush"));
  if (::close(fd) != 0 && status.ok()) status = absl::ErrnoToStatus(errno, absl::StrCat(tmp, ": cannot close"));
  if (status.ok() && ::rename(tmp.c_str(), path.c_str()) != 0) {
    status = absl::ErrnoToStatus(errno, absl::StrCat(path, ": cannot rename ", tmp, " to it"));
  }
  if (!status.ok()) ::unlink(tmp.c_str());
  return status;
}

// ---- Trace sets: `<prefix>.<rank>.et` and `<prefix>.comm_groups.json`.

constexpr absl::string_view kTraceSuffix = ".et";
constexpr absl::string_view kCommGroupsSuffix = ".comm_groups.json";

std::string RankFile(const std::string& prefix, int rank) { return absl::StrCat(prefix, ".", rank, kTraceSuffix); }

// `<base>.<rank>.et` split into base and rank (a decimal without leading zeros).
std::optional<std::pair<std::string, int>> SplitRankFile(absl::string_view name) {
  if (name.size() <= kTraceSuffix.size() || name.substr(name.size() - kTraceSuffix.size()) != kTraceSuffix) {
    return std::nullopt;
  }
  name.remove_suffix(kTraceSuffix.size());
  const std::size_t dot = name.rfind('.');
  if (dot == absl::string_view::npos || dot == 0) return std::nullopt;
  const absl::string_view digits = name.substr(dot + 1);
  if (digits.empty() || digits.size() > 9 || (digits.size() > 1 && digits[0] == '0')) return std::nullopt;
  int rank = 0;
  for (const char c : digits) {
    if (c < '0' || c > '9') return std::nullopt;
    rank = rank * 10 + (c - '0');
  }
  return std::make_pair(std::string(name.substr(0, dot)), rank);
}

// Every trace set's ranks in `dir`, by base name.
std::map<std::string, std::set<int>> TraceFilesIn(const std::filesystem::path& dir) {
  std::map<std::string, std::set<int>> sets;
  std::error_code ec;
  for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (!it->is_regular_file(ec)) continue;
    if (auto split = SplitRankFile(it->path().filename().string())) sets[split->first].insert(split->second);
  }
  return sets;
}

std::string Describe(const std::map<std::string, std::set<int>>& sets) {
  std::vector<std::string> parts;
  for (const auto& [base, ranks] : sets) {
    parts.push_back(absl::StrCat(base, " (ranks ", absl::StrJoin(ranks, ", "), ")"));
  }
  return absl::StrJoin(parts, "; ");
}

// The prefix of the set `dir_or_prefix` names and its number of ranks, checked contiguous.
absl::StatusOr<std::pair<std::string, int>> FindSet(const std::string& dir_or_prefix) {
  std::error_code ec;
  std::filesystem::path dir, base;
  std::string prefix = dir_or_prefix;
  if (std::filesystem::is_directory(dir_or_prefix, ec)) {
    const auto sets = TraceFilesIn(dir_or_prefix);
    if (sets.empty()) {
      return absl::NotFoundError(absl::StrCat(dir_or_prefix, ": no trace files (<prefix>.<rank>", kTraceSuffix, ")"));
    }
    if (sets.size() > 1) {
      return absl::InvalidArgumentError(absl::StrCat(dir_or_prefix, ": more than one trace set: ", Describe(sets),
                                                     "; name one by its prefix"));
    }
    dir = dir_or_prefix;
    base = sets.begin()->first;
    prefix = (dir / base).string();
  } else {
    const std::filesystem::path p(dir_or_prefix);
    dir = p.parent_path().empty() ? std::filesystem::path(".") : p.parent_path();
    base = p.filename();
  }
  const auto sets = TraceFilesIn(dir);
  const auto found = sets.find(base.string());
  if (found == sets.end() || !found->second.contains(0)) {
    return absl::NotFoundError(absl::StrCat(RankFile(prefix, 0), ": no such file (rank 0 of the trace set ", prefix,
                                            ")"));
  }
  const std::set<int>& ranks = found->second;
  const int count = static_cast<int>(ranks.size());
  if (*ranks.rbegin() != count - 1) {
    int missing = 0;
    while (ranks.contains(missing)) ++missing;
    return absl::InvalidArgumentError(absl::StrCat(prefix, ": ranks must be contiguous from 0: ",
                                                   RankFile(prefix, missing), " is missing, but ",
                                                   RankFile(prefix, *ranks.rbegin()), " exists"));
  }
  return std::make_pair(prefix, count);
}

// ---- The communicator group JSON.

class GroupParser {
 public:
  GroupParser(absl::string_view json, const std::string& file) : json_(json), file_(file) {}

  absl::StatusOr<std::vector<std::pair<std::string, std::vector<int>>>> Parse() {
    std::vector<std::pair<std::string, std::vector<int>>> groups;
    std::set<std::string> seen;
    if (!Expect('{')) return Error("expected '{'");
    if (!Peek('}')) {
      while (true) {
        SkipSpace();
        const std::size_t key_at = pos_;
        auto name = String();
        if (!name.ok()) return name.status();
        if (!seen.insert(*name).second) return ErrorAt(key_at, absl::StrCat("group \"", *name, "\" appears twice"));
        if (!Expect(':')) return Error("expected ':' after a group name");
        auto ranks = Ranks();
        if (!ranks.ok()) return ranks.status();
        groups.emplace_back(*std::move(name), *std::move(ranks));
        if (Expect(',')) continue;
        if (Peek('}')) break;
        return Error("expected ',' or '}'");
      }
    }
    ++pos_;  // the '}' seen above
    SkipSpace();
    if (pos_ != json_.size()) return Error("unexpected text after the object");
    return groups;
  }

 private:
  void SkipSpace() noexcept {
    while (pos_ < json_.size() && (json_[pos_] == ' ' || json_[pos_] == '\t' || json_[pos_] == '\n' ||
                                   json_[pos_] == '\r')) {
      ++pos_;
    }
  }
  // Skips space, then consumes `c` if it is next.
  bool Expect(char c) noexcept {
    SkipSpace();
    if (pos_ < json_.size() && json_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  bool Peek(char c) noexcept {
    SkipSpace();
    return pos_ < json_.size() && json_[pos_] == c;
  }
  absl::Status ErrorAt(std::size_t at, absl::string_view what) const {
    return absl::InvalidArgumentError(
        absl::StrCat(file_, ": not a communicator group file: ", what, " at byte ", at));
  }
  absl::Status Error(absl::string_view what) const {
    return ErrorAt(pos_, pos_ < json_.size() ? what : absl::StrCat(what, " (the text ends)"));
  }

  // A string with the escapes \" \\ \/ (group names need no others).
  absl::StatusOr<std::string> String() {
    if (!Expect('"')) return Error("expected a group name in double quotes");
    std::string out;
    while (pos_ < json_.size() && json_[pos_] != '"') {
      char c = json_[pos_];
      if (static_cast<unsigned char>(c) < 0x20) return Error("a control character in a group name");
      if (c == '\\') {
        ++pos_;
        if (pos_ >= json_.size() || (json_[pos_] != '"' && json_[pos_] != '\\' && json_[pos_] != '/')) {
          return Error("an escape other than \\\" \\\\ \\/ in a group name");
        }
        c = json_[pos_];
      }
      out += c;
      ++pos_;
    }
    if (pos_ >= json_.size()) return Error("a group name without its closing quote");
    ++pos_;
    return out;
  }

  absl::StatusOr<std::vector<int>> Ranks() {
    if (!Expect('[')) return Error("expected '[' before a group's ranks");
    std::vector<int> ranks;
    if (Expect(']')) return ranks;
    while (true) {
      SkipSpace();
      const std::size_t at = pos_;
      std::int64_t v = 0;
      std::size_t digits = 0;
      while (pos_ < json_.size() && json_[pos_] >= '0' && json_[pos_] <= '9') {
        v = v * 10 + (json_[pos_++] - '0');
        if (v > std::numeric_limits<int>::max()) return ErrorAt(at, "a rank above the int range");
        ++digits;
      }
      if (digits == 0) return ErrorAt(at, "expected a rank (a non-negative integer)");
      if (digits > 1 && json_[at] == '0') return ErrorAt(at, "a rank with a leading zero");
      ranks.push_back(static_cast<int>(v));
      if (Expect(',')) continue;
      if (Expect(']')) return ranks;
      return Error("expected ',' or ']' in a group's ranks");
    }
  }

  absl::string_view json_;
  const std::string& file_;
  std::size_t pos_ = 0;
};

std::string QuotedName(const std::string& name) {
  std::string out = "\"";
  for (const char c : name) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  out += '"';
  return out;
}

}  // namespace

absl::StatusOr<Trace> ReadTrace(const std::string& path) {
  auto bytes = ReadFile(path);
  if (!bytes.ok()) return bytes.status();
  return DecodeTrace(*bytes, path);
}

absl::Status WriteTrace(const Trace& trace, const std::string& path) {
  return WriteFileAtomically(path, EncodeTrace(trace));
}

absl::StatusOr<TraceSet> ReadTraceSet(const std::string& dir_or_prefix) {
  auto found = FindSet(dir_or_prefix);
  if (!found.ok()) return found.status();
  const auto& [prefix, count] = *found;
  TraceSet set;
  set.ranks.reserve(static_cast<std::size_t>(count));
  for (int r = 0; r < count; ++r) {
    auto trace = ReadTrace(RankFile(prefix, r));
    if (!trace.ok()) return trace.status();
    set.ranks.push_back(*std::move(trace));
  }
  const std::string groups_file = absl::StrCat(prefix, kCommGroupsSuffix);
  std::error_code ec;
  if (!std::filesystem::exists(groups_file, ec)) return set;
  auto json = ReadFile(groups_file);
  if (!json.ok()) return json.status();
  auto groups = DecodeCommGroups(*json, groups_file);
  if (!groups.ok()) return groups.status();
  for (const auto& [name, ranks] : *groups) {
    for (const int r : ranks) {
      if (r >= count) {
        return absl::InvalidArgumentError(absl::StrCat(groups_file, ": group \"", name, "\" lists rank ", r,
                                                       ", but the set has ", count, " ranks"));
      }
    }
  }
  set.comm_groups = *std::move(groups);
  return set;
}

absl::StatusOr<std::vector<std::string>> WriteTraceSet(const TraceSet& set, const std::string& prefix) {
  const std::filesystem::path p(prefix);
  if (p.filename().empty()) {
    return absl::InvalidArgumentError(absl::StrCat(prefix, ": a trace set's prefix must end in a file name"));
  }
  if (set.ranks.empty()) return absl::InvalidArgumentError(absl::StrCat(prefix, ": a trace set without ranks"));
  std::vector<std::string> written;
  for (std::size_t r = 0; r < set.ranks.size(); ++r) {
    written.push_back(RankFile(prefix, static_cast<int>(r)));
    if (absl::Status s = WriteTrace(set.ranks[r], written.back()); !s.ok()) return s;
  }
  const std::string groups_file = absl::StrCat(prefix, kCommGroupsSuffix);
  if (!set.comm_groups.empty()) {
    written.push_back(groups_file);
    if (absl::Status s = WriteFileAtomically(groups_file, EncodeCommGroups(set.comm_groups)); !s.ok()) return s;
  }
  // Files of an earlier set under the same prefix would join this one when it is read: a
  // rank beyond this set's last, or a group file this set does not have.
  std::vector<std::string> stale;
  const std::filesystem::path dir = p.parent_path().empty() ? std::filesystem::path(".") : p.parent_path();
  const auto sets = TraceFilesIn(dir);
  if (const auto earlier = sets.find(p.filename().string()); earlier != sets.end()) {
    for (const int r : earlier->second) {
      if (r >= static_cast<int>(set.ranks.size())) stale.push_back(RankFile(prefix, r));
    }
  }
  if (set.comm_groups.empty()) stale.push_back(groups_file);
  for (const std::string& file : stale) {
    std::error_code ec;
    std::filesystem::remove(file, ec);
    if (ec) return absl::UnavailableError(absl::StrCat(file, ": cannot remove this earlier file: ", ec.message()));
  }
  return written;
}

std::string EncodeCommGroups(const std::vector<std::pair<std::string, std::vector<int>>>& groups) {
  if (groups.empty()) return "{}\n";
  std::string out = "{\n";
  for (std::size_t i = 0; i < groups.size(); ++i) {
    absl::StrAppend(&out, "  ", QuotedName(groups[i].first), ": [", absl::StrJoin(groups[i].second, ", "), "]",
                    i + 1 < groups.size() ? ",\n" : "\n");
  }
  out += "}\n";
  return out;
}

absl::StatusOr<std::vector<std::pair<std::string, std::vector<int>>>> DecodeCommGroups(
    const std::string& json, const std::string& name_for_errors) {
  return GroupParser(json, name_for_errors).Parse();
}

}  // namespace testbed::chakra
