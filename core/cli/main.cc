// The `testbed` command: run, validate, plugins, show, compare, merge, plot, report, import-chakra and export-chakra
// (and the simulator's trace and cost).
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <new>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "absl/strings/str_cat.h"
#include "cli/commands.h"
#include "results/results_file.h"
#include "cli/compare_command.h"
#include "cli/cost_command.h"
#include "cli/chakra_command.h"
#include "cli/merge_command.h"
#include "cli/plot_command.h"
#include "cli/report_command.h"

int main(int argc, char** argv) {
  // `testbed x.toml ...` is `testbed run x.toml ...`.
  std::vector<std::string> args(argv + 1, argv + argc);
  if (!args.empty() && args[0].size() > 5 && args[0].substr(args[0].size() - 5) == ".toml") {
    args.insert(args.begin(), "run");
  }

  CLI::App app{"testbed: a research testbed for distributed deep-learning training systems.\n"
               "Run an experiment with `testbed experiments/x.toml`; see README.md."};
  app.require_subcommand(1);
  app.set_version_flag("--version", testbed::cli::VersionString());

  testbed::cli::RunArgs run_args;
  auto* run = app.add_subcommand("run", "run every (arm x sweep point) of an experiment file");
  run->add_option("experiment", run_args.file, "experiment TOML file")->required();
  run->add_option("--set", run_args.sets, "override a key: --set train.micro_batch=8 (repeatable)");
  run->add_option("--only", run_args.only, "run only this arm (repeatable)");
  run->add_option("--point", run_args.points, "run only this point, as named in run ids (repeatable)");
  run->add_flag("--dry-run", run_args.dry_run, "list the runs without running them");
  run->add_option("-j,--jobs", run_args.jobs, "runs in parallel")->check(CLI::Range(1, 4096));
  run->add_flag("--fresh", run_args.fresh, "start a new results file (the old one is kept as a backup)");
  run->add_option("-o,--output", run_args.output, "results file (overrides [experiment] output)");
  run->add_flag("-q,--quiet", run_args.quiet, "no progress line");
  run->add_option("--shard", run_args.shard,
                  "run only part K of N (K from 0, runs dealt in turn), into its own file; join parts with merge");

  testbed::cli::ValidateArgs validate_args;
  auto* validate = app.add_subcommand("validate", "check an experiment file without running it");
  validate->add_option("experiment", validate_args.file, "experiment TOML file")->required();
  validate->add_option("--set", validate_args.sets, "override a key (repeatable)");

  testbed::cli::PluginsArgs plugins_args;
  auto* plugins = app.add_subcommand("plugins", "list plugin libraries and their components with parameters");
  plugins->add_option("--kind", plugins_args.kind, "only components of this kind");

  testbed::cli::ShowArgs show_args;
  auto* show = app.add_subcommand("show", "print the summary table of a results file");
  show->add_option("results", show_args.file, "results HDF5 file")->required();
  show->add_flag("--csv", show_args.csv, "print CSV: run,arm,point,metric,value,unit,speedup,reference,ratio");
  show->add_option("--run", show_args.run, "print every metric of one run (id or index)");
  show->add_flag("--exact", show_args.exact, "with --run: values with 17 significant digits, to compare runs bit for bit");

  std::string compact_file;
  auto* compact = app.add_subcommand("compact", "rewrite a results file without the space of replaced runs");
  compact->add_option("results", compact_file, "results HDF5 file")->required();
  testbed::cli::TraceArgs trace_args;
  auto* trace = app.add_subcommand("trace", "write a run's timeline as Chrome-trace JSON (open it in Perfetto)");
  trace->add_option("results", trace_args.file, "results HDF5 file")->required();
  trace->add_option("--run", trace_args.run, "run id or index")->required();

  testbed::cli::CompareArgs compare_args;
  auto* compare = app.add_subcommand("compare", "what changed between two results files (exit status 3 when a figure moved)");
  compare->add_option("old", compare_args.old_file, "results HDF5 file before")->required();
  compare->add_option("new", compare_args.new_file, "results HDF5 file after")->required();
  compare->add_option("--tolerance", compare_args.tolerance, "relative difference a metric may move without being flagged")
      ->capture_default_str()->check(CLI::NonNegativeNumber);
  compare->add_flag("--all", compare_args.all, "also compare the testbed's own wall-clock and memory figures");

  testbed::cli::MergeArgs merge_args;
  auto* merge = app.add_subcommand("merge", "join results files of one experiment (parts run with --shard)");
  merge->add_option("results", merge_args.inputs, "results HDF5 files")->required();
  merge->add_option("-o,--output", merge_args.output, "the joined results file")->required();

  testbed::cli::PlotArgs plot_args;
  auto* plot = app.add_subcommand("plot", "draw a results file's figures (PNG and SVG) with matplotlib");
  plot->add_option("results", plot_args.file, "results HDF5 file")->required();
  plot->add_option("-o,--output", plot_args.out_dir, "folder for the figures (default: <results>_plots)");
  plot->add_option("--python", plot_args.python, "the Python 3 interpreter (default /usr/bin/python3, else python3)");

  testbed::cli::ReportArgs report_args;
  auto* report = app.add_subcommand("report", "which papers' figures the results reproduce (Markdown, or HTML)");
  report->add_option("results", report_args.files, "results HDF5 files")->required();
  report->add_flag("--html", report_args.html, "HTML instead of Markdown");
  report->add_option("--figures", report_args.figures, "draw each file's figures into DIR/<experiment>/ and embed the main one");
  report->add_option("--tolerance", report_args.tolerance, "how far ours / paper may be from 1 to count as reproduced")
      ->capture_default_str()->check(CLI::Range(0.0, 10.0));
  report->add_option("--python", report_args.python, "the Python 3 interpreter for --figures");

  testbed::cli::CostArgs cost_args;
  auto* cost = app.add_subcommand("cost", "modelled time and memory of one transformer layer's ops");
  cost->add_option("--device", cost_args.device, "device preset")->capture_default_str();
  cost->add_option("--cluster", cost_args.cluster, "cluster preset whose node holds the TP group (default: the device's usual node)");
  cost->add_option("--hidden", cost_args.hidden, "hidden size")->capture_default_str()->check(CLI::Range(1, 1 << 24));
  cost->add_option("--heads", cost_args.heads, "attention heads (default hidden / 64)")->check(CLI::Range(1, 1 << 20));
  cost->add_option("--ffn", cost_args.ffn, "FFN size (default 4 x hidden)")->check(CLI::Range(1, 1 << 26));
  cost->add_option("--seq", cost_args.seq, "sequence length")->capture_default_str()->check(CLI::Range(1, 1 << 24));
  cost->add_option("--micro-batch", cost_args.micro_batch, "micro-batch size")->capture_default_str()->check(CLI::Range(1, 1 << 20));
  cost->add_option("--tp", cost_args.tp, "tensor-parallel degree")->capture_default_str()->check(CLI::Range(1, 1 << 20));
  cost->add_flag("--sequence-parallel", cost_args.sequence_parallel, "Megatron sequence parallelism");
  cost->add_option("--precision", cost_args.precision, "fp32 | tf32 | fp16 | bf16 | fp8")->capture_default_str();
  cost->add_option("--device-model", cost_args.device_model, "device_model component")->capture_default_str();
  cost->add_option("--collective", cost_args.collective, "collective component")->capture_default_str();
  cost->add_flag("--json", cost_args.json, "one JSON object: attn_fwd_s, attn_bwd_s, mlp_fwd_s, mlp_bwd_s, tp_comm_s, memory_bytes");

  testbed::cli::ImportChakraArgs import_args;
  auto* import_chakra = app.add_subcommand("import-chakra", "check Chakra execution traces and write an experiment that simulates them");
  import_chakra->add_option("traces", import_args.traces, "prefix or directory of <prefix>.<rank>.et files (or, with --astra-text, a text workload)")->required();
  import_chakra->add_flag("--astra-text", import_args.astra_text, "the input is an ASTRA-sim text workload (DATA, MODEL, HYBRID_*, MICRO)");
  import_chakra->add_option("--ranks", import_args.ranks, "with --astra-text: the NPUs it runs on")->check(CLI::Range(1, 100000000));
  import_chakra->add_option("-o,--output", import_args.output, "an experiment file to write ([workload] with the traces)");
  import_chakra->add_option("--cluster", import_args.cluster, "cluster preset of that experiment (default: DGX A100 nodes)");
  testbed::cli::ExportChakraArgs export_args;
  auto* export_chakra = app.add_subcommand("export-chakra", "write a simulated run's schedule as Chakra execution traces (ASTRA-sim 2.x)");
  export_chakra->add_option("results", export_args.results, "results HDF5 file")->required();
  export_chakra->add_option("--run", export_args.run, "the run's id")->required();
  export_chakra->add_option("-o,--output", export_args.output, "directory for <run>.<rank>.et and <run>.comm_groups.json")->required();

  std::vector<std::string> reversed(args.rbegin(), args.rend());
  try {
    app.parse(reversed);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  // Running out of memory outside a run (a run's own is recorded as its failure) ends the
  // command with a message, not an abort; runs already written stay in the results file.
  int rc = 2;
  try {
    testbed::cli::Env env = testbed::cli::MakeEnv();
    if (run->parsed()) rc = testbed::cli::Run(env, run_args);
    if (validate->parsed()) rc = testbed::cli::Validate(env, validate_args);
    if (plugins->parsed()) rc = testbed::cli::Plugins(env, plugins_args);
    if (show->parsed()) rc = testbed::cli::Show(show_args);
    if (trace->parsed()) rc = testbed::cli::Trace(trace_args);
    if (compact->parsed()) rc = testbed::cli::Compact(compact_file);
    if (cost->parsed()) rc = testbed::cli::Cost(env, cost_args);
    if (compare->parsed()) rc = testbed::cli::Compare(compare_args);
    if (merge->parsed()) rc = testbed::cli::Merge(merge_args);
    if (plot->parsed()) rc = testbed::cli::Plot(plot_args);
    if (report->parsed()) rc = testbed::cli::Report(report_args);
    if (import_chakra->parsed()) rc = testbed::cli::ImportChakra(env, import_args);
    if (export_chakra->parsed()) rc = testbed::cli::ExportChakra(env, export_args);
  } catch (const std::bad_alloc&) {
    std::fputs("error: out of memory: the experiment describes more than this machine can hold (fewer layers, "
               "nodes or devices); results written so far are kept\n", stderr);
    rc = 1;
  }
  // After a failed write the HDF5 library's clean-up at exit would crash (results_file.h).
  if (testbed::ResultsFile::AbandonedAFile()) {
    std::fflush(nullptr);
    std::_Exit(rc);
  }
  return rc;
}
