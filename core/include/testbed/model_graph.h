// A model as the systems techniques see it: a chain of layers, each with its FLOPs,
// parameters, activation memory and the size of what it hands to the next layer. Built
// from a shape (configs/models/*.toml or inline TOML) by BuildModelGraph.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace testbed {

enum class LayerKind { kEmbedding, kAttention, kMlp, kMoe, kHead, kGnn, kDense, kConv, kGiven, kLstm };
[[nodiscard]] const char* LayerKindName(LayerKind kind) noexcept;

// The graph layer of a GNN (family "gnn"): GraphSAGE with mean aggregation (Hamilton et al.
// 2017), GCN (Kipf & Welling 2017) or GAT (Velickovic et al. 2018), as core/train implements them.
enum class GnnOp { kNone, kSage, kGcn, kGat };
[[nodiscard]] const char* GnnOpName(GnnOp op) noexcept;

// A layer whose cost the user measured (family "layers"): its forward and backward time for a
// micro-batch of `micro_batch` samples, its parameters and the bytes it keeps and hands on per
// sample; `repeat` copies of it follow one another.
struct GivenLayer {
  std::string name;
  double fwd_s = 0;
  double bwd_s = 0;
  std::int64_t micro_batch = 0;  // samples the times are for (0: whatever the run's micro-batch is)
  std::int64_t params = 0;
  std::int64_t activation_bytes_per_sample = 0;
  std::int64_t output_bytes_per_sample = 0;
  std::int64_t repeat = 1;
};

// The shape of a transformer (GPT or BERT style, dense or MoE; FFN size 0 means 4 x hidden),
// of an MLP classifier (family "mlp": `inputs` features, `layers` hidden layers of width
// `hidden` with GELU, then `vocab` classes; a sample is one row, seq_len 1), or of a small
// convolutional classifier (family "cnn": square images of `channels` x `image_size` x
// `image_size` pixels, one convolution block per entry of `conv_channels` (3x3 convolution,
// stride 1, zero padding 1, ReLU, 2x2 max-pooling with stride 2), then `layers` (0 or more)
// dense layers of width `hidden` with GELU, then `vocab` classes; seq_len 1), or of a
// sampling-based GNN node classifier (family "gnn": `inputs` features per vertex, one graph
// layer of kind `gnn_layer` per entry of `fanouts`, hidden width `hidden`, `vocab` classes;
// a sample is one seed vertex of a mini-batch, seq_len 1), or of the NLP models of the
// sparse-embedding papers (family "lstm": an LSTM language model, token embedding of width
// `hidden`, `layers` LSTM layers of `hidden`, a softmax over `vocab`; family "gnmt": Wu et
// al. 2016's translation model, `layers` encoder LSTM layers (the first bidirectional) and
// `decoder_layers` decoder LSTM layers with attention, one table of `vocab` rows for source
// and target; family "transformer": Vaswani et al. 2017's encoder-decoder, `layers` encoder
// and `decoder_layers` decoder blocks, one table shared by source, target and the softmax;
// a sample is a sentence pair of seq_len tokens on each side).
struct ModelShape {
  std::string name;
  // "gpt" (causal) | "bert" (bidirectional) | "moe-gpt" | "mlp" | "cnn" | "gnn" | "layers" |
  // "lstm" | "gnmt" | "transformer"
  std::string family = "gpt";
  std::int64_t layers = 0;
  std::int64_t decoder_layers = 0;  // gnmt, transformer: decoder LSTM layers or blocks
  std::int64_t hidden = 0;
  std::int64_t heads = 0;
  std::int64_t ffn_hidden = 0;
  std::int64_t seq_len = 0;
  std::int64_t vocab = 0;
  std::int64_t experts = 0;  // MoE: experts per MoE layer (0: dense model)
  std::int64_t top_k = 1;    // MoE: experts each token is routed to
  bool tied_embeddings = true;
  // Transformers of today (Llama 3): grouped-query attention with kv_heads key/value heads
  // (0: heads, multi-head; 1: multi-query), SwiGLU FFNs (three matrices: gate, up, down),
  // FlashAttention (no s^2 scores kept, one fused kernel, scores recomputed in backward) and
  // rotary positions (no position embedding).
  std::int64_t kv_heads = 0;
  std::string ffn = "gelu";             // "gelu" | "swiglu"
  std::string attention = "standard";   // "standard" | "flash"
  std::string positions = "learned";    // "learned" | "rope"
  std::int64_t inputs = 0;      // mlp: input features; cnn: channels * image_size^2 (0: derived)
  std::int64_t channels = 1;    // cnn: input channels (1 for grey-scale images)
  std::int64_t image_size = 0;  // cnn: input rows = columns, in pixels
  // cnn: output channels of each convolution block, first to last; each block halves the
  // image's rows and columns (rounding down), so image_size needs at least 2^blocks pixels.
  std::vector<std::int64_t> conv_channels;
  // family "layers": the chain of layers as given, with no embedding or head unless listed.
  std::vector<GivenLayer> given;
  // gnn: neighbours sampled per vertex at each hop, from the seeds outward (GraphSAGE's
  // 25, 10); one graph layer per hop, the first layer applied to the farthest hop.
  std::vector<std::int64_t> fanouts;
  std::string gnn_layer = "sage";  // gnn: "sage" | "gcn" | "gat" (GAT: `heads` heads per hidden layer)
};

