#include "absl/strings/string_view.h"
#include "config/schema.h"

#include "testbed/component.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace testbed {

void ErrorList::Add(const SourceLoc& where, std::string message) {
  errors_.push_back(absl::StrCat(where.ToString(), ": ", message));
}
void ErrorList::Add(std::string message) { errors_.push_back(std::move(message)); }
void ErrorList::Add(const absl::Status& status) {
  if (!status.ok()) errors_.emplace_back(status.message());
}

absl::Status ErrorList::ToStatus() const {
  if (errors_.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrJoin(errors_, "\n"));
}

namespace {

size_t EditDistance(absl::string_view a, absl::string_view b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::string Describe(const toml::node& node) {
  std::ostringstream out;
  switch (node.type()) {
    case toml::node_type::table: return "a table";
    case toml::node_type::array: return "an array";
    case toml::node_type::string: return absl::StrCat("\"", node.as_string()->get(), "\"");
    default: break;
  }
  node.visit([&](auto&& v) {
    if constexpr (toml::is_value<decltype(v)>) out << v;
  });
  return out.str();
}

absl::Status Expected(const ParamSpec& spec, const toml::node& got) {
  return absl::InvalidArgumentError(absl::StrCat("expected ", spec.DescribeExpected(), ", got ", Describe(got)));
}

absl::Status CheckRange(const ParamSpec& spec, double v, const toml::node& got) {
  if ((spec.min() && v < *spec.min()) || (spec.max() && v > *spec.max()) || !std::isfinite(v)) {
    return Expected(spec, got);
  }
  return absl::OkStatus();
}

absl::StatusOr<double> AsNumber(const toml::node& node) {
  if (auto i = node.value_exact<std::int64_t>()) return static_cast<double>(*i);
  if (auto d = node.value_exact<double>()) return *d;
  return absl::InvalidArgumentError("not a number");
}

}  // namespace

std::string DidYouMean(absl::string_view key, const std::vector<std::string>& candidates) {
  std::string best;
  size_t best_d = std::max<size_t>(2, key.size() / 3) + 1;
  for (const auto& c : candidates) {
    const size_t d = EditDistance(key, c);
    if (d < best_d) {
      best_d = d;
      best = c;
    }
  }
  return best;
}

absl::StatusOr<ParamValue> ConvertValue(const toml::node& node, const ParamSpec& spec) {
  switch (spec.type()) {
    case ParamType::kBool: {
      if (auto b = node.value_exact<bool>()) return ParamValue(*b);
      return Expected(spec, node);
    }
    case ParamType::kInt: {
      auto i = node.value_exact<std::int64_t>();
      if (!i) return Expected(spec, node);
      if (auto s = CheckRange(spec, static_cast<double>(*i), node); !s.ok()) return s;
      return ParamValue(*i);
    }
    case ParamType::kDouble: {
      auto d = AsNumber(node);
      if (!d.ok()) return Expected(spec, node);
      if (auto s = CheckRange(spec, *d, node); !s.ok()) return s;
      return ParamValue(*d);
    }
    case ParamType::kString: {
      auto s = node.value_exact<std::string>();
      if (!s) return Expected(spec, node);
      if (!spec.choices().empty() &&
          std::find(spec.choices().begin(), spec.choices().end(), *s) == spec.choices().end()) {
        return Expected(spec, node);
      }
      return ParamValue(*s);
    }
    case ParamType::kIntList:
    case ParamType::kDoubleList:
    case ParamType::kStringList: {
      const toml::array* arr = node.as_array();
      if (arr == nullptr) return Expected(spec, node);
      std::vector<std::int64_t> ints;
      std::vector<double> doubles;
      std::vector<std::string> strings;
      for (const toml::node& el : *arr) {
        if (spec.type() == ParamType::kIntList) {
          auto i = el.value_exact<std::int64_t>();
          if (!i) return Expected(spec, node);
          if (!CheckRange(spec, static_cast<double>(*i), node).ok()) return Expected(spec, node);
          ints.push_back(*i);
        } else if (spec.type() == ParamType::kDoubleList) {
          auto d = AsNumber(el);
          if (!d.ok() || !CheckRange(spec, *d, node).ok()) return Expected(spec, node);
          doubles.push_back(*d);
        } else {
          auto s = el.value_exact<std::string>();
          if (!s) return Expected(spec, node);
          strings.push_back(*s);
        }
      }
      if (spec.type() == ParamType::kIntList) return ParamValue(std::move(ints));
      if (spec.type() == ParamType::kDoubleList) return ParamValue(std::move(doubles));
      return ParamValue(std::move(strings));
    }
  }
  return Expected(spec, node);
}

ParamSet ResolveParams(const ConfigDoc& doc, const KeyPath& table_path, const std::vector<ParamSpec>& specs,
                       absl::string_view owner, const std::set<std::string>& other_keys, ErrorList& errors) {
  ParamSet out;
  const toml::node* node = table_path.empty() ? &doc.root() : doc.Get(table_path);
  const toml::table* table = node ? node->as_table() : nullptr;
  if (node != nullptr && table == nullptr) {
    errors.Add(doc.Where(table_path), absl::StrCat(owner, ": expected a table"));
    return out;
  }
  std::vector<std::string> known;
  for (const ParamSpec& s : specs) known.push_back(s.name());
  known.insert(known.end(), other_keys.begin(), other_keys.end());
  if (table != nullptr) {
    for (auto&& [k, v] : *table) {
      const std::string key(k.str());
      if (other_keys.count(key)) continue;
      auto spec = std::find_if(specs.begin(), specs.end(), [&](const ParamSpec& s) { return s.name() == key; });
      KeyPath key_path = table_path;
      key_path.push_back(key);
      if (spec == specs.end()) {
        std::string msg = absl::StrCat(owner, ": unknown key '", key, "'");
        const std::string guess = DidYouMean(key, known);
        if (!guess.empty()) absl::StrAppend(&msg, " (did you mean '", guess, "'?)");
        absl::StrAppend(&msg, "; expected one of: ", known.empty() ? "(no keys)" : absl::StrJoin(known, ", "));
        // A component kind written after a [table] header lands in that table in TOML.
        if (KindFromName(key).has_value() && table_path.size() == 1) {
          absl::StrAppend(&msg, ". '", key, "' is a component kind, a key of the file's top level: TOML puts a key after [",
                          table_path[0], "] into that table, so move it above the first [table]");
        }
        errors.Add(doc.Where(key_path), msg);
        continue;
      }
      auto value = ConvertValue(v, *spec);
      if (!value.ok()) {
        errors.Add(doc.Where(key_path), absl::StrCat(owner, ": '", key, "': ", value.status().message()));
        continue;
      }
      out.Set(key, std::move(*value));
    }
  }
  for (const ParamSpec& s : specs) {
    if (out.Has(s.name())) continue;
    if (s.required()) {
      errors.Add(doc.Where(table_path),
                 absl::StrCat(owner, ": missing required key '", s.name(), "' (", s.DescribeExpected(), ")"));
      continue;
    }
    out.Set(s.name(), s.default_value());
  }
  return out;
}

}  // namespace testbed
