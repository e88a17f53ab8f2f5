#include "engine/backend.h"
#include "engine/plan_backend.h"
#include "exec/real_backend.h"
#include "sim/sim_backend.h"

namespace testbed {

const std::map<std::string, std::function<std::unique_ptr<Backend>()>>& BuiltinBackends() {
  static const std::map<std::string, std::function<std::unique_ptr<Backend>()>> backends = {
      {"plan", [] { return std::make_unique<PlanBackend>(); }},
      {"sim", [] { return std::make_unique<SimBackend>(); }},
      {"real", [] { return std::make_unique<RealBackend>(); }},
  };
  return backends;
}

const BackendInfo* FindBackendInfo(const std::string& name) {
  static const std::map<std::string, const BackendInfo*> infos = [] {
    std::map<std::string, const BackendInfo*> m;
    for (const auto& [n, make] : BuiltinBackends()) m[n] = &make()->info();
    return m;
  }();
  auto it = infos.find(name);
  return it == infos.end() ? nullptr : it->second;
}

}  // namespace testbed