// One layer. Per-sample figures are for one sequence of seq_len tokens, no tensor
// parallelism, activations in 16-bit precision (as stored for backward by Megatron-LM:
// Korthikanti et al. 2022, "Reducing Activation Recomputation in Large Transformer Models").
struct Layer {
  std::string name;  // "embedding", "block3.attention", "block3.mlp", "head", "conv0", "dense1"
  LayerKind kind = LayerKind::kAttention;
  std::int64_t block = -1;  // transformer block index (cnn: layer index); -1 for embedding and head
  std::int64_t hidden = 0, ffn_hidden = 0, heads = 0, seq_len = 0, vocab = 0, experts = 0, top_k = 1;
  std::int64_t kv_heads = 0;    // attention: key/value heads (grouped-query attention); = heads for MHA
  bool swiglu = false;          // mlp, MoE experts: gate, up and down matrices with SiLU (else fc1, GeLU, fc2)
  bool flash_attention = false; // attention: FlashAttention (fused, no s^2 activations)
  bool causal = true;
  // Encoder-decoder models: an attention layer whose queries come from the decoder and whose
  // keys and values from the encoder's output (non-causal).
  bool cross_attention = false;
  // kEmbedding: sequences of seq_len tokens a sample looks up in the table (encoder-decoder
  // models sharing one table between source and target: 2). Only the rows its tokens name
  // get a gradient (sparse), which sparse embedding communication exploits.
  std::int64_t embedding_streams = 1;
  // kLstm: an LSTM layer from `ffn_hidden` input features to `hidden` per token and
  // direction, over seq_len time steps, in `lstm_directions` directions (2: bidirectional,
  // outputs concatenated).
  std::int64_t lstm_directions = 1;
  double fwd_flops_per_sample = 0.0;  // matrix-multiply FLOPs, forward
  double bwd_flops_per_sample = 0.0;  // backward (input and weight gradients): 2 x forward
  std::int64_t params = 0;            // parameter count held by this layer
  std::int64_t expert_params = 0;     // MoE: parameters of one expert (included in params, x experts)
  // Bytes kept for backward per sample; split into the part that shrinks with tensor
  // parallelism (or sequence parallelism) and the attention-score part (5·a·s² bytes)
  // that selective recomputation drops.
  std::int64_t activation_bytes_per_sample = 0;
  std::int64_t activation_score_bytes_per_sample = 0;  // included in the total above
  // The part of the total that tensor parallelism does not split (LayerNorm inputs, dropout
  // masks, inputs of column-parallel GEMMs); sequence parallelism splits it too.
  std::int64_t activation_replicated_bytes_per_sample = 0;
  std::int64_t output_bytes_per_sample = 0;            // what is sent to the next stage
  // Megatron tensor parallelism: bytes all-reduced per sample over the TP group in forward
  // and in backward (0 where the split needs none).
  std::int64_t tp_fwd_allreduce_bytes_per_sample = 0;
  std::int64_t tp_bwd_allreduce_bytes_per_sample = 0;
  // Parameters this layer uses that are counted in another layer (the head's weights tied
  // to the embedding's). A pipeline stage that holds this layer but not the other keeps a
  // copy, and the two copies' gradients are all-reduced (Megatron-LM).
  std::int64_t shared_params = 0;
  // kGiven: measured times per micro-batch of `given_micro_batch` samples (0: any), costed as
  // given (DeviceModel::LayerTime) with no device-model arithmetic.
  double given_fwd_s = -1;
  double given_bwd_s = -1;
  std::int64_t given_micro_batch = 0;
  // kConv (family cnn): a conv_kernel x conv_kernel convolution, stride 1, zero padding
  // conv_kernel / 2 (the image keeps its size), ReLU, then 2x2 max-pooling with stride 2,
  // from conv_in_channels x conv_image_size x conv_image_size input pixels to
  // conv_out_channels x (conv_image_size / 2)^2. As for dense layers, `ffn_hidden` is the
  // input width and `hidden` the output width, in elements per sample.
  std::int64_t conv_in_channels = 0;
  std::int64_t conv_out_channels = 0;
  std::int64_t conv_image_size = 0;
  std::int64_t conv_kernel = 0;
  // kGnn (family gnn): a graph layer from `ffn_hidden` to `hidden` features per vertex. Its
  // per-sample figures are for one seed vertex's sampling tree without overlap: the layer
  // updates gnn_targets_per_sample vertices, each from gnn_fanout sampled neighbours and
  // itself (an upper bound; sampled mini-batches share vertices, StepInput::layer_samples
  // carries what a sampled batch really holds).
  GnnOp gnn_op = GnnOp::kNone;
  std::int64_t gnn_fanout = 0;
  double gnn_targets_per_sample = 0;
};

