// Typed parameter declarations (gem5 SimObject style). A component declares each parameter
// once, with type, default, unit, range and one line of doc; the core validates experiment
// TOML against these declarations and records the resolved values with every result.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace testbed {

enum class ParamType { kBool, kInt, kDouble, kString, kIntList, kDoubleList, kStringList };

// A resolved parameter value. The alternative held always matches the declared ParamType.
using ParamValue = std::variant<bool, std::int64_t, double, std::string, std::vector<std::int64_t>,
                                std::vector<double>, std::vector<std::string>>;

[[nodiscard]] const char* ParamTypeName(ParamType type) noexcept;
[[nodiscard]] ParamType TypeOf(const ParamValue& value) noexcept;
// Renders a value the way it would be written in TOML ("4", "0.5", "\"merak\"", "[1, 2]").
[[nodiscard]] std::string FormatParamValue(const ParamValue& value);

// One declared parameter. Build with the named constructors and chain the setters:
//   ParamSpec::Int("stages", 4).Range(1, 1024).Unit("stages").Doc("pipeline depth")
class ParamSpec {
 public:
  [[nodiscard]] static ParamSpec Bool(std::string name, bool default_value);
  [[nodiscard]] static ParamSpec Int(std::string name, std::int64_t default_value);
  [[nodiscard]] static ParamSpec Double(std::string name, double default_value);
  [[nodiscard]] static ParamSpec String(std::string name, std::string default_value);
  // A string restricted to `choices`; the default must be one of them.
  [[nodiscard]] static ParamSpec Choice(std::string name, std::string default_value,
                                        std::vector<std::string> choices);
  [[nodiscard]] static ParamSpec IntList(std::string name, std::vector<std::int64_t> default_value);
  [[nodiscard]] static ParamSpec DoubleList(std::string name, std::vector<double> default_value);
  [[nodiscard]] static ParamSpec StringList(std::string name, std::vector<std::string> default_value);

  ParamSpec& Unit(std::string unit);
  ParamSpec& Doc(std::string doc);
  // Inclusive bounds for numbers (and for every element of a numeric list).
  ParamSpec& Range(double min, double max);
  ParamSpec& Min(double min);
  // The key must be given; the default is only shown, never used.
  ParamSpec& Required();

  [[nodiscard]] const std::string& name() const noexcept { return name_; }
  [[nodiscard]] ParamType type() const noexcept { return type_; }
  [[nodiscard]] const ParamValue& default_value() const noexcept { return default_; }
  [[nodiscard]] const std::string& unit() const noexcept { return unit_; }
  [[nodiscard]] const std::string& doc() const noexcept { return doc_; }
  [[nodiscard]] const std::optional<double>& min() const noexcept { return min_; }
  [[nodiscard]] const std::optional<double>& max() const noexcept { return max_; }
  [[nodiscard]] const std::vector<std::string>& choices() const noexcept { return choices_; }
  [[nodiscard]] bool required() const noexcept { return required_; }

  // "int in [1, 1024]", "string, one of {none, full, selective}": used in error messages.
  [[nodiscard]] std::string DescribeExpected() const;

 private:
  ParamSpec(std::string name, ParamType type, ParamValue default_value);

  std::string name_;
  ParamType type_;
  ParamValue default_;
  std::string unit_;
  std::string doc_;
  std::optional<double> min_;
  std::optional<double> max_;
  std::vector<std::string> choices_;
  bool required_ = false;
};

}  // namespace testbed
