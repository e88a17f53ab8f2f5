#include "exec/transfer_tasks.h"

#include "testbed/status_macros.h"

namespace testbed::exec {

absl::Status TransferTasks::Setup() {
  if (s_.pp < 2) return absl::OkStatus();
  std::vector<int> everyone(static_cast<size_t>(s_.world.size()));
  for (int r = 0; r < s_.world.size(); ++r) everyone[static_cast<size_t>(r)] = r;
  const int groups = s_.chunks > 1 ? 4 : 2;
  for (int g = 0; g < groups; ++g) {
    TESTBED_ASSIGN_OR_RETURN(s_.p2p[static_cast<size_t>(g)], s_.world.NewGroup(everyone));
  }
  return absl::OkStatus();
}

int TransferTasks::Tag(int receiver_chunk, int mb, bool backward) const {
  const int chunks = s_.pp * s_.chunks;
  return static_cast<int>((static_cast<std::int64_t>(mb) * (chunks + 1) * 2 + receiver_chunk * 2 + (backward ? 1 : 0)) %
                          (CommGroup::kMaxTag + 1));
}

CommGroup& TransferTasks::Direction(bool backward, bool wraps) const {
  return *s_.p2p[static_cast<size_t>((backward ? 1 : 0) + (wraps ? 2 : 0))];
}

absl::Status TransferTasks::Send(const Task& t) {
  const bool backward = t.phase == Phase::kBackward;
  const int slot = s_.Slot(t);
  TESTBED_ASSIGN_OR_RETURN(Tensor whole, compute_.Whole(t.chunk, slot, backward));
  auto buffer = std::make_unique<Tensor>(std::move(whole));
  const int own = t.chunk * s_.pp + s_.stage;
  const int receiver = backward ? own - 1 : own + 1;
  s_.metrics.pipeline_bytes += static_cast<double>(buffer->size()) * sizeof(float);
  // Forward out of the last stage, or backward out of the first, goes round to the other end.
  const bool wraps = backward ? s_.stage == 0 : s_.stage == s_.pp - 1;
  TESTBED_ASSIGN_OR_RETURN(CommRequestPtr req, Direction(backward, wraps).ISend(buffer->data(), buffer->size(),
                                                                                DataType::kFloat32, t.peer,
                                                                                Tag(receiver, slot, backward)));
  pending_sends_.emplace_back(std::move(req), std::move(buffer));
  return absl::OkStatus();
}

absl::Status TransferTasks::Recv(const Task& t) {
  const bool backward = t.phase == Phase::kBackward;
  Tensor buffer(s_.SamplesPerMicroBatch() * s_.seq, s_.hidden);
  const int own = t.chunk * s_.pp + s_.stage;
  // Forward into the first stage, or backward into the last, came round from the other end.
  const bool wraps = backward ? s_.stage == s_.pp - 1 : s_.stage == 0;
  TESTBED_RETURN_IF_ERROR(Direction(backward, wraps).Recv(buffer.data(), buffer.size(), DataType::kFloat32, t.peer,
                                                          Tag(own, s_.Slot(t), backward)));
  SampleBlocks whole(1, s_.seq, s_.SamplesPerMicroBatch());
  whole.Set(0, std::move(buffer));
  s_.received.insert_or_assign({{t.chunk, s_.Slot(t)}, backward}, std::move(whole));
  return absl::OkStatus();
}

absl::Status TransferTasks::Finish() {
  for (auto& [req, buffer] : pending_sends_) TESTBED_RETURN_IF_ERROR(req->Wait());
  pending_sends_.clear();
  return absl::OkStatus();
}

}  // namespace testbed::exec
