#include "absl/strings/string_view.h"
#include "config/config_doc.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace testbed {

std::string SourceLoc::ToString() const {
  if (line <= 0) return file;
  return absl::StrCat(file, ":", line, ":", column);
}

std::string PathToString(const KeyPath& path) {
  std::string out;
  for (size_t i = 0; i < path.size(); ++i) {
    if (i) out += '.';
    if (path[i].find('.') != std::string::npos) {
      absl::StrAppend(&out, "\"", path[i], "\"");
    } else {
      out += path[i];
    }
  }
  return out;
}

absl::StatusOr<KeyPath> ParsePath(absl::string_view dotted) {
  KeyPath out;
  std::string cur;
  bool quoted = false;
  for (char c : dotted) {
    if (c == '"') {
      quoted = !quoted;
    } else if (c == '.' && !quoted) {
      out.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  out.push_back(cur);
  if (quoted) return absl::InvalidArgumentError(absl::StrCat("unbalanced quote in key '", dotted, "'"));
  for (const auto& seg : out) {
    if (seg.empty()) return absl::InvalidArgumentError(absl::StrCat("empty segment in key '", dotted, "'"));
  }
  return out;
}

std::string ConfigDoc::Key(const KeyPath& path) { return absl::StrJoin(path, "\x1f"); }

void ConfigDoc::RecordPositions(const toml::node& node, const KeyPath& path) {
  const auto& src = node.source();
  if (src.begin.line > 0) {
    where_[Key(path)] = SourceLoc{file_, static_cast<int>(src.begin.line), static_cast<int>(src.begin.column)};
  }
  if (const toml::table* t = node.as_table()) {
    for (auto&& [k, v] : *t) {
      KeyPath child = path;
      child.emplace_back(k.str());
      RecordPositions(v, child);
    }
  } else if (const toml::array* a = node.as_array()) {
    for (size_t i = 0; i < a->size(); ++i) {
      KeyPath child = path;
      child.push_back(absl::StrCat("[", i, "]"));
      RecordPositions(*a->get(i), child);
    }
  }
}

absl::StatusOr<ConfigDoc> ConfigDoc::ParseString(absl::string_view text, std::string source_name) {
  ConfigDoc doc;
  doc.file_ = std::move(source_name);
  try {
    doc.root_ = toml::parse(std::string_view(text.data(), text.size()), doc.file_);
  } catch (const toml::parse_error& e) {
    const auto& b = e.source().begin;
    return absl::InvalidArgumentError(absl::StrCat(doc.file_, ":", b.line, ":", b.column,
                                                   ": TOML syntax error: ", std::string(e.description())));
  }
  doc.RecordPositions(doc.root_, {});
  return doc;
}

void ConfigDoc::SetOrigin(const SourceLoc& where) {
  if (file_.empty()) file_ = where.file;
  where_[Key({})] = where;
}

void ConfigDoc::ForgetLinePositions() {
  for (auto& [key, loc] : where_) loc.line = loc.column = 0;
}

absl::StatusOr<ConfigDoc> ConfigDoc::ParseFile(const std::filesystem::path& file) {
  // A directory is refused; anything else (a pipe too) is read up to 64 MiB, so that a device
  // such as /dev/zero is not read forever.
  constexpr std::size_t kMaxBytes = std::size_t{64} << 20;
  std::error_code ec;
  if (std::filesystem::is_directory(file, ec)) {
    return absl::InvalidArgumentError(absl::StrCat(file.string(), ": is a directory, not a TOML file"));
  }
  std::ifstream in(file, std::ios::binary);
  if (!in) {
    return absl::NotFoundError(absl::StrCat(file.string(), ": cannot open (", std::strerror(errno), ")"));
  }
  std::string text;
  char chunk[65536];
  while (in && text.size() <= kMaxBytes) {
    in.read(chunk, sizeof(chunk));
    text.append(chunk, static_cast<size_t>(in.gcount()));
  }
  if (text.size() > kMaxBytes) {
    return absl::InvalidArgumentError(absl::StrCat(file.string(), ": more than 64 MiB, too large for a TOML file"));
  }
  return ParseString(text, file.string());
}

const toml::node* ConfigDoc::Get(const KeyPath& path) const {
  const toml::node* cur = &root_;
  for (const auto& seg : path) {
    if (const toml::array* a = cur->as_array()) {
      // "[i]" addresses an array element (the form positions are recorded under).
      if (seg.size() < 3 || seg.front() != '[' || seg.back() != ']') return nullptr;
      const size_t i = std::strtoul(seg.c_str() + 1, nullptr, 10);
      cur = a->get(i);
    } else if (const toml::table* t = cur->as_table()) {
      cur = t->get(seg);
    } else {
      return nullptr;
    }
    if (cur == nullptr) return nullptr;
  }
  return cur;
}

const toml::table* ConfigDoc::GetTable(const KeyPath& path) const {
  const toml::node* n = Get(path);
  return n ? n->as_table() : nullptr;
}

SourceLoc ConfigDoc::Where(const KeyPath& path) const {
  KeyPath p = path;
  // A table made on the way by Set (a dotted key of a sweep, an arm or --set) has no position
  // of its own: the first value written under it is where it came from.
  if (!path.empty() && where_.find(Key(path)) == where_.end()) {
    const std::string prefix = Key(path) + '\x1f';
    if (auto it = where_.lower_bound(prefix); it != where_.end() && it->first.rfind(prefix, 0) == 0) return it->second;
  }
  while (true) {
    if (auto it = where_.find(Key(p)); it != where_.end()) return it->second;
    if (p.empty()) break;
    p.pop_back();
  }
  return SourceLoc{file_, 0, 0};
}

absl::Status ConfigDoc::Set(const KeyPath& path, const toml::node& value, const ConfigDoc& from,
                            const KeyPath& from_path) {
  if (path.empty()) return absl::InvalidArgumentError("cannot replace the whole document");
  toml::table* cur = &root_;
  for (size_t i = 0; i + 1 < path.size(); ++i) {
    toml::node* next = cur->get(path[i]);
    if (next == nullptr) {
      cur->insert_or_assign(path[i], toml::table{});
      next = cur->get(path[i]);
    } else if (next->is_string()) {
      // Component shorthand: `partitioner = "merak"` with `--set partitioner.x=1`.
      toml::table expanded;
      expanded.insert_or_assign("use", *next->as_string());
      cur->insert_or_assign(path[i], std::move(expanded));
      next = cur->get(path[i]);
    }
    if (!next->is_table()) {
      return absl::InvalidArgumentError(absl::StrCat("cannot set '", PathToString(path), "': '",
                                                     PathToString(KeyPath(path.begin(), path.begin() + i + 1)),
                                                     "' is not a table"));
    }
    cur = next->as_table();
  }
  cur->insert_or_assign(path.back(), value);
  // Positions of the new subtree come from `from`.
  const std::string prefix = Key(path);
  for (auto it = where_.lower_bound(prefix); it != where_.end() && it->first.rfind(prefix, 0) == 0;) {
    const bool inside = it->first.size() == prefix.size() || it->first[prefix.size()] == '\x1f';
    it = inside ? where_.erase(it) : std::next(it);
  }
  const std::string from_key = Key(from_path);
  for (auto it = from.where_.lower_bound(from_key); it != from.where_.end(); ++it) {
    if (it->first.rfind(from_key, 0) != 0) break;
    const std::string rest = it->first.substr(from_key.size());
    if (!rest.empty() && rest[0] != '\x1f') continue;
    where_[prefix + rest] = it->second;
  }
  return absl::OkStatus();
}

void ConfigDoc::Erase(const KeyPath& path) {
  if (path.empty()) return;
  KeyPath parent(path.begin(), path.end() - 1);
  const toml::node* p = Get(parent);
  if (p == nullptr || !p->is_table()) return;
  const_cast<toml::table*>(p->as_table())->erase(path.back());
}

ConfigDoc ConfigDoc::Subtree(const ConfigDoc& from, const KeyPath& path) {
  ConfigDoc doc;
  doc.file_ = from.file_;
  if (const toml::table* t = from.GetTable(path)) {
    for (auto&& [k, v] : *t) {
      KeyPath src = path;
      src.emplace_back(k.str());
      (void)doc.Set({std::string(k.str())}, v, from, src);
    }
  }
  if (auto it = from.where_.find(Key(path)); it != from.where_.end()) doc.where_[Key({})] = it->second;
  return doc;
}

std::string ConfigDoc::ToToml() const {
  std::ostringstream out;
  out << toml::toml_formatter(root_);
  return out.str();
}

}  // namespace testbed
