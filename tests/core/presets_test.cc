// Every preset in configs/ loads through the real resolution code, and its figures hold:
// device peaks from the vendors' papers, routes through the cluster topologies, and the
// model graphs' parameter counts, FLOPs and activation memory against closed forms.
#include <cmath>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "config/cluster_config.h"
#include "config/model_config.h"
#include "config/preset_library.h"
#include "test_support.h"

namespace testbed {
namespace {

using ::testing::HasSubstr;

const PresetLibrary& Library() {
  static const PresetLibrary lib({std::filesystem::path(TESTBED_TEST_CONFIG_DIR)});
  return lib;
}

absl::StatusOr<DeviceSpec> Device(const std::string& name) {
  auto doc = ConfigDoc::ParseString(absl::StrCat("device = \"", name, "\"\n"), "test");
  if (!doc.ok()) return doc.status();
  ErrorList errors;
  DeviceSpec spec = ResolveDevice(*doc, {"device"}, Library(), errors);
  if (!errors.empty()) return errors.ToStatus();
  return spec;
}

absl::StatusOr<std::shared_ptr<const Cluster>> ClusterOf(const std::string& toml) {
  auto doc = ConfigDoc::ParseString(toml, "test");
  if (!doc.ok()) return doc.status();
  ErrorList errors;
  auto cluster = ResolveCluster(*doc, {"cluster"}, Library(), errors);
  if (!errors.empty()) return errors.ToStatus();
  return cluster;
}

absl::StatusOr<std::shared_ptr<const Cluster>> ClusterPreset(const std::string& name, int nodes = 0) {
  std::string toml = absl::StrCat("[cluster]\npreset = \"", name, "\"\n");
  if (nodes > 0) absl::StrAppend(&toml, "nodes = ", nodes, "\n");
  return ClusterOf(toml);
}

absl::StatusOr<std::shared_ptr<const ModelGraph>> ModelPreset(const std::string& name) {
  auto doc = ConfigDoc::ParseString(absl::StrCat("[model]\npreset = \"", name, "\"\n"), "test");
  if (!doc.ok()) return doc.status();
  ErrorList errors;
  auto model = ResolveModel(*doc, {"model"}, Library(), errors);
  if (!errors.empty()) return errors.ToStatus();
  return model;
}

std::vector<std::string> LinkNames(const Cluster& c, DeviceId a, DeviceId b) {
  std::vector<std::string> out;
  for (LinkId l : c.Route(a, b)) out.push_back(c.links()[static_cast<size_t>(l)].name);
  return out;
}

constexpr double kGiB = 1073741824.0;

// ---- devices ----

TEST(PresetsTest, EveryDeviceLoads) {
  const auto names = Library().Names("devices");
  ASSERT_GE(names.size(), 7u);
  for (const std::string& name : names) {
    auto d = Device(name);
    ASSERT_TRUE(d.ok()) << name << ": " << d.status();
    EXPECT_EQ(d->name, name);
    EXPECT_GT(d->PeakFlops(Precision::kFp32), 0) << name;
    EXPECT_GT(d->memory_bytes, 0) << name;
    EXPECT_GT(d->memory_bandwidth_bytes_per_s, 0) << name;
    EXPECT_FALSE(d->doc.empty()) << name;
    // Tensor-core fp16 is never slower than fp32 on these parts.
    EXPECT_GE(d->PeakFlops(Precision::kFp16), d->PeakFlops(Precision::kFp32)) << name;
  }
}

TEST(PresetsTest, PublishedDeviceFigures) {
  auto rtx = Device("rtx3090");
  ASSERT_TRUE(rtx.ok()) << rtx.status();
  EXPECT_DOUBLE_EQ(rtx->PeakFlops(Precision::kFp16), 71e12);  // GA102 whitepaper, FP32 accumulate
  EXPECT_DOUBLE_EQ(rtx->PeakFlops(Precision::kFp32), 35.6e12);
  EXPECT_EQ(rtx->memory_bytes, 24LL * 1024 * 1024 * 1024);
  EXPECT_DOUBLE_EQ(rtx->memory_bandwidth_bytes_per_s, 936.2e9);
  EXPECT_EQ(rtx->PeakFlops(Precision::kFp8), 0.0);  // Ampere has no FP8

  auto a100 = Device("a100-80gb");
  ASSERT_TRUE(a100.ok());
  EXPECT_DOUBLE_EQ(a100->PeakFlops(Precision::kFp16), 312e12);
  EXPECT_DOUBLE_EQ(a100->PeakFlops(Precision::kTf32), 156e12);
  EXPECT_DOUBLE_EQ(a100->PeakFlops(Precision::kFp32), 19.5e12);
  EXPECT_EQ(a100->memory_bytes, 80LL * 1024 * 1024 * 1024);

  auto a100_40 = Device("a100-40gb");
  ASSERT_TRUE(a100_40.ok());
  EXPECT_EQ(a100_40->memory_bytes, 40LL * 1024 * 1024 * 1024);

  auto h100 = Device("h100-sxm");
  ASSERT_TRUE(h100.ok());
  EXPECT_NEAR(h100->PeakFlops(Precision::kFp16), 989.4e12, 1e9);  // dense, half the sparse 1979
  EXPECT_NEAR(h100->PeakFlops(Precision::kFp8), 2 * h100->PeakFlops(Precision::kFp16), 1e11);
}

TEST(PresetsTest, UnknownDeviceListsTheAvailable) {
  auto d = Device("rtx9090");
  ASSERT_FALSE(d.ok());
  EXPECT_THAT(std::string(d.status().message()), HasSubstr("no devices preset named 'rtx9090'; available: "));
  EXPECT_THAT(std::string(d.status().message()), HasSubstr("rtx3090"));
}

TEST(PresetsTest, PresetNamesCannotEscapeTheirFolder) {
  EXPECT_FALSE(Library().Load("devices", "../clusters/hpwnv").ok());
  EXPECT_FALSE(Library().Load("devices", "").ok());
}

// ---- clusters ----

TEST(PresetsTest, EveryClusterLoads) {
  const auto names = Library().Names("clusters");
  ASSERT_GE(names.size(), 14u);
  for (const std::string& name : names) {
    auto c = ClusterPreset(name);
    ASSERT_TRUE(c.ok()) << name << ": " << c.status();
    ASSERT_NE(*c, nullptr);
    EXPECT_GT((*c)->num_devices(), 0) << name;
    // Every pair of devices has a route, and inter-node routes leave through a NIC.
    const Cluster& cl = **c;
    for (DeviceId b = 1; b < cl.num_devices(); ++b) {
      EXPECT_FALSE(cl.Route(0, b).empty()) << name << " 0->" << b;
      EXPECT_GT(cl.PathBandwidth(0, b), 0) << name;
    }
  }
}

TEST(PresetsTest, ClusterSizes) {
  struct Case {
    const char* name;
    int devices, nodes;
  };
  for (const Case& c : {Case{"hpwnv", 4, 1}, Case{"hpwnv-8", 8, 2}, Case{"hpwnv-64", 64, 16}, Case{"rtx3090-64", 64, 16},
                        Case{"oases-pcie-32", 32, 8}, Case{"dgx-a100", 8, 1}}) {
    auto cl = ClusterPreset(c.name);
    ASSERT_TRUE(cl.ok()) << c.name << ": " << cl.status();
    EXPECT_EQ((*cl)->num_devices(), c.devices) << c.name;
    EXPECT_EQ((*cl)->num_nodes(), c.nodes) << c.name;
  }
  auto dgx16 = ClusterPreset("dgx-a100", 16);  // a node preset composes into a cluster
  ASSERT_TRUE(dgx16.ok()) << dgx16.status();
  EXPECT_EQ((*dgx16)->num_devices(), 128);
  EXPECT_DOUBLE_EQ((*dgx16)->spec_of(127).PeakFlops(Precision::kFp16), 312e12);
}

TEST(PresetsTest, HpwnvCrossSocketRouteCrossesTheCpuInterconnect) {
  auto cl = ClusterPreset("hpwnv");
  ASSERT_TRUE(cl.ok()) << cl.status();
  const Cluster& c = **cl;
  // GPU0 sits on socket 0, GPU2 on socket 1: PCIe up, UPI across, PCIe down.
  EXPECT_EQ(LinkNames(c, 0, 2), (std::vector<std::string>{"n0.gpu0>cpu0", "n0.cpu0>cpu1", "n0.cpu1>gpu2"}));
  const auto route = c.Route(0, 2);
  EXPECT_EQ(c.links()[static_cast<size_t>(route[1])].spec.kind, LinkKind::kCpuInterconnect);
  EXPECT_DOUBLE_EQ(c.PathBandwidth(0, 2), 15.75e9);            // PCIe 3.0 x16 is the narrowest
  EXPECT_NEAR(c.PathLatency(0, 2), (1.0 + 0.5 + 1.0) * 1e-6, 1e-15);
  // GPU0 and GPU1 share socket 0: two PCIe hops, no UPI.
  EXPECT_EQ(LinkNames(c, 0, 1), (std::vector<std::string>{"n0.gpu0>cpu0", "n0.cpu0>gpu1"}));
  EXPECT_EQ(c.spec_of(3).name, "rtx3090");
  EXPECT_TRUE(c.Route(2, 2).empty());
}

TEST(PresetsTest, HpnvPairsAreOneNvlinkHop) {
  auto cl = ClusterPreset("hpnv");
  ASSERT_TRUE(cl.ok()) << cl.status();
  const Cluster& c = **cl;
  const auto route = c.Route(0, 1);
  ASSERT_EQ(route.size(), 1u);
  const Link& l = c.links()[static_cast<size_t>(route[0])];
  EXPECT_EQ(l.spec.kind, LinkKind::kNvlink);
  EXPECT_EQ(l.name, "n0.gpu0>gpu1");
  EXPECT_DOUBLE_EQ(c.PathBandwidth(0, 1), 56.25e9);  // 4 links x 14.0625 GB/s
  EXPECT_EQ(c.Route(3, 2).size(), 1u);
  // No bridge between the pairs: 0 -> 2 still goes through the sockets.
  EXPECT_EQ(LinkNames(c, 0, 2), (std::vector<std::string>{"n0.gpu0>cpu0", "n0.cpu0>cpu1", "n0.cpu1>gpu2"}));
}

TEST(PresetsTest, InterNodeRoutesCrossTheNicLinks) {
  auto cl = ClusterPreset("hpwnv-8");
  ASSERT_TRUE(cl.ok()) << cl.status();
  const Cluster& c = **cl;
  EXPECT_FALSE(c.SameNode(0, 4));
  EXPECT_EQ(LinkNames(c, 0, 4), (std::vector<std::string>{"n0.gpu0>cpu0", "n0.cpu0>nic0", "n0.nic0>fabric",
                                                          "fabric>n1.nic0", "n1.nic0>cpu0", "n1.cpu0>gpu0"}));
  // GPU2 is on the far socket from the NIC: UPI on the way out.
  EXPECT_EQ(LinkNames(c, 2, 7), (std::vector<std::string>{"n0.gpu2>cpu1", "n0.cpu1>cpu0", "n0.cpu0>nic0",
                                                          "n0.nic0>fabric", "fabric>n1.nic0", "n1.nic0>cpu0",
                                                          "n1.cpu0>cpu1", "n1.cpu1>gpu3"}));
  EXPECT_DOUBLE_EQ(c.PathBandwidth(0, 4), 12.5e9);  // EDR InfiniBand, 100 Gb/s
  for (LinkId l : c.Route(0, 4)) {
    const Link& link = c.links()[static_cast<size_t>(l)];
    if (link.name.find("fabric") != std::string::npos) {
      EXPECT_EQ(link.spec.kind, LinkKind::kInfiniband);
    }
  }
}

TEST(PresetsTest, DgxA100GpuIUsesNicI) {
  auto cl = ClusterPreset("dgx-a100", 2);
  ASSERT_TRUE(cl.ok()) << cl.status();
  const Cluster& c = **cl;
  ASSERT_EQ(c.num_devices(), 16);
  for (int i = 0; i < 8; ++i) {
    const auto names = LinkNames(c, i, 8 + i);
    const std::string up = absl::StrCat("n0.nic", i, ">fabric"), down = absl::StrCat("fabric>n1.nic", i);
    EXPECT_NE(std::find(names.begin(), names.end(), up), names.end()) << "GPU " << i;
    EXPECT_NE(std::find(names.begin(), names.end(), down), names.end()) << "GPU " << i;
    // Through its own PCIe switch: GPU i shares switch i/2 with NIC i.
    EXPECT_EQ(names.front(), absl::StrCat("n0.gpu", i, ">pcisw", i / 2));
    EXPECT_EQ(names.size(), 6u);
    EXPECT_DOUBLE_EQ(c.PathBandwidth(i, 8 + i), 25e9);  // HDR 200 Gb/s
  }
  // Inside a node, through the NVSwitch.
  EXPECT_EQ(LinkNames(c, 0, 5), (std::vector<std::string>{"n0.gpu0>nvswitch", "n0.nvswitch>gpu5"}));
  EXPECT_DOUBLE_EQ(c.PathBandwidth(0, 5), 300e9);
}

TEST(PresetsTest, HeterogeneousGroupsAndInlineOverrides) {
  auto cl = ClusterOf(
      "[cluster]\nname = \"mixed\"\ngroups = [{ node = \"hpwnv\", nodes = 2 }, { node = \"hpnv\", nodes = 1 }]\n");
  ASSERT_TRUE(cl.ok()) << cl.status();
  EXPECT_EQ((*cl)->num_devices(), 12);
  EXPECT_EQ((*cl)->num_nodes(), 3);
  EXPECT_EQ((*cl)->name(), "mixed");
  // Node 2 is an hpnv: its GPU pair has NVLink; node 0 is an hpwnv: it does not.
  EXPECT_EQ((*cl)->Route(8, 9).size(), 1u);
  EXPECT_EQ((*cl)->Route(0, 1).size(), 2u);

  auto bigger = ClusterOf("[cluster]\npreset = \"hpwnv-8\"\nnodes = 3\n");
  ASSERT_TRUE(bigger.ok()) << bigger.status();
  EXPECT_EQ((*bigger)->num_devices(), 12);

  // A preset node with a key overridden: HPWNV nodes on 1 Gb/s Ethernet instead of 10.
  auto slow = ClusterOf("[cluster]\nnodes = 2\nnode = { preset = \"hpwnv-eth\", nic_link = \"gbe\" }\n");
  auto fast = ClusterOf("[cluster]\npreset = \"hpwnv-eth\"\nnodes = 2\n");
  ASSERT_TRUE(slow.ok()) << slow.status();
  ASSERT_TRUE(fast.ok()) << fast.status();
  double slowest = 1e30, fastest = 1e30;
  for (LinkId l : (*slow)->Route(0, 4)) slowest = std::min(slowest, (*slow)->links()[static_cast<size_t>(l)].spec.bandwidth_bytes_per_s);
  for (LinkId l : (*fast)->Route(0, 4)) fastest = std::min(fastest, (*fast)->links()[static_cast<size_t>(l)].spec.bandwidth_bytes_per_s);
  EXPECT_DOUBLE_EQ(slowest, 0.125e9);
  EXPECT_DOUBLE_EQ(fastest, 1.25e9);
}

TEST(PresetsTest, ClusterErrorsNameTheProblem) {
  auto unknown = ClusterOf("[cluster]\npreset = \"nosuch\"\n");
  ASSERT_FALSE(unknown.ok());
  EXPECT_THAT(std::string(unknown.status().message()), HasSubstr("test:2:10: no clusters preset named 'nosuch'"));
  auto bad_nodes = ClusterOf("[cluster]\npreset = \"hpwnv\"\nnodes = 0\n");
  ASSERT_FALSE(bad_nodes.ok());
  EXPECT_THAT(std::string(bad_nodes.status().message()), HasSubstr("test:3:9: [cluster]: 'nodes': expected int in [1, 16777216]"));
}

// ---- models ----

// Parameters of a dense GPT per the builder's layers (check core/src/model_graph.cc):
// embedding Vh + sh; per block attention 4h² + 4h (QKV and output weights and biases) + 2h
// (LayerNorm), MLP 2hf + f + h + 2h; final LayerNorm 2h; the head shares the embedding.
// With f = 4h: 12Lh² + 13Lh + Vh + sh + 2h.
double DenseParams(double L, double h, double s, double V) {
  return 12 * L * h * h + 13 * L * h + V * h + s * h + 2 * h;
}

// Narayanan et al. 2021 (Megatron-LM, SC'21), eq. (3) counts 96Bslh²(1 + s/6h + V/16lh) FLOPs
// per iteration with activation recomputation, i.e. four passes of the forward cost
// (forward, recomputed forward, backward = 2 forwards). Per sample and without
// recomputation that is three passes: 72slh²(1 + s/(6h) + V/(12lh)); the forward alone is
// a third of it: 24slh² + 4s²lh + 2shV.
double TrainFlops(double L, double h, double s, double V) {
  return 72 * s * L * h * h * (1 + s / (6 * h) + V / (12 * L * h));
}

TEST(PresetsTest, EveryModelLoads) {
  const auto names = Library().Names("models");
  ASSERT_GE(names.size(), 21u);
  for (const std::string& name : names) {
    auto m = ModelPreset(name);
    ASSERT_TRUE(m.ok()) << name << ": " << m.status();
    const ModelGraph& g = **m;
    EXPECT_EQ(g.shape.name, name);
    // embedding + 2 per block + head (an LSTM layer per block; GNMT's attention in its first
    // decoder block; a Transformer decoder block of 3: tests/sim/seq_models_test.cc)
    const std::string& f = g.shape.family;
    const std::int64_t L = g.shape.layers, D = g.shape.decoder_layers;
    const std::int64_t expected = f == "lstm" ? L + 2 : f == "gnmt" ? L + D + 3 : 2 * L + 3 * D + 2;
    EXPECT_EQ(g.layers.size(), static_cast<size_t>(expected)) << name;
    EXPECT_EQ(g.layers.front().kind, LayerKind::kEmbedding);
    EXPECT_EQ(g.layers.back().kind, LayerKind::kHead);
    if (f != "lstm" && f != "gnmt") EXPECT_EQ(g.shape.hidden % g.shape.heads, 0) << name;
  }
}

TEST(PresetsTest, DenseModelsMatchClosedForms) {
  int checked = 0;
  for (const std::string& name : Library().Names("models")) {
    auto m = ModelPreset(name);
    ASSERT_TRUE(m.ok()) << name;
    const ModelGraph& g = **m;
    // The classic GPT / BERT block only (no MoE, GQA, SwiGLU, FlashAttention or rotary
    // positions: tests/sim/llm_features_test.cc has those).
    if ((g.shape.family != "gpt" && g.shape.family != "bert") || g.shape.experts > 0 ||
        g.shape.kv_heads != g.shape.heads || g.shape.ffn != "gelu" || g.shape.attention != "standard" ||
        g.shape.positions != "learned") {
      continue;
    }
    const double L = g.shape.layers, h = g.shape.hidden, s = g.shape.seq_len, V = g.shape.vocab;
    EXPECT_EQ(g.shape.ffn_hidden, g.shape.hidden * 4) << name;
    // BERT's masked-LM head adds a transform before the logits: an h x h dense layer with
    // bias and a LayerNorm (h² + 3h parameters, 2sh² forward FLOPs per sample).
    const bool bert = g.shape.family == "bert";
    const double params = DenseParams(L, h, s, V) + (bert ? h * h + 3 * h : 0) + (g.shape.tied_embeddings ? 0 : V * h);
    const double train = TrainFlops(L, h, s, V) + (bert ? 3 * 2 * s * h * h : 0);
    EXPECT_EQ(static_cast<double>(g.TotalParams()), params) << name;
    EXPECT_NEAR(g.TrainFlopsPerSample() / train, 1.0, 1e-12) << name;
    EXPECT_NEAR(g.FwdFlopsPerSample() / (train / 3), 1.0, 1e-12) << name;
    EXPECT_EQ(g.layers[1].causal, !bert) << name;
    // Korthikanti et al. 2022: a block stores sh(34 + 5as/h) bytes of activations per sample.
    const double a = g.shape.heads;
    const double block = static_cast<double>(g.layers[1].activation_bytes_per_sample +
                                             g.layers[2].activation_bytes_per_sample);
    EXPECT_EQ(block, 34 * s * h + 5 * a * s * s) << name;  // = sh(34 + 5as/h)
    ++checked;
  }
  EXPECT_GE(checked, 16);
}

// Llama 3 (Llama Team 2024): about 8.03 B, 70.6 B and 405.9 B parameters; ours counts the
// biases and LayerNorm vectors of our layers too (a few per layer).
TEST(PresetsTest, Llama3PresetsHaveTheirPublishedSizes) {
  for (auto [name, published] : {std::pair{"llama3-8b", 8.03e9}, {"llama3-70b", 70.6e9}, {"llama3-405b", 405.9e9}}) {
    auto m = ModelPreset(name);
    ASSERT_TRUE(m.ok()) << name << ": " << m.status();
    const ModelGraph& g = **m;
    EXPECT_NEAR(static_cast<double>(g.TotalParams()) / published, 1.0, 0.003) << name << ": " << g.TotalParams();
    EXPECT_EQ(g.shape.kv_heads, 8) << name;
    EXPECT_EQ(g.layers[1].activation_score_bytes_per_sample, 0) << name;  // FlashAttention
  }
}

TEST(PresetsTest, MixtralHasItsPublishedTotalAndActiveParameters) {
  auto m = ModelPreset("mixtral-8x7b");
  ASSERT_TRUE(m.ok()) << m.status();
  const ModelGraph& g = **m;
  // Jiang et al. 2024: 46.7 B parameters, 12.9 B active (two of eight experts a token).
  double inactive = 0;
  int moe_layers = 0;
  for (const Layer& l : g.layers) {
    if (l.kind != LayerKind::kMoe) continue;
    ++moe_layers;
    EXPECT_TRUE(l.swiglu);
    EXPECT_EQ(l.experts, 8);
    EXPECT_EQ(l.top_k, 2);
    // An expert: gate and up (h x f each), down (f x h), with biases.
    EXPECT_EQ(l.expert_params, 3 * 4096LL * 14336 + 2 * 14336 + 4096);
    // Forward FLOPs per sequence: the router's 2 s h E, then 2 experts of 3 matrices each.
    const double s = 32768, h = 4096, f = 14336;
    EXPECT_DOUBLE_EQ(l.fwd_flops_per_sample, 2 * s * h * 8 + 2 * 6 * s * h * f);
    inactive += static_cast<double>((l.experts - l.top_k) * l.expert_params);
  }
  EXPECT_EQ(moe_layers, 32);
  const double total = static_cast<double>(g.TotalParams());
  EXPECT_NEAR(total / 46.7e9, 1.0, 0.003) << total;
  EXPECT_NEAR((total - inactive) / 12.9e9, 1.0, 0.005) << total - inactive;
}

TEST(PresetsTest, BertLargeHasItsPublishedSize) {
  // BERT-large (Devlin et al. 2019): 24 x 1024, 16 heads, about 340M parameters. By hand with
  // the formula above (s 512, V 30522): 12·24·1024² + 13·24·1024 + 30522·1024 + 512·1024
  // + 2·1024 + 1024² + 3·1024 = 301,989,888 + 319,488 + 31,254,528 + 524,288 + 2,048
  // + 1,048,576 + 3,072 = 335,141,888.
  auto m = ModelPreset("bert-large");
  if (!m.ok()) GTEST_SKIP() << "no bert-large preset";
  EXPECT_EQ((*m)->TotalParams(), 335141888);
}

TEST(PresetsTest, GptSizesAreWhatTheirNamesSay) {
  struct Case {
    const char* name;
    double params;  // hand-computed with 12Lh² + 13Lh + Vh + sh + 2h
  };
  // gpt-1.5b: L 48, h 1600, s 1024, V 50257:
  //   12·48·1600² = 1,474,560,000; 13·48·1600 = 998,400; 50257·1600 = 80,411,200;
  //   1024·1600 = 1,638,400; 2·1600 = 3,200  ->  1,557,611,200.
  // gpt3-175b: L 96, h 12288, s 2048, V 50257:
  //   173,946,175,488 + 15,335,424 + 617,558,016 + 25,165,824 + 24,576 = 174,604,259,328.
  for (const Case& c : {Case{"gpt-1.5b", 1557611200.0}, Case{"gpt3-175b", 174604259328.0}}) {
    auto m = ModelPreset(c.name);
    ASSERT_TRUE(m.ok()) << m.status();
    EXPECT_EQ(static_cast<double>((*m)->TotalParams()), c.params) << c.name;
  }
  // gpt-1.5b training FLOPs per sample, by hand: 72·1024·48·1600²·(1 + 1024/9600 + 50257/921600)
  //   = 9,059,696,640,000 · 1.16119900... = 1.05201...e13
  auto g = ModelPreset("gpt-1.5b");
  ASSERT_TRUE(g.ok());
  const double expected = 9059696640000.0 * (1.0 + 1024.0 / 9600.0 + 50257.0 / 921600.0);
  EXPECT_NEAR((*g)->TrainFlopsPerSample(), expected, expected * 1e-12);
  EXPECT_NEAR((*g)->TrainFlopsPerSample(), 1.05201e13, 1e9);
}

TEST(PresetsTest, MoeModelsMatchClosedForms) {
  int checked = 0;
  for (const std::string& name : Library().Names("models")) {
    auto m = ModelPreset(name);
    ASSERT_TRUE(m.ok()) << name;
    const ModelGraph& g = **m;
    // The MoE-GPT closed form (GeLU experts, multi-head attention, learned positions); Mixtral
    // has its own test above.
    if (g.shape.experts == 0 || g.shape.ffn == "swiglu") continue;
    const double L = g.shape.layers, h = g.shape.hidden, s = g.shape.seq_len, V = g.shape.vocab;
    const double f = g.shape.ffn_hidden, E = g.shape.experts, k = g.shape.top_k;
    // Per block: attention 4h² + 6h; MoE: E experts of (2hf + f + h), gate hE, LayerNorm 2h.
    const double params = V * h + s * h + L * (4 * h * h + 6 * h + E * (2 * h * f + f + h) + h * E + 2 * h) + 2 * h;
    EXPECT_EQ(static_cast<double>(g.TotalParams()), params) << name;
    // Forward per sample: attention 8sh² + 4s²h; gate 2shE; top_k expert FFNs 4shf each; head 2shV.
    const double fwd = L * (8 * s * h * h + 4 * s * s * h + 2 * s * h * E + k * 4 * s * h * f) + 2 * s * h * V;
    EXPECT_NEAR(g.FwdFlopsPerSample() / fwd, 1.0, 1e-12) << name;
    EXPECT_NEAR(g.TrainFlopsPerSample() / (3 * fwd), 1.0, 1e-12) << name;
    EXPECT_EQ(g.layers[2].kind, LayerKind::kMoe) << name;
    ++checked;
  }
  EXPECT_GE(checked, 5);
}

TEST(PresetsTest, InlineKeysOverrideAModelPreset) {
  auto doc = ConfigDoc::ParseString("[model]\npreset = \"gpt-1.5b\"\nlayers = 2\nseq_len = 2048\n", "test");
  ASSERT_TRUE(doc.ok());
  ErrorList errors;
  auto m = ResolveModel(*doc, {"model"}, Library(), errors);
  ASSERT_TRUE(errors.empty()) << errors.ToStatus();
  EXPECT_EQ(m->shape.layers, 2);
  EXPECT_EQ(m->shape.seq_len, 2048);
  EXPECT_EQ(m->shape.hidden, 1600);  // from the preset
  EXPECT_EQ(static_cast<double>(m->TotalParams()), DenseParams(2, 1600, 2048, 50257));
}

TEST(PresetsTest, ModelErrorsPointAtTheValue) {
  auto doc = ConfigDoc::ParseString("[model]\npreset = \"gpt-1.5b\"\nheads = 7\n", "m.toml");
  ASSERT_TRUE(doc.ok());
  ErrorList errors;
  auto m = ResolveModel(*doc, {"model"}, Library(), errors);
  EXPECT_EQ(m, nullptr);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_THAT(std::string(errors.ToStatus().message()), HasSubstr("hidden (1600) must be a positive multiple of heads (7)"));

  auto bad_key = ConfigDoc::ParseString("[model]\npreset = \"gpt-1.5b\"\nhiden = 7\n", "m.toml");
  ErrorList errors2;
  (void)ResolveModel(*bad_key, {"model"}, Library(), errors2);
  ASSERT_EQ(errors2.size(), 1u);
  EXPECT_THAT(std::string(errors2.ToStatus().message()),
              HasSubstr("m.toml:3:9: [model]: unknown key 'hiden' (did you mean 'hidden'?)"));
}

TEST(PresetsTest, ErrorsInAPresetPointIntoThePresetFile) {
  testing::TempDir root;
  testing::WriteFile(root / "models" / "broken.toml",
                     "# a broken preset\n[model]\nlayers = 2\nhidden = 64\nheads = \"four\"\n");
  const PresetLibrary lib({root.path()});
  auto doc = ConfigDoc::ParseString("[model]\npreset = \"broken\"\nseq_len = 0\n", "exp.toml");
  ASSERT_TRUE(doc.ok());
  ErrorList errors;
  EXPECT_EQ(ResolveModel(*doc, {"model"}, lib, errors), nullptr);
  const std::string msg(errors.ToStatus().message());
  // The preset's bad value at its own file:line:column; the override's at the experiment's.
  EXPECT_THAT(msg, HasSubstr((root / "models" / "broken.toml").string() + ":5:9: [model]: 'heads': expected int"));
  EXPECT_THAT(msg, HasSubstr("exp.toml:3:11: [model]: 'seq_len': expected int in [1, 16777216]"));
}

}  // namespace
}  // namespace testbed
