#include "comm_loader.h"

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "testbed/status_macros.h"

namespace testbed::testing {

absl::StatusOr<std::shared_ptr<Communicator>> CreateCommunicator(
    const Registry& registry, const std::string& name, const std::map<std::string, ParamValue>& overrides) {
  const ComponentEntry* entry = registry.Find(ComponentKind::kCommunicator, name);
  if (entry == nullptr) return absl::NotFoundError(absl::StrCat("no communicator '", name, "' is registered"));
  ParamSet params;
  for (const ParamSpec& spec : entry->decl.params) params.Set(spec.name(), spec.default_value());
  for (const auto& [key, value] : overrides) {
    if (!params.Has(key)) return absl::InvalidArgumentError(absl::StrCat(name, " has no parameter ", key));
    params.Set(key, value);
  }
  return registry.Create<Communicator>(name, params);
}

absl::StatusOr<std::unique_ptr<LoadedCommunicator>> LoadCommunicator(
    const std::string& library, const std::string& name, const std::map<std::string, ParamValue>& overrides) {
  auto loaded = std::make_unique<LoadedCommunicator>();
  loaded->registry = std::make_unique<Registry>();
  loaded->loader = std::make_unique<PluginLoader>(*loaded->registry);
  TESTBED_RETURN_IF_ERROR(loaded->loader->Load(library).status());
  TESTBED_ASSIGN_OR_RETURN(loaded->comm, CreateCommunicator(*loaded->registry, name, overrides));
  return loaded;
}

ConnectedWorld ConnectThreadRanks(const std::string& library, const std::string& name, int n,
                                  const std::map<std::string, ParamValue>& overrides) {
  ConnectedWorld w;
  auto loaded = LoadCommunicator(library, name, overrides);
  EXPECT_TRUE(loaded.ok()) << loaded.status();
  if (!loaded.ok()) return w;
  w.loaded = std::move(*loaded);
  auto ranks = w.loaded->comm->Connect(n);
  EXPECT_TRUE(ranks.ok()) << ranks.status();
  if (ranks.ok()) w.ranks = std::move(*ranks);
  return w;
}

}  // namespace testbed::testing
