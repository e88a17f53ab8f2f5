#include "cli/plot_command.h"

#include <spawn.h>
#include <sys/wait.h>

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <vector>

#include "absl/strings/str_cat.h"
#include "cli/commands.h"
#include "results/plot_data.h"
#include "results/results_file.h"

extern char** environ;

namespace testbed::cli {
namespace {

// TESTBED_PLOT_SCRIPT, else share/testbed/tools/plot.py beside this executable's bin/.
std::filesystem::path Script() {
  if (const char* env = std::getenv("TESTBED_PLOT_SCRIPT")) return env;
  std::error_code ec;
  const auto exe = std::filesystem::weakly_canonical("/proc/self/exe", ec);
  return exe.parent_path().parent_path() / "share" / "testbed" / "tools" / "plot.py";
}

}  // namespace

std::string MainFigurePath(const std::string& dir, const std::string& experiment) {
  // tools/plot.py's safe(): every run of other characters becomes one '_'.
  std::string name;
  bool in_run = false;
  for (char c : experiment) {
    const bool ok = std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-';
    if (ok) {
      name += c;
      in_run = false;
    } else if (!in_run) {
      name += '_';
      in_run = true;
    }
  }
  return (std::filesystem::path(dir) / absl::StrCat(name, "_main.png")).string();
}

int Plot(const PlotArgs& args) {
  auto contents = ResultsFile::Read(args.file, true);
  if (!contents.ok()) return Fail(contents.status());
  std::filesystem::path dir = args.out_dir;
  if (dir.empty()) {
    std::filesystem::path p(args.file);
    dir = p.parent_path() / absl::StrCat(p.stem().string(), "_plots");
  }
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return Fail(absl::InvalidArgumentError(absl::StrCat("-o ", dir.string(), ": ", ec.message())));
  const std::filesystem::path data = dir / "plot_data.json";
  {
    std::ofstream out(data);
    out << PlotDataJson(*contents);
    if (!out) return Fail(absl::InternalError(absl::StrCat("cannot write ", data.string())));
  }
  const std::filesystem::path script = Script();
  if (!std::filesystem::is_regular_file(script, ec)) {
    return Fail(absl::NotFoundError(absl::StrCat("the plotting script ", script.string(),
                                                 " is missing (set TESTBED_PLOT_SCRIPT to tools/plot.py)")));
  }
  std::string python = args.python;
  if (python.empty()) python = std::filesystem::exists("/usr/bin/python3", ec) ? "/usr/bin/python3" : "python3";
  std::vector<std::string> argv = {python, script.string(), data.string(), dir.string()};
  std::vector<char*> cargv;
  for (auto& a : argv) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  pid_t pid = -1;
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  if (args.quiet) posix_spawn_file_actions_adddup2(&actions, 2, 1);
  const int rc = posix_spawnp(&pid, python.c_str(), &actions, nullptr, cargv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) {
    return Fail(absl::NotFoundError(absl::StrCat("cannot start the Python interpreter '", python, "': ",
                                                 std::strerror(rc),
                                                 " (install python3-matplotlib, which scripts/install-deps.sh does, "
                                                 "or name one with --python)")));
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status)) return Fail(absl::InternalError(absl::StrCat(script.string(), " did not finish")));
  return WEXITSTATUS(status);
}

}  // namespace testbed::cli
