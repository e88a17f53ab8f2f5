// Loads a communicator plugin from its built library and creates the communicator with its
// declared defaults (and the given overrides), the way the engine does for an experiment.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/plugin_loader.h"
#include "testbed/communicator.h"
#include "testbed/registry.h"

namespace testbed::testing {

struct LoadedCommunicator {
  // Declared in this order so the communicator goes first and the library last.
  std::unique_ptr<Registry> registry;
  std::unique_ptr<PluginLoader> loader;
  std::shared_ptr<Communicator> comm;
};

// Creates communicator `name` from an already loaded registry.
[[nodiscard]] absl::StatusOr<std::shared_ptr<Communicator>> CreateCommunicator(
    const Registry& registry, const std::string& name, const std::map<std::string, ParamValue>& overrides);

[[nodiscard]] absl::StatusOr<std::unique_ptr<LoadedCommunicator>> LoadCommunicator(
    const std::string& library, const std::string& name, const std::map<std::string, ParamValue>& overrides);

// `n` ranks of communicator `name` (library and overrides as for LoadCommunicator) as
// threads of this process. Failures are test failures; `ranks` is then empty.
struct ConnectedWorld {
  std::unique_ptr<LoadedCommunicator> loaded;
  std::vector<std::unique_ptr<CommGroup>> ranks;
};
[[nodiscard]] ConnectedWorld ConnectThreadRanks(const std::string& library, const std::string& name, int n,
                                                const std::map<std::string, ParamValue>& overrides);

}  // namespace testbed::testing
