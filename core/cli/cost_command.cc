#include "cli/cost_command.h"

#include <algorithm>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "config/cluster_config.h"
#include "testbed/collective.h"
#include "testbed/device_model.h"
#include "testbed/layer_kernels.h"
#include "testbed/memory_model.h"
#include "testbed/model_graph.h"
#include "testbed/status_macros.h"

namespace testbed::cli {
namespace {

// The node a device usually comes in, for the tensor-parallel group's links.
std::string DefaultNode(const std::string& device) {
  if (device == "rtx3090") return "hpwnv";
  if (device == "rtx2080ti") return "lpwnv";
  if (device == "a100-80gb") return "dgx-a100";
  if (device == "h100-sxm" || device == "h200") return "dgx-h100";
  return "";
}

absl::Status Run(Env& env, const CostArgs& a) {
  auto precision = PrecisionFromName(a.precision);
  if (!precision) return absl::InvalidArgumentError(absl::StrCat("--precision ", a.precision, ": unknown precision"));
  // The device and a cluster holding a tensor-parallel group of `tp` of them.
  const std::string node = a.cluster.empty() ? DefaultNode(a.device) : a.cluster;
  if (node.empty()) {
    const std::vector<std::string> devices = env.presets->Names("devices");
    if (std::find(devices.begin(), devices.end(), a.device) == devices.end()) {
      return absl::NotFoundError(absl::StrCat("--device ", a.device, ": no such device preset; available: ",
                                              absl::StrJoin(devices, ", ")));
    }
    return absl::InvalidArgumentError(absl::StrCat("--device ", a.device, ": no cluster preset holds it by default; "
                                                   "pass --cluster <preset> whose nodes hold ", a.device));
  }
  auto doc = ConfigDoc::ParseString(absl::StrCat("[cluster]\npreset = \"", node, "\"\n"), "--cluster");
  if (!doc.ok()) return doc.status();
  ErrorList errors;
  auto one_node = ResolveCluster(*doc, {"cluster"}, *env.presets, errors);
  TESTBED_RETURN_IF_ERROR(errors.ToStatus());
  const int per_node = one_node->node_type_of(0).devices;
  const int nodes = (a.tp + per_node - 1) / per_node;
  doc = ConfigDoc::ParseString(absl::StrCat("[cluster]\npreset = \"", node, "\"\nnodes = ", nodes, "\n"), "--cluster");
  auto cluster = ResolveCluster(*doc, {"cluster"}, *env.presets, errors);
  TESTBED_RETURN_IF_ERROR(errors.ToStatus());
  const DeviceSpec& spec = cluster->spec_of(0);
  if (spec.name != a.device) {
    return absl::InvalidArgumentError(absl::StrCat("--cluster ", node, " holds ", spec.name, ", not --device ",
                                                   a.device, "; pass a cluster preset whose nodes hold it"));
  }

  ModelShape shape;
  shape.name = "layer";
  shape.layers = 1;
  shape.hidden = a.hidden;
  shape.heads = a.heads > 0 ? a.heads : a.hidden / 64;
  shape.ffn_hidden = a.ffn;
  shape.seq_len = a.seq;
  shape.vocab = 50257;  // only the embedding and head use it; they are not costed here
  TESTBED_ASSIGN_OR_RETURN(ModelGraph graph, BuildModelGraph(shape));
  if (shape.heads % a.tp != 0) {
    return absl::InvalidArgumentError(absl::StrCat("--tp ", a.tp, " does not divide the ", shape.heads, " heads"));
  }
  const Layer& attn = graph.layers[1];
  const Layer& mlp = graph.layers[2];

  ComponentDecl dm_decl;
  const ComponentEntry* dm_entry = env.registry->Find(ComponentKind::kDeviceModel, a.device_model);
  if (dm_entry == nullptr) {
    return absl::NotFoundError(absl::StrCat("unknown device_model '", a.device_model, "'; available: ",
                                            env.registry->NamesOf(ComponentKind::kDeviceModel)));
  }
  ParamSet defaults;
  for (const ParamSpec& p : dm_entry->decl.params) defaults.Set(p.name(), p.default_value());
  TESTBED_ASSIGN_OR_RETURN(auto model, env.registry->Create<DeviceModel>(a.device_model, defaults));
  const ComponentEntry* co_entry = env.registry->Find(ComponentKind::kCollective, a.collective);
  if (co_entry == nullptr) {
    return absl::NotFoundError(absl::StrCat("unknown collective '", a.collective, "'; available: ",
                                            env.registry->NamesOf(ComponentKind::kCollective)));
  }
  ParamSet co_defaults;
  for (const ParamSpec& p : co_entry->decl.params) co_defaults.Set(p.name(), p.default_value());
  TESTBED_ASSIGN_OR_RETURN(auto collective, env.registry->Create<Collective>(a.collective, co_defaults));

  auto time = [&](const Layer& l, Phase ph) {
    LayerWork w{&l, ph, a.micro_batch, a.tp, a.sequence_parallel, *precision, 1.0, false};
    return model->LayerTime(w, spec);
  };
  TESTBED_ASSIGN_OR_RETURN(double attn_fwd, time(attn, Phase::kForward));
  TESTBED_ASSIGN_OR_RETURN(double attn_bwd, time(attn, Phase::kBackward));
  TESTBED_ASSIGN_OR_RETURN(double mlp_fwd, time(mlp, Phase::kForward));
  TESTBED_ASSIGN_OR_RETURN(double mlp_bwd, time(mlp, Phase::kBackward));
  // Megatron TP: one all-reduce after each block in forward and one in backward.
  double tp_comm = 0;
  if (a.tp > 1) {
    std::vector<DeviceId> group;
    for (int i = 0; i < a.tp; ++i) group.push_back(i);
    for (const Layer* l : {&attn, &mlp}) {
      for (std::int64_t per_sample : {l->tp_fwd_allreduce_bytes_per_sample, l->tp_bwd_allreduce_bytes_per_sample}) {
        TESTBED_ASSIGN_OR_RETURN(CommPlan plan, collective->PlanCollective(CollectiveOp::kAllReduce, group,
                                                                           per_sample * a.micro_batch, *cluster));
        tp_comm += plan.IsolatedTime(*cluster);
      }
    }
  }
  const double samples = static_cast<double>(a.micro_batch);
  const double memory = ActivationBytes(attn, samples, a.tp, a.sequence_parallel, false) +
                        ActivationBytes(mlp, samples, a.tp, a.sequence_parallel, false);
  const double params = static_cast<double>(attn.params + mlp.params) / a.tp;

  if (a.json) {
    std::printf("{\"attn_fwd_s\": %.9g, \"attn_bwd_s\": %.9g, \"mlp_fwd_s\": %.9g, \"mlp_bwd_s\": %.9g, "
                "\"tp_comm_s\": %.9g, \"memory_bytes\": %.0f}\n",
                attn_fwd, attn_bwd, mlp_fwd, mlp_bwd, tp_comm, memory);
    return absl::OkStatus();
  }
  std::printf("one transformer layer: hidden %lld, heads %lld, ffn %lld, seq %lld, micro-batch %lld, tp %d%s, %s\n",
              static_cast<long long>(a.hidden), static_cast<long long>(shape.heads),
              static_cast<long long>(graph.shape.ffn_hidden), static_cast<long long>(a.seq),
              static_cast<long long>(a.micro_batch), a.tp, a.sequence_parallel ? " (sequence parallel)" : "",
              a.precision.c_str());
  std::printf("device %s (%.1f TFLOP/s %s, %.0f GB/s), device model %s, TP group on %s via %s\n\n", spec.name.c_str(),
              spec.PeakFlops(*precision) / 1e12, a.precision.c_str(), spec.memory_bandwidth_bytes_per_s / 1e9,
              a.device_model.c_str(), cluster->Describe().c_str(), a.collective.c_str());
  std::printf("  %-22s %10.3f ms\n", "attention forward", attn_fwd * 1e3);
  std::printf("  %-22s %10.3f ms\n", "attention backward", attn_bwd * 1e3);
  std::printf("  %-22s %10.3f ms\n", "mlp forward", mlp_fwd * 1e3);
  std::printf("  %-22s %10.3f ms\n", "mlp backward", mlp_bwd * 1e3);
  std::printf("  %-22s %10.3f ms   (4 all-reduces of %.2f MiB)\n", "tensor-parallel comm", tp_comm * 1e3,
              static_cast<double>(attn.tp_fwd_allreduce_bytes_per_sample * a.micro_batch) / 1048576.0);
  std::printf("  %-22s %10.1f MiB  (activations kept for backward, per rank)\n", "memory", memory / 1048576.0);
  std::printf("  %-22s %10.1f MiB  (fp16 weights per rank; x8 with gradients and Adam state)\n", "parameters",
              params * 2 / 1048576.0);
  return absl::OkStatus();
}

}  // namespace

int Cost(Env& env, const CostArgs& args) {
  absl::Status s = Run(env, args);
  if (!s.ok()) {
    std::fprintf(stderr, "error: %s\n", std::string(s.message()).c_str());
    return 1;
  }
  return 0;
}

}  // namespace testbed::cli
