// Families "lstm", "gnmt" and "transformer" of the model graph (testbed/model_graph.h): the
// NLP models that the sparse-embedding communication papers (EmbRace, TriRace, S2Reducer's
// code) train, whose embedding tables are large and whose gradients touch few rows.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "testbed/model_graph.h"

namespace testbed {

// An LSTM layer of `directions` directions from `in` to `hidden` features per token over
// `seq_len` steps: two GEMMs per gate set (input and recurrent), 4 gates; its output is
// directions x hidden per token.
[[nodiscard]] Layer LstmRecord(std::string name, std::int64_t block, std::int64_t in, std::int64_t hidden,
                               std::int64_t seq_len, std::int64_t vocab, std::int64_t directions);

// "lstm": embedding, `layers` LSTM layers, head (a softmax over the vocabulary, no norm).
// "gnmt": embedding (one table for source and target), the encoder's `layers` LSTM layers
// (the first bidirectional, the second from its 2h outputs), the decoder's first LSTM layer
// and the attention over the encoder's outputs (in the decoder's first block), the other
// decoder layers on their input and the attention context (2h), head.
// "transformer": embedding (one table for source, target and the softmax), `layers` encoder
// blocks (attention, MLP), `decoder_layers` decoder blocks (causal self-attention,
// cross-attention over the encoder's output, MLP), head tied to the embedding.
// InvalidArgument naming the model for a shape that does not suit its family.
[[nodiscard]] absl::StatusOr<ModelGraph> BuildSeqModel(const ModelShape& shape);

}  // namespace testbed
