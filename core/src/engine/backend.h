// A backend turns one resolved run into a RunOutput: "plan" (planning only), "sim" (the
// discrete-event simulator), "real" (the executor). Backends are part of the core; they
// declare the component kinds they use and any extra TOML sections they read.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "config/run_config.h"
#include "testbed/metrics.h"
#include "testbed/registry.h"

namespace testbed {

struct KindUse {
  ComponentKind kind;
  bool required = true;           // a run without this kind is refused (unless a default exists)
  std::string default_component;  // used when neither the arm nor the file names one
};

struct BackendInfo {
  std::string name;
  std::string doc;
  std::string default_metric;  // main metric when [experiment] metric is not given
  bool needs_model = true;
  bool needs_cluster = true;
  // Keys of the backend's [workload] section that replace the model (a traced job): a run
  // that sets one needs no [model], and may not have one.
  std::vector<std::string> workload_keys;
  std::vector<KindUse> kinds;
  std::map<std::string, std::vector<ParamSpec>> sections;  // extra root sections it reads
};

// Cancellation and progress reporting for long runs.
struct RunControl {
  std::function<bool()> cancelled = [] { return false; };
};

class Backend {
 public:
  virtual ~Backend() = default;
  [[nodiscard]] virtual const BackendInfo& info() const noexcept = 0;
  // Runs one configuration. Components are created from `registry` for this run only.
  [[nodiscard]] virtual absl::StatusOr<RunOutput> Run(const ResolvedRun& run, const Registry& registry,
                                                      const RunControl& control) = 0;
};

// The backends compiled into the core, by name.
[[nodiscard]] const std::map<std::string, std::function<std::unique_ptr<Backend>()>>& BuiltinBackends();
[[nodiscard]] const BackendInfo* FindBackendInfo(const std::string& name);

}  // namespace testbed
