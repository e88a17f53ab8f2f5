// Point-to-point matching for one group of the local communicator. Sends and receives are
// posted under (source, destination, tag) and matched first-in first-out; whichever side
// comes second copies the data straight from the send buffer to the receive buffer, so no
// progress thread and no intermediate copy is needed.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>

#include "completion.h"
#include "testbed/communicator.h"

namespace testbed::local {

struct Transfer {
  int source = 0;
  int destination = 0;
  int tag = 0;
  DataType type = DataType::kFloat32;
  std::int64_t count = 0;
  const void* send = nullptr;  // set on a posted send
  void* recv = nullptr;        // set on a posted receive
  Completion done;
};

class Mailbox {
 public:
  // Posts one side of a transfer. When the other side is already waiting, the two are
  // matched, the data copied and both completed before this returns.
  void Post(const std::shared_ptr<Transfer>& transfer, bool is_send);
  // Withdraws a posted, still unmatched transfer; false when it has been matched already.
  [[nodiscard]] bool Cancel(const std::shared_ptr<Transfer>& transfer, bool is_send);

 private:
  using Key = std::tuple<int, int, int>;  // source, destination, tag
  struct Queues {
    std::deque<std::shared_ptr<Transfer>> sends;
    std::deque<std::shared_ptr<Transfer>> recvs;
  };

  static void Deliver(Transfer& send, Transfer& recv) noexcept;

  std::mutex mu_;
  std::map<Key, Queues> queues_;
};

}  // namespace testbed::local
