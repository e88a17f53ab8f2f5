// One rank's progress thread for one group: runs that rank's collectives in the order they
// were issued, so an asynchronous collective proceeds while the caller computes (as NCCL's
// stream does) and a rank that never waits still does its share for the others.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

namespace testbed::local {

class Worker {
 public:
  Worker();
  // Runs every job already posted, then stops the thread.
  ~Worker();
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  void Post(std::function<void()> job);

 private:
  void Loop();

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> jobs_;
  bool stopping_ = false;
  std::thread thread_;  // last: starts after the members it uses exist
};

}  // namespace testbed::local
