#include "absl/strings/string_view.h"
#include "testbed/registry.h"

#include <algorithm>
#include <exception>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace testbed {
namespace {

bool InRange(const ParamSpec& spec, double v) {
  return (!spec.min() || v >= *spec.min()) && (!spec.max() || v <= *spec.max());
}

// A declaration whose own default is invalid would make every run fail later, far from
// the cause; refuse it when the plugin registers.
absl::Status CheckDecl(const ComponentDecl& decl) {
  if (decl.name.empty()) return absl::InvalidArgumentError("component with an empty name");
  std::set<std::string> seen;
  for (const ParamSpec& p : decl.params) {
    const std::string where = absl::StrCat(KindName(decl.kind), " '", decl.name, "', parameter '", p.name(), "'");
    if (p.name().empty() || p.name() == "use") {
      return absl::InvalidArgumentError(absl::StrCat(where, ": reserved or empty name"));
    }
    if (!seen.insert(p.name()).second) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": declared twice"));
    }
    if (TypeOf(p.default_value()) != p.type()) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": default is not a ", ParamTypeName(p.type())));
    }
    const ParamValue& d = p.default_value();
    if (const auto* s = std::get_if<std::string>(&d); s && !p.choices().empty() && !p.required()) {
      if (std::find(p.choices().begin(), p.choices().end(), *s) == p.choices().end()) {
        return absl::InvalidArgumentError(absl::StrCat(where, ": default \"", *s, "\" is not one of its choices"));
      }
    }
    double num = 0;
    if (const auto* i = std::get_if<std::int64_t>(&d)) num = static_cast<double>(*i);
    else if (const auto* x = std::get_if<double>(&d)) num = *x;
    if ((std::holds_alternative<std::int64_t>(d) || std::holds_alternative<double>(d)) &&
        !p.required() && !InRange(p, num)) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": default outside its range"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

struct Registry::State {
  // kind -> name -> entry. std::map keeps listings sorted and pointers stable.
  std::map<ComponentKind, std::map<std::string, ComponentEntry, std::less<>>> entries;
  std::string current_plugin = "core";
  std::string current_path;
  std::shared_ptr<const void> current_keep_alive;
  std::vector<std::pair<ComponentKind, std::string>> pending;  // added since BeginPlugin
};

Registry::Registry() : state_(std::make_unique<State>()) {}
Registry::~Registry() = default;

absl::Status Registry::AddEntry(ComponentDecl decl, ComponentFactory factory) {
  if (absl::Status s = CheckDecl(decl); !s.ok()) return s;
  if (!factory) {
    return absl::InvalidArgumentError(absl::StrCat(KindName(decl.kind), " '", decl.name, "' has no factory"));
  }
  auto& by_name = state_->entries[decl.kind];
  if (auto it = by_name.find(decl.name); it != by_name.end()) {
    const ComponentEntry& other = it->second;
    return absl::AlreadyExistsError(absl::StrCat(
        KindName(decl.kind), " '", decl.name, "' is already registered by plugin '", other.plugin, "'",
        other.library_path.empty() ? "" : absl::StrCat(" (", other.library_path, ")")));
  }
  ComponentEntry entry{state_->current_keep_alive, decl, std::move(factory), state_->current_plugin,
                       state_->current_path};
  state_->pending.emplace_back(decl.kind, decl.name);
  by_name.emplace(decl.name, std::move(entry));
  return absl::OkStatus();
}

const ComponentEntry* Registry::Find(ComponentKind kind, absl::string_view name) const {
  auto k = state_->entries.find(kind);
  if (k == state_->entries.end()) return nullptr;
  auto it = k->second.find(name);
  return it == k->second.end() ? nullptr : &it->second;
}

std::vector<const ComponentEntry*> Registry::List(ComponentKind kind) const {
  std::vector<const ComponentEntry*> out;
  auto k = state_->entries.find(kind);
  if (k == state_->entries.end()) return out;
  for (const auto& [name, entry] : k->second) out.push_back(&entry);
  return out;
}

std::vector<const ComponentEntry*> Registry::ListAll() const {
  std::vector<const ComponentEntry*> out;
  for (ComponentKind kind : kAllComponentKinds) {
    auto part = List(kind);
    out.insert(out.end(), part.begin(), part.end());
  }
  return out;
}

std::string Registry::NamesOf(ComponentKind kind) const {
  std::vector<std::string> names;
  for (const ComponentEntry* e : List(kind)) names.push_back(e->decl.name);
  return names.empty() ? std::string("(none loaded)") : absl::StrJoin(names, ", ");
}

absl::StatusOr<std::shared_ptr<Component>> Registry::CreateEntry(ComponentKind kind, absl::string_view name,
                                                                 const ParamSet& params) const {
  const ComponentEntry* entry = Find(kind, name);
  if (entry == nullptr) {
    return absl::NotFoundError(absl::StrCat("unknown ", KindName(kind), " '", std::string(name),
                                            "'; available: ", NamesOf(kind)));
  }
  const std::string who = absl::StrCat(KindName(kind), " '", std::string(name), "' (plugin ", entry->plugin, ")");
  absl::StatusOr<std::unique_ptr<Component>> made;
  try {
    made = entry->factory(params);
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat(who, " threw while being created: ", e.what()));
  } catch (...) {
    return absl::InternalError(absl::StrCat(who, " threw a non-standard exception while being created"));
  }
  if (!made.ok()) {
    return absl::Status(made.status().code(), absl::StrCat(who, ": ", made.status().message()));
  }
  if (*made == nullptr) return absl::InternalError(absl::StrCat(who, " returned no object"));
  // The deleter holds the library, so the plugin's code stays mapped until the object's
  // destructor (which lives in the plugin) has run.
  std::shared_ptr<const void> keep = entry->keep_alive;
  Component* raw = made->release();
  return std::shared_ptr<Component>(raw, [keep](Component* c) { delete c; });
}

void Registry::BeginPlugin(std::string plugin, std::string library_path, std::shared_ptr<const void> keep_alive) {
  state_->current_plugin = std::move(plugin);
  state_->current_path = std::move(library_path);
  state_->current_keep_alive = std::move(keep_alive);
  state_->pending.clear();
}

void Registry::CommitPlugin() {
  state_->pending.clear();
  state_->current_plugin = "core";
  state_->current_path.clear();
  state_->current_keep_alive.reset();
}

void Registry::RollbackPlugin() {
  for (const auto& [kind, name] : state_->pending) {
    auto& by_name = state_->entries[kind];
    if (auto it = by_name.find(name); it != by_name.end()) by_name.erase(it);
  }
  CommitPlugin();
}

}  // namespace testbed
