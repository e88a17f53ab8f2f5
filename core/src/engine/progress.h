// Progress of an experiment on the terminal: done/total, the runs in flight, elapsed time
// and an estimate of what remains. On a terminal one line is rewritten in place; otherwise
// (logs, CI) one line is printed per finished run.
#pragma once

#include <chrono>
#include <cstdio>
#include <mutex>
#include <set>
#include <string>

namespace testbed {

class Progress {
 public:
  Progress(int total, int skipped, std::FILE* out);
  void Started(const std::string& run_id);
  void Finished(const std::string& run_id, bool ok, double wall_time_s);
  void Done();  // clears the in-place line

 private:
  void Draw(const std::string& event);
  [[nodiscard]] static std::string Clock(double seconds);

  std::mutex mu_;
  int total_;
  int done_;
  int to_run_;
  int ran_ = 0;
  int failed_ = 0;
  std::set<std::string> running_;
  std::chrono::steady_clock::time_point start_;
  std::FILE* out_;
  bool tty_;
};

}  // namespace testbed
