// A component of the loaded plugins made with its declared defaults and some parameters
// overridden: the tests that assemble a run by hand (executor, PipeDream-2BW) make theirs so.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "testbed/registry.h"

namespace testbed::testing {

template <typename T>
absl::StatusOr<std::shared_ptr<T>> MakeComponent(const Registry& registry, const std::string& name,
                                                 const std::map<std::string, ParamValue>& set = {}) {
  const ComponentEntry* e = registry.Find(T::kKind, name);
  if (e == nullptr) return absl::NotFoundError("component " + name + " not loaded");
  ParamSet p;
  for (const ParamSpec& s : e->decl.params) p.Set(s.name(), s.default_value());
  for (const auto& [k, v] : set) p.Set(k, v);
  return registry.Create<T>(name, p);
}

}  // namespace testbed::testing
