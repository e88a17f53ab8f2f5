// The registry of components. Plugins add components from their register callback; the
// core looks them up by kind and name, validates parameters against their declarations and
// creates instances.
#pragma once

#include "absl/strings/string_view.h"
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "testbed/component.h"
#include "testbed/param_set.h"

namespace testbed {

using ComponentFactory = std::function<absl::StatusOr<std::unique_ptr<Component>>(const ParamSet&)>;

struct ComponentEntry {
  // Keeps the plugin library loaded while this entry or any instance made from it is alive.
  // Declared first so that it is destroyed last, after the factory whose code it maps.
  std::shared_ptr<const void> keep_alive;
  ComponentDecl decl;
  ComponentFactory factory;
  std::string plugin;        // name of the plugin that registered it ("core" for built-ins)
  std::string library_path;  // file it came from (empty for built-ins)
};

class Registry {
 public:
  Registry();
  ~Registry();
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

  // Adds a component implementing interface T (T::kKind). Fails when the name is already
  // taken for that kind, or when a parameter declaration is inconsistent (duplicate name,
  // default outside its range or choices).
  template <typename T>
  absl::Status Add(std::string name, std::string doc, std::vector<ParamSpec> params,
                   std::function<absl::StatusOr<std::unique_ptr<T>>(const ParamSet&)> make) {
    ComponentDecl decl{T::kKind, std::move(name), std::move(doc), std::move(params)};
    return AddEntry(std::move(decl),
                    [make = std::move(make)](const ParamSet& p)
                        -> absl::StatusOr<std::unique_ptr<Component>> {
                      auto made = make(p);
                      if (!made.ok()) return made.status();
                      return std::unique_ptr<Component>(std::move(*made));
                    });
  }

  // Untyped form of Add, for the core and for tests.
  absl::Status AddEntry(ComponentDecl decl, ComponentFactory factory);

  [[nodiscard]] const ComponentEntry* Find(ComponentKind kind, absl::string_view name) const;
  // Every component of a kind, sorted by name.
  [[nodiscard]] std::vector<const ComponentEntry*> List(ComponentKind kind) const;
  [[nodiscard]] std::vector<const ComponentEntry*> ListAll() const;
  // "megatron.uniform, merak, autopipe": for "unknown component" messages.
  [[nodiscard]] std::string NamesOf(ComponentKind kind) const;

  // Creates an instance. `params` must already be resolved against the declaration (see
  // ResolveParams in the config layer). A factory that throws or returns an error gives an
  // error value naming the component.
  [[nodiscard]] absl::StatusOr<std::shared_ptr<Component>> CreateEntry(ComponentKind kind,
                                                                       absl::string_view name,
                                                                       const ParamSet& params) const;
  template <typename T>
  [[nodiscard]] absl::StatusOr<std::shared_ptr<T>> Create(absl::string_view name,
                                                          const ParamSet& params) const {
    auto made = CreateEntry(T::kKind, name, params);
    if (!made.ok()) return made.status();
    // Safe: entries of T::kKind were registered through Add<T> or as T by the core.
    return std::static_pointer_cast<T>(std::move(*made));
  }

  // Used by the plugin loader: components added between Begin and Commit belong to that
  // plugin; Rollback removes them (a plugin whose register fails is not used at all).
  void BeginPlugin(std::string plugin, std::string library_path, std::shared_ptr<const void> keep_alive);
  void CommitPlugin();
  void RollbackPlugin();

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace testbed
