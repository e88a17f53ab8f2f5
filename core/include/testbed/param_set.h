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
  friend bool operator==(const ParamSet&, const ParamSet&) = default;

 private:
  std::map<std::string, ParamValue> values_;
};

// Reads a component's parameters by name and type, keeping the first failure (a name the
// component never declared, a value of another type) so that a factory reads them all and
// checks once; a misspelt name is an error, never a silent default:
//   ParamReader r(params, "merak");
//   o.tp_chunks = r.Get<std::int64_t>("tp_chunks");
//   TESTBED_RETURN_IF_ERROR(r.status());
class ParamReader {
 public:
  explicit ParamReader(const ParamSet& params, std::string owner = "") : params_(params), owner_(std::move(owner)) {}

  // The value, or T{} after recording the failure.
  template <typename T>
  [[nodiscard]] T Get(const std::string& name) {
    absl::StatusOr<T> v = params_.Get<T>(name);
    if (v.ok()) return *std::move(v);
    if (status_.ok()) {
      status_ = absl::Status(v.status().code(),
                             absl::StrCat(owner_.empty() ? "" : absl::StrCat(owner_, ": "), v.status().message(),
                                          v.status().code() == absl::StatusCode::kNotFound ? " (not declared)" : ""));
    }
    return T{};
  }
  [[nodiscard]] const absl::Status& status() const noexcept { return status_; }
  [[nodiscard]] bool ok() const noexcept { return status_.ok(); }

 private:
  const ParamSet& params_;
  std::string owner_;
  absl::Status status_;
};

}  // namespace testbed
