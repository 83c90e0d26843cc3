// The report commands: `report`, `readme`, `compare`, `check` and `plot`. They read the
// results store's typed run facts and never run a model or parse a stored suite.
#include <boost/program_options.hpp>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <regex>
#include <sstream>
#include <vector>

#include "harness/cli/command.h"
#include "reports/check.h"
#include "reports/compare.h"
#include "reports/format.h"
#include "reports/markdown.h"
#include "reports/plot.h"
#include "reports/readme.h"
#include "reports/readme_sections.h"
#include "reports/report.h"
#include "reports/training.h"

namespace po = boost::program_options;

namespace seqbench::cli {
namespace {

void WriteOutput(const std::string& text, const std::string& path) {
  if (path.empty() || path == "-") {
    std::cout << text;
    return;
  }
  std::ofstream file(path, std::ios::binary);
  if (!file || !(file << text)) throw std::runtime_error("cannot write " + path);
}

std::string ReadFile(const std::string& path, const std::string& command) {
  std::ifstream file(path, std::ios::binary);
  if (!file) throw UsageError(command + ": cannot read " + path);
  std::ostringstream text;
  text << file.rdbuf();
  return text.str();
}

}  // namespace

int RunReport(const std::vector<std::string>& args) {
  RunSelection selection;
  std::string format, out;
  po::options_description options(
      "Usage: seqbench report [RUN_ID | --latest [--suite NAME]] [--format "
      "md|csv|json|gbench-json]\n"
      "                       [--out FILE] [--db FILE]\n\n"
      "Renders a stored run: Markdown tables (one per mode, dtype and device), CSV or JSON\n"
      "with every field, or Google Benchmark's JSON for its tools/compare.py. Speedup is the\n"
      "ratio of median throughputs (tokens per step / median seconds per step), the one\n"
      "definition every seqbench command uses.\n\nOptions");
  options.add_options()("help,h", "show this help");
  po::options_description hidden;
  po::positional_options_description positional;
  selection.Declare(options, hidden, positional);
  options.add_options()("format", po::value(&format)->default_value("md"),
                        "md, csv, json or gbench-json")("out", po::value(&out),
                                                        "write here instead of standard output");
  const auto values = ParseArguments(args, options, hidden, positional, "report");
  if (!values) return 0;
  if (format != "md" && format != "csv" && format != "json" && format != "gbench-json") {
    throw UsageError("report: --format must be md, csv, json or gbench-json, got '" + format + "'");
  }
  std::unique_ptr<Store> store;
  const RunRecord run = selection.Resolve(*values, store, "report");
  const auto cases = store->Cases(run.run_id);
  std::string text;
  if (format == "md") {
    text = run.kind == kRunKindTraining
               ? "# Training run " + std::to_string(run.run_id) + " (suite " + run.suite_name +
                     ", " + run.started_at + ")\n\n" + RenderTrainingTable(cases)
               : RenderMarkdown(run, cases) + RenderWarnings(RunWarnings(run, cases));
  }
  if (format == "csv") text = RenderCsv(run, cases);
  if (format == "json") text = RenderJson(run, cases);
  if (format == "gbench-json") text = RenderGbenchJson(run, cases);
  WriteOutput(text, out);
  return 0;
}

int RunReadme(const std::vector<std::string>& args) {
  std::string readme_path;
  std::vector<std::string> db_paths;
  po::options_description options(
      "Usage: seqbench readme README.md [--db FILE]...\n\n"
      "Regenerates every section between <!-- seqbench:begin ATTRS --> and\n"
      "<!-- seqbench:end --> from the latest complete run that matches, and leaves the\n"
      "rest of the file byte for byte. Attributes: suite=NAME (required); any workload field\n"
      "as a filter (device=cpu, batch=1, mode=train, ...);\n"
      "and for a plot instead of tables: plot=runtime|memory|tokens_per_s|speedup,\n"
      "x=seq_len|batch|layers, over=VARIANT (speedup), file=PATH.svg (relative to the README).\n"
      "Training runs (seqbench train) render their pipeline table, or with\n"
      "plot=loss|validation_loss|loss_difference (with over=PIPELINE) and x=step|time their\n"
      "loss curves; pipelines=A,B,... picks\n"
      "and orders the pipelines shown.\n"
      "With several --db (e.g. results/published/cpu.db and gpu.db), each section comes\n"
      "from the first database that has a matching run.\n\n"
      "Options");
  options.add_options()("help,h", "show this help")(
      "db",
      po::value(&db_paths)
          ->default_value({kDefaultDatabasePath}, kDefaultDatabasePath)
          ->composing(),
      "results database; repeat it to read several");
  po::options_description hidden;
  hidden.add_options()("readme", po::value(&readme_path));
  po::positional_options_description positional;
  positional.add("readme", 1);
  const auto values = ParseArguments(args, options, hidden, positional, "readme");
  if (!values) return 0;
  if (readme_path.empty()) throw UsageError("readme: give the Markdown file to update");
  const std::string text = ReadFile(readme_path, "readme");
  std::vector<std::unique_ptr<Store>> stores;
  for (const std::string& db_path : db_paths)
    stores.push_back(OpenExistingStore(db_path, "readme"));
  const std::string readme_dir = std::filesystem::path(readme_path).parent_path().string();
  const SectionRenderer render = [&](const ReadmeSection& section) -> std::string {
    for (size_t i = 0;; ++i) {
      try {
        return RenderReadmeSection(*stores[i], section, readme_dir);
      } catch (const NoMatchingRun&) {
        if (i + 1 == stores.size()) throw;  // the last database's message names the fix
      }
    }
  };
  std::string updated;
  try {
    updated = RewriteReadme(text, readme_path, render);
  } catch (const ReadmeError& error) {
    throw UsageError(std::string("readme: ") + error.what());
  }
  if (updated == text) {
    std::cout << readme_path << ": up to date\n";
    return 0;
  }
  WriteOutput(updated, readme_path);
  std::cout << readme_path << ": regenerated\n";
  return 0;
}

// A threshold as a user writes it: "5%" or the fraction "0.05". A bare number of 1 or
// more is refused rather than guessed at (5 would be 500%).
double ParseThreshold(const std::string& text, const std::string& command) {
  const std::regex number("([0-9]*\\.?[0-9]+)(%?)");
  std::smatch match;
  if (std::regex_match(text, match, number)) {
    const double value = std::stod(match[1]);
    if (match[2].length() > 0) return value / 100;
    if (value < 1) return value;
    throw UsageError(command + ": --threshold " + text + " would be " +
                     FormatSignificant(value * 100) + "%; write " + text + "% or " +
                     FormatSignificant(value / 100) + " for " + text + " percent");
  }
  throw UsageError(command + ": --threshold must be a percentage like 5% or a fraction like " +
                   "0.05, got '" + text + "'");
}

int RunCompare(const std::vector<std::string>& args) {
  std::string db_path, base_db, threshold_text;
  int64_t base_id = 0, new_id = 0;
  CompareSettings settings;
  po::options_description options(
      "Usage: seqbench compare BASE_RUN NEW_RUN [--threshold 5%] [--confidence 0.95]\n"
      "                        [--db FILE] [--base-db FILE]\n\n"
      "Matches the two runs' cases by their identity and judges each on the ratio of median\n"
      "runtimes (new / base, the inverse of the speedup) and its bootstrap confidence\n"
      "interval from the repetition samples (at least 3 a side). Verdicts: slower (the\n"
      "whole interval above 1 + threshold), faster (below 1 - threshold), same (inside\n"
      "both), ambiguous (it reaches across a limit, or too few samples). Peak memory is\n"
      "judged against the same threshold. Exits 1 when any case is slower or larger.\n\n"
      "Options");
  options.add_options()("help,h", "show this help");
  DeclareDatabase(options, &db_path, "database of NEW_RUN (and BASE_RUN)");
  options.add_options()("base-db", po::value(&base_db), "database of BASE_RUN, if another")(
      "threshold", po::value(&threshold_text)->default_value("5%"),
      "smallest change that counts: 5% or 0.05")(
      "confidence", po::value(&settings.confidence)->default_value(0.95, "0.95"),
      "of the ratio's bootstrap interval, in (0, 1)");
  po::options_description hidden;
  hidden.add_options()("base", po::value(&base_id))("new", po::value(&new_id));
  po::positional_options_description positional;
  positional.add("base", 1).add("new", 1);
  const auto values = ParseArguments(args, options, hidden, positional, "compare");
  if (!values) return 0;
  if (base_id <= 0 || new_id <= 0) throw UsageError("compare: give BASE_RUN and NEW_RUN ids");
  settings.threshold = ParseThreshold(threshold_text, "compare");
  if (!(settings.confidence > 0 && settings.confidence < 1))
    throw UsageError("compare: --confidence must lie in (0, 1), e.g. 0.95");

  const auto new_store = OpenExistingStore(db_path, "compare");
  const auto base_store = base_db.empty() ? nullptr : OpenExistingStore(base_db, "compare");
  const Store& base_source = base_store ? *base_store : *new_store;
  const RunRecord base = ResolveRun(base_source, base_id, false, "", "compare");
  const RunRecord next = ResolveRun(*new_store, new_id, false, "", "compare");
  for (const auto& difference : EnvironmentDifferences(base, next)) {
    std::cerr << "seqbench: warning: environments differ: " << difference << "\n";
  }
  const auto comparisons =
      CompareCases(base_source.Cases(base.run_id), new_store->Cases(next.run_id), settings);
  MarkdownTable table(
      {"case", "base median", "new median", "ratio", "interval", "verdict", "memory", "note"});
  bool regression = false;
  std::map<std::string, int> verdicts;
  for (const CaseComparison& c : comparisons) {
    char ratio[32] = "—", interval[48] = "—", memory[48] = "—";
    if (c.ratio > 0) std::snprintf(ratio, sizeof(ratio), "%.3f", c.ratio);
    if (c.interval)
      std::snprintf(interval, sizeof(interval), "%.3f–%.3f", c.interval->low, c.interval->high);
    if (c.memory_ratio)
      std::snprintf(memory, sizeof(memory), "%.3f× %s", *c.memory_ratio, c.memory_verdict.c_str());
    table.AddRow({c.case_key, c.base_median_s > 0 ? FormatDuration(c.base_median_s) : "—",
                  c.new_median_s > 0 ? FormatDuration(c.new_median_s) : "—", ratio, interval,
                  c.verdict, memory, c.note});
    regression = regression || IsRegression(c);
    ++verdicts[c.verdict];
  }
  std::cout << table.Render() << "\n";
  for (const auto& [verdict, count] : verdicts) std::cout << verdict << ": " << count << "  ";
  std::cout << "\n" << (regression ? "REGRESSION beyond the threshold\n" : "no regression\n");
  return regression ? 1 : 0;
}

int RunCheck(const std::vector<std::string>& args) {
  RunSelection selection;
  po::options_description options(
      "Usage: seqbench check [RUN_ID | --latest [--suite NAME]] [--db FILE]\n\n"
      "Evaluates the expectations stored with the run (its suite's [[expect]] entries:\n"
      "ratios measured side by side in that run; speedup is the ratio of median\n"
      "throughputs), prints what held, and exits 1 when anything fell short. Works on any\n"
      "stored run, whatever the suite file or the variants registered today.\n\nOptions");
  options.add_options()("help,h", "show this help");
  po::options_description hidden;
  po::positional_options_description positional;
  selection.Declare(options, hidden, positional);
  const auto values = ParseArguments(args, options, hidden, positional, "check");
  if (!values) return 0;
  std::unique_ptr<Store> store;
  const RunRecord run = selection.Resolve(*values, store, "check");
  if (run.status != "complete") {
    throw UsageError("check: run " + std::to_string(run.run_id) + " is " + run.status +
                     "; finish it with seqbench run " + run.suite_path + " --resume " +
                     std::to_string(run.run_id));
  }
  if (run.expectations.empty()) {
    throw UsageError("check: suite '" + run.suite_name + "' has no [[expect]] entries to check");
  }
  const auto cases = store->Cases(run.run_id);
  const auto outcomes = run.kind == kRunKindTraining
                            ? EvaluateTrainingExpectations(run.expectations, cases,
                                                           LoadCurves(*store, run.run_id, cases))
                            : EvaluateExpectations(run.expectations, cases);
  MarkdownTable table({"", "expectation", "measured"});
  int failed = 0;
  for (const ExpectationOutcome& outcome : outcomes) {
    table.AddRow({outcome.held ? "✓" : "✗", outcome.expectation, outcome.measured});
    failed += outcome.held ? 0 : 1;
  }
  std::cout << "check of run " << run.run_id << " (suite " << run.suite_name << ")\n\n"
            << table.Render() << "\n";
  std::cout << (outcomes.size() - failed) << " held, " << failed << " fell short\n";
  // After the verdicts, which stand on intervals; the noise says how wide those were.
  const std::string warnings = RenderWarnings(RunWarnings(run, cases));
  if (!warnings.empty()) std::cout << "\n" << warnings;
  return failed ? 1 : 0;
}

int RunPlot(const std::vector<std::string>& args) {
  RunSelection selection;
  PlotRequest request;
  po::options_description options(
      "Usage: seqbench plot [RUN_ID | --latest [--suite NAME]] --x seq_len|batch|layers --y "
      "runtime|memory|tokens_per_s|speedup\n"
      "                     [--over VARIANT] [--out FILE.svg] [--db FILE]\n\n"
      "Plots one line per variant through gnuplot (SVG), log axes where the data spans a\n"
      "decade or more. runtime is the median step time; memory the activation memory.\n"
      "For a training run (seqbench train): --y loss|validation_loss --x step|time, one line\n"
      "per pipeline.\n\nOptions");
  options.add_options()("help,h", "show this help");
  po::options_description hidden;
  po::positional_options_description positional;
  selection.Declare(options, hidden, positional);
  options.add_options()("x", po::value(&request.x)->default_value("seq_len"),
                        "seq_len, batch or layers")("y",
                                                    po::value(&request.y)->default_value("runtime"),
                                                    "runtime, memory, tokens_per_s or speedup")(
      "over", po::value(&request.over), "with --y speedup: the variant it is relative to")(
      "out", po::value(&request.output), "the SVG file (default: run<ID>_<y>.svg)");
  const auto values = ParseArguments(args, options, hidden, positional, "plot");
  if (!values) return 0;
  std::unique_ptr<Store> store;
  const RunRecord run = selection.Resolve(*values, store, "plot");
  if (request.output.empty())
    request.output = "run" + std::to_string(run.run_id) + "_" + request.y + ".svg";
  request.title = run.suite_name + ", run " + std::to_string(run.run_id);
  const auto cases = store->Cases(run.run_id);
  try {
    if (run.kind == kRunKindTraining) {
      LossPlotRequest loss_request;
      loss_request.y = values->count("y") && !values->at("y").defaulted() ? request.y : "loss";
      loss_request.x = values->count("x") && !values->at("x").defaulted() ? request.x : "step";
      loss_request.title = request.title;
      loss_request.over = request.over;
      loss_request.output =
          values->count("out") ? request.output
                               : "run" + std::to_string(run.run_id) + "_" + loss_request.y + ".svg";
      RenderLossPlot(cases, LoadCurves(*store, run.run_id, cases), loss_request);
      std::cout << loss_request.output << "\n";
      return 0;
    }
    RenderPlot(cases, request);
  } catch (const std::invalid_argument& error) {
    throw UsageError(std::string("plot: ") + error.what());
  }
  std::cout << request.output << "\n";
  return 0;
}

}  // namespace seqbench::cli
