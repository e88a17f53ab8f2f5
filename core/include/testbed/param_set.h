// The resolved parameters of one component instance: every declared parameter present,
// typed as declared, defaults filled in. Handed to a component's factory.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "testbed/param_spec.h"

namespace testbed {

class ParamSet {
 public:
  ParamSet() = default;

  void Set(const std::string& name, ParamValue value) { values_[name] = std::move(value); }
  [[nodiscard]] bool Has(const std::string& name) const { return values_.count(name) != 0; }
  [[nodiscard]] const std::map<std::string, ParamValue>& values() const noexcept { return values_; }

  // Typed access. An unknown name or a type other than the declared one is an error value
  // (a bug in the component, reported as a failed run rather than a crash).
  template <typename T>
  [[nodiscard]] absl::StatusOr<T> Get(const std::string& name) const {
    auto it = values_.find(name);
    if (it == values_.end()) {
      return absl::NotFoundError(absl::StrCat("no parameter named '", name, "'"));
    }
    if (const T* v = std::get_if<T>(&it->second)) return *v;
    return absl::InvalidArgumentError(absl::StrCat("parameter '", name, "' is a ",
                                                   ParamTypeName(TypeOf(it->second))));
  }
  // Convenience for parameters the component itself declared: falls back on misuse.
  template <typename T>
  [[nodiscard]] T GetOr(const std::string& name, T fallback) const {
    auto v = Get<T>(name);
    return v.ok() ? *v : fallback;
  }

  friend bool operator==(const ParamSet&, const ParamSet&) = default;

 private:
  std::map<std::string, ParamValue> values_;
};

}  // namespace testbed