struct ModelGraph {
  ModelShape shape;
  std::vector<Layer> layers;

  [[nodiscard]] std::int64_t TotalParams() const noexcept;  // shared weights counted once
  [[nodiscard]] double FwdFlopsPerSample() const noexcept;
  [[nodiscard]] double TrainFlopsPerSample() const noexcept;  // forward + backward
  // The same with the attention scores of causal layers counted for the lower triangle only
  // (half of the 4·s²·h forward and 8·s²·h backward): the convention of MFU figures that do
  // not credit the masked half. TrainFlopsPerSample counts them whole, as Megatron-LM does.
  [[nodiscard]] double CausalTrainFlopsPerSample() const noexcept;
  // Transformer blocks (mlp: hidden layers; cnn: conv blocks and dense layers, the units a
  // pipeline stage may hold besides the classifier).
  [[nodiscard]] int NumBlocks() const noexcept {
    const std::int64_t conv = shape.family == "cnn" ? static_cast<std::int64_t>(shape.conv_channels.size()) : 0;
    return static_cast<int>(shape.layers + shape.decoder_layers + conv);
  }
};

// Derives the layer graph from a shape: embedding, then (attention, MLP or MoE) per block,
// then the output head (final norm, logits, loss). Fails on an inconsistent shape
// (hidden not divisible by heads, a missing dimension, top_k > experts).
[[nodiscard]] absl::StatusOr<ModelGraph> BuildModelGraph(const ModelShape& shape);

}  // namespace testbed
