#include "testbed/param_spec.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace testbed {

const char* ParamTypeName(ParamType type) noexcept {
  switch (type) {
    case ParamType::kBool: return "bool";
    case ParamType::kInt: return "int";
    case ParamType::kDouble: return "float";
    case ParamType::kString: return "string";
    case ParamType::kIntList: return "list of int";
    case ParamType::kDoubleList: return "list of float";
    case ParamType::kStringList: return "list of string";
  }
  return "?";
}

ParamType TypeOf(const ParamValue& value) noexcept {
  return static_cast<ParamType>(value.index());
}

namespace {
std::string FormatDouble(double v) {
  if (std::isfinite(v) && v == std::floor(v) && std::fabs(v) < 1e15) return absl::StrFormat("%.1f", v);
  return absl::StrFormat("%.6g", v);
}
std::string Quote(const std::string& s) { return absl::StrCat("\"", s, "\""); }
}  // namespace

std::string FormatParamValue(const ParamValue& value) {
  struct Visitor {
    std::string operator()(bool v) const { return v ? "true" : "false"; }
    std::string operator()(std::int64_t v) const { return absl::StrCat(v); }
    std::string operator()(double v) const { return FormatDouble(v); }
    std::string operator()(const std::string& v) const { return Quote(v); }
    std::string operator()(const std::vector<std::int64_t>& v) const {
      return absl::StrCat("[", absl::StrJoin(v, ", "), "]");
    }
    std::string operator()(const std::vector<double>& v) const {
      return absl::StrCat("[", absl::StrJoin(v, ", ", [](std::string* out, double d) {
                            out->append(FormatDouble(d));
                          }), "]");
    }
    std::string operator()(const std::vector<std::string>& v) const {
      return absl::StrCat("[", absl::StrJoin(v, ", ", [](std::string* out, const std::string& s) {
                            out->append(Quote(s));
                          }), "]");
    }
  };
  return std::visit(Visitor{}, value);
}

ParamSpec::ParamSpec(std::string name, ParamType type, ParamValue default_value)
    : name_(std::move(name)), type_(type), default_(std::move(default_value)) {}

ParamSpec ParamSpec::Bool(std::string name, bool v) { return {std::move(name), ParamType::kBool, v}; }
ParamSpec ParamSpec::Int(std::string name, std::int64_t v) { return {std::move(name), ParamType::kInt, v}; }
ParamSpec ParamSpec::Double(std::string name, double v) { return {std::move(name), ParamType::kDouble, v}; }
ParamSpec ParamSpec::String(std::string name, std::string v) {
  return {std::move(name), ParamType::kString, std::move(v)};
}
ParamSpec ParamSpec::Choice(std::string name, std::string v, std::vector<std::string> choices) {
  ParamSpec spec(std::move(name), ParamType::kString, std::move(v));
  spec.choices_ = std::move(choices);
  return spec;
}
ParamSpec ParamSpec::IntList(std::string name, std::vector<std::int64_t> v) {
  return {std::move(name), ParamType::kIntList, std::move(v)};
}
ParamSpec ParamSpec::DoubleList(std::string name, std::vector<double> v) {
  return {std::move(name), ParamType::kDoubleList, std::move(v)};
}
ParamSpec ParamSpec::StringList(std::string name, std::vector<std::string> v) {
  return {std::move(name), ParamType::kStringList, std::move(v)};
}

ParamSpec& ParamSpec::Unit(std::string unit) { unit_ = std::move(unit); return *this; }
ParamSpec& ParamSpec::Doc(std::string doc) { doc_ = std::move(doc); return *this; }
ParamSpec& ParamSpec::Range(double min, double max) { min_ = min; max_ = max; return *this; }
ParamSpec& ParamSpec::Min(double min) { min_ = min; return *this; }
ParamSpec& ParamSpec::Required() { required_ = true; return *this; }

std::string ParamSpec::DescribeExpected() const {
  std::string out = ParamTypeName(type_);
  if (!choices_.empty()) {
    absl::StrAppend(&out, ", one of {", absl::StrJoin(choices_, ", "), "}");
  }
  // Bounds of an int read as integers ("in [1, 1048576]", not "[1.0, 1048576.0]").
  auto bound = [&](double v) {
    return type_ == ParamType::kInt && std::abs(v) < 9e15 ? absl::StrCat(static_cast<std::int64_t>(v)) : FormatDouble(v);
  };
  if (min_ && max_) {
    absl::StrAppend(&out, " in [", bound(*min_), ", ", bound(*max_), "]");
  } else if (min_) {
    absl::StrAppend(&out, " >= ", bound(*min_));
  } else if (max_) {
    absl::StrAppend(&out, " <= ", bound(*max_));
  }
  if (!unit_.empty()) absl::StrAppend(&out, " (", unit_, ")");
  return out;
}

}  // namespace testbed
