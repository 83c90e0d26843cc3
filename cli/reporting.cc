// The report commands: `report`, `readme`, `compare`, `check` and `plot`. They read the
// results store's typed run facts and never run a model or parse a stored suite.
#include <boost/program_options.hpp>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <vector>

#include "base/files.h"
#include "base/text.h"
#include "cli/command.h"
#include "harness/suite.h"
#include "reports/check.h"
#include "reports/compare.h"
#include "reports/escape/json.h"
#include "reports/escape/markdown.h"
#include "reports/escape/terminal.h"
#include "reports/fit.h"
#include "reports/format.h"
#include "reports/markdown.h"
#include "reports/plot.h"
#include "reports/pull_request.h"
#include "reports/readme.h"
#include "reports/readme_sections.h"
#include "reports/report.h"
#include "reports/scaling.h"
#include "reports/training.h"
#include "results/machine.h"

namespace po = boost::program_options;
using json = nlohmann::json;

namespace seqbench::cli {
namespace {

void WriteOutput(const std::string& text, const std::string& path) {
  if (path.empty() || path == "-") {
    std::cout << text;
    return;
  }
  WriteFileAtomically(path, text);
}

std::string ReadFile(const std::string& path, const std::string& command) {
  std::ifstream file(path, std::ios::binary);
  if (!file) throw UsageError(command + ": cannot read " + path);
  std::ostringstream text;
  text << file.rdbuf();
  return text.str();
}

// The whole run as Markdown: the benchmark tables and warnings, or a training run's table
// and the sections its pipelines call for.
std::string RenderMarkdownReport(const RunRecord& run, const std::vector<CaseRecord>& cases) {
  if (run.kind != kRunKindTraining)
    return RenderMarkdown(run, cases) + RenderWarnings(RunWarnings(run, cases));
  std::string text = "# Training run " + std::to_string(run.run_id) + " (suite " +
                     escape::MarkdownText(run.suite_name + ", " + run.started_at) + ")\n\n" +
                     RenderTrainingTable(cases);
  // A recall run's point is accuracy against distance, which the training table lacks.
  if (HasRecallScores(cases))
    text += "\n## Recall accuracy against distance\n\n" + RenderRecallTable(cases);
  // The trained weights through the pipelines' evaluate_with variants (int8 inference).
  if (HasInferenceComparisons(cases))
    text += "\n## Trained weights through inference variants\n\n" + RenderInferenceTable(cases);
  // Data-parallel pipelines: where their time went, and the model beyond them.
  if (const auto rows = ScalingRows(cases); !rows.empty())
    text += "\n## Data-parallel scaling\n\n" + RenderScalingTable(rows) + "\n" +
            RenderScalingModel(rows);
  return text;
}

// report --format: one row a format. A new format is a row here and its renderer in
// reports/report.h.
struct ReportFormat {
  const char* name;
  std::string (*render)(const RunRecord& run, const std::vector<CaseRecord>& cases);
};
const std::vector<ReportFormat>& ReportFormats() {
  static const std::vector<ReportFormat> formats = {{"md", RenderMarkdownReport},
                                                    {"csv", RenderCsv},
                                                    {"json", RenderJson},
                                                    {"gbench-json", RenderGbenchJson}};
  return formats;
}
const ReportFormat* FindReportFormat(const std::string& name) {
  for (const ReportFormat& format : ReportFormats())
    if (name == format.name) return &format;
  return nullptr;
}
// "md, csv, json or gbench-json".
std::string ReportFormatNames() {
  std::string names;
  const auto& formats = ReportFormats();
  for (size_t i = 0; i < formats.size(); ++i)
    names += (i == 0 ? "" : i + 1 == formats.size() ? " or " : ", ") + std::string(formats[i].name);
  return names;
}

}  // namespace

namespace {

// The report of one run (or gathered group) as `report` renders it.
std::string RenderReportText(const po::variables_map& values, const ReportFormat& renderer,
                             const GatheredRun& selected, const std::string& fit_field) {
  const RunRecord& run = selected.run;
  const auto& cases = selected.cases;
  const std::string& format = values.at("format").as<std::string>();
  if (values.count("phases")) {
    if (format != "md") throw UsageError("report: --phases renders Markdown only; drop --format");
    if (run.kind == kRunKindTraining) throw UsageError("report: --phases needs a benchmark run");
    return RenderPhaseTable(run, cases);
  }
  if (!fit_field.empty()) {
    if (format != "md") throw UsageError("report: --fit renders Markdown only; drop --format");
    if (run.kind == kRunKindTraining) throw UsageError("report: --fit needs a benchmark run");
    try {
      return RenderFitTable(FitComplexity(cases, fit_field), fit_field);
    } catch (const std::invalid_argument& error) {
      throw UsageError(std::string("report: ") + error.what());
    }
  }
  return renderer.render(run, cases);
}

}  // namespace

int RunReport(const std::vector<std::string>& args) {
  RunSelection selection;
  std::string format, out, fit_field;
  po::options_description options(
      "Usage: seqbench report [RUN_ID | --group ID | --latest | --suite NAME | --git REV |\n"
      "                        --label TEXT] [--format md|csv|json|gbench-json] [--fit FIELD]\n"
      "                       [--phases] [--allow-mixed-machines]\n"
      "                       [--out FILE]\n"
      "                       [--db FILE]\n\n"
      "Renders a stored run: Markdown tables (one per mode, dtype and device), CSV or JSON\n"
      "with every field, or Google Benchmark's JSON for its tools/compare.py. Speedup is the\n"
      "ratio of median throughputs (tokens per step / median seconds per step), the one\n"
      "definition every seqbench command uses. --fit seq_len fits, per variant and\n"
      "workload, time ∝ T^k and activation memory ∝ T^k over the run's lengths and prints k\n"
      "with its 95% interval (least squares on logs, Student's t), and the time ratio of\n"
      "every doubling of T with its 95% bootstrap interval. --phases shows where each\n"
      "case's wall time went (setup, check, warmup, timed loop, memory pass, teardown) and\n"
      "the share its timed samples took.\n\nOptions");
  options.add_options()("help,h", "show this help");
  po::options_description hidden;
  po::positional_options_description positional;
  selection.Declare(options, hidden, positional);
  options.add_options()("format", po::value(&format)->default_value("md"),
                        "md, csv, json or gbench-json")("out", po::value(&out),
                                                        "write here instead of standard output")(
      "fit", po::value(&fit_field),
      "fit exponents, and list each doubling's time ratio, against this "
      "workload field (md only)")(
      "phases", "each case's wall time by phase, and its timed samples' share (md only)")(
      "allow-mixed-machines",
      "with --group: shards measured on different machines, a table set per machine");
  const auto values = ParseArguments(args, options, hidden, positional, "report");
  if (!values) return 0;
  RefuseDatabaseOutput(out, selection.db_path);
  const ReportFormat* renderer = FindReportFormat(format);
  if (renderer == nullptr) {
    throw UsageError("report: --format must be " + ReportFormatNames() + ", got '" + format + "'");
  }
  std::unique_ptr<Store> store;
  const auto parts = selection.SelectRuns(
      *values, store, "report",
      values->count("allow-mixed-machines") ? MixedMachines::kSplit : MixedMachines::kRefuse);
  if (parts.size() == 1) {
    WriteOutput(RenderReportText(*values, *renderer, parts[0], fit_field), out);
    return 0;
  }
  if (format != "md")
    throw UsageError("report: a group split by machine renders Markdown only; drop --format");
  std::string text;
  for (const GatheredRun& part : parts) {  // a heading per machine, its shards' tables
    text += "## " + escape::MarkdownText(RunName(part.run)) + ": " +
            escape::MarkdownText(MachineText(MachineOf(part.run))) + "\n\n" +
            RenderReportText(*values, *renderer, part, fit_field) + "\n";
  }
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
      "and for a plot instead of tables: plot=runtime|memory|tokens_per_s|speedup|recompute,\n"
      "x=seq_len|batch|layers|memory, over=VARIANT (speedup), file=PATH.svg (relative to the\n"
      "README).\n"
      "Training runs (seqbench train) render their pipeline table, or with\n"
      "plot=loss|validation_loss|loss_difference (with over=PIPELINE) and x=step|time their\n"
      "loss curves; pipelines=A,B,... picks\n"
      "and orders the pipelines shown. gate=PREFIX renders the gate's measured power from\n"
      "runs labelled 'PREFIX base' and 'PREFIX xFACTOR' (ci/measure_gate). fit=FIELD renders\n"
      "the exponents of time and memory against FIELD fitted per variant (report --fit).\n"
      "history=METRIC renders the change points `seqbench history` finds in the suite's\n"
      "series. A run group (run --group) renders as one run once all its shards are in.\n"
      "With several --db (e.g. results/published/cpu.db and gpu.db), each section comes\n"
      "from the first database that has a matching run, or db=FILE names the one (its\n"
      "file name).\n\n"
      "Options");
  options.add_options()("help,h", "show this help");
  DeclareDatabases(options, db_paths);
  po::options_description hidden;
  hidden.add_options()("readme", po::value(&readme_path));
  po::positional_options_description positional;
  positional.add("readme", 1);
  const auto values = ParseArguments(args, options, hidden, positional, "readme");
  if (!values) return 0;
  if (readme_path.empty()) throw UsageError("readme: give the Markdown file to update");
  for (const std::string& db_path : db_paths) RefuseDatabaseOutput(readme_path, db_path);
  const std::string text = ReadFile(readme_path, "readme");
  const std::vector<std::unique_ptr<Store>> stores = OpenExistingStores(db_paths, "readme");
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
    std::cout << escape::TerminalText(readme_path, false) << ": up to date\n";
    return 0;
  }
  WriteOutput(updated, readme_path);
  std::cout << escape::TerminalText(readme_path, false) << ": regenerated\n";
  return 0;
}

// `flag` names the option in messages: "compare --threshold".
double ParseThreshold(const std::string& text, const std::string& flag) {
  const std::optional<double> fraction = ParseFraction(text);
  if (!fraction) {
    throw UsageError(flag + " must be a percentage like 5% or a fraction like 0.05, got '" +
                     escape::TerminalText(text) + "'");
  }
  if (text.back() != '%' && *fraction >= 1) {
    throw UsageError(flag + " " + text + " would be " + FormatSignificant(*fraction * 100) +
                     "%; write " + text + "% or " + FormatSignificant(*fraction / 100) + " for " +
                     text + " percent");
  }
  return *fraction;
}

namespace {

json RunSummaryJson(const RunRecord& run) {
  return {{"run_id", run.run_id},
          {"uuid", run.uuid},
          {"suite", run.suite_name},
          {"git_sha", run.Environment("git_sha")},
          {"label", run.label},
          {"group", run.group},  // with shard "": the run is that group gathered
          {"shard", run.shard},
          {"started_at", run.started_at},
          {"cpu_model", run.Environment("cpu_model")}};
}

// Machine facts that make two runs' times incomparable (hostnames differ between CI VMs of
// one type; these do not).
std::vector<std::string> MachineDifferences(const RunRecord& base, const RunRecord& next) {
  std::vector<std::string> differences;
  for (const std::string& key : MachineKeysFor(MachineKeyUse::kHardware)) {
    const std::string a = base.Environment(key), b = next.Environment(key);
    // A CPU-only build records no GPU: that says nothing about the machine.
    if (key == "gpu_name" && (a.empty() || b.empty())) continue;
    if (a != b) differences.push_back(key + " " + a + " -> " + b);
  }
  return differences;
}

// The gate `compare --gate` asks for; "auto" is counts when both runs were counted, else
// time. A counted gate on runs whose fingerprints differ is refused (exit 2).
Gate ResolveGate(const std::string& text, const RunRecord& base, const RunRecord& next,
                 const std::vector<CaseRecord>& base_cases,
                 const std::vector<CaseRecord>& new_cases) {
  const bool counted = HasCounts(base_cases) && HasCounts(new_cases);
  const std::optional<Gate> asked =
      text == "auto" ? std::optional<Gate>(counted ? Gate::kCounts : Gate::kTime) : ParseGate(text);
  if (!asked)
    throw UsageError("compare: --gate must be auto, time, counts or both, got '" + text + "'");
  if (*asked == Gate::kTime) return *asked;
  for (const RunRecord* run : {&base, &next}) {
    if (!HasCounts(run == &base ? base_cases : new_cases))
      throw UsageError("compare: --gate " + GateName(*asked) + ": run " +
                       std::to_string(run->run_id) +
                       " has no counted instructions (run it with --count instructions)");
  }
  const std::vector<std::string> differences = CountFingerprintDifferences(base, next);
  if (!differences.empty()) {
    std::string message = "compare: the runs' counts are not comparable; they ran other code:";
    for (const auto& difference : differences) message += "\n  " + difference;
    throw UsageError(message +
                     "\nre-count the base on this machine (ci/publish counts), or judge time "
                     "with --gate time");
  }
  return *asked;
}

json ComparisonJson(const CaseComparison& c, Gate gate) {
  const auto maybe = [](const std::optional<double>& value) {
    return value ? json(*value) : json(nullptr);
  };
  json entry = {{"case", c.case_key}, {"verdict", c.verdict}, {"note", c.note}};
  entry["base_median_s"] = c.base_median_s > 0 ? json(c.base_median_s) : json(nullptr);
  entry["new_median_s"] = c.new_median_s > 0 ? json(c.new_median_s) : json(nullptr);
  entry["ratio"] = maybe(TimeRatio(c));
  entry["interval"] =
      c.interval ? json{{"low", c.interval->low}, {"high", c.interval->high}} : json(nullptr);
  entry["memory_ratio"] = maybe(c.memory_ratio);
  entry["memory_verdict"] = c.memory_verdict;
  entry["count_ratio"] = maybe(c.count_ratio);
  entry["count_range"] = c.count_range
                             ? json{{"low", c.count_range->low}, {"high", c.count_range->high}}
                             : json(nullptr);
  entry["count_spread"] = c.count_ratio ? json(c.count_spread) : json(nullptr);
  entry["count_nondeterministic"] = c.count_nondeterministic;
  entry["count_verdict"] = c.count_verdict;
  entry["regression"] = IsRegression(c, gate);
  json moved = json::array();
  for (const FunctionMove& f : c.moved_functions)
    moved.push_back({{"function", f.function},
                     {"base_instructions", f.base},
                     {"new_instructions", f.next},
                     {"share", f.share}});
  entry["moved_functions"] = moved;
  return entry;
}

}  // namespace

namespace {

// `compare`'s flags, as given.
struct CompareFlags {
  std::string base_db, threshold_text, count_threshold_text, format, base_latest_on, gate_text;
  std::string base_group;  // --base-group: the base is a run group
  int64_t base_id = 0;
  RunSelection selection;  // the new run
  CompareSettings settings;
  po::variables_map values;
  bool Given(const char* name) const { return values.count(name) > 0; }
};

constexpr char kCompareUsage[] =
    "Usage: seqbench compare BASE_RUN NEW_RUN [OPTIONS]\n"
    "       seqbench compare BASE_RUN (--latest | --suite NAME | --git REV | --label TEXT)\n"
    "       seqbench compare --base-latest-on BRANCH-or-LABEL (NEW_RUN | --latest ...)\n"
    "       seqbench compare --base-group ID --group ID   (run groups: shards gathered)\n\n"
    "Matches the two runs' cases by their identity (variant, options and every workload\n"
    "field, model sizes included; cases on one side only are listed) and judges each on\n"
    "the ratio of median runtimes (new / base, the inverse of the speedup, which is the\n"
    "ratio of median throughputs) and its bootstrap confidence interval from the\n"
    "repetition samples (at least 3 a side). Verdicts: slower (the whole interval above\n"
    "1 + threshold), faster (below 1 - threshold), same (inside both), ambiguous (it\n"
    "reaches across a limit, or too few samples). Peak memory is judged against the same\n"
    "threshold. Runs of different suites or machines are refused unless allowed.\n\n"
    "Counted runs (run --count instructions) are also judged on instructions per step\n"
    "(each side the median of its counted steps), on the range of the ratios of step k\n"
    "to step k against --count-threshold: more, fewer, same, ambiguous, or not counted\n"
    "(counted in the base only: the counts gate fails it; a case counted on neither side\n"
    "is judged on time); a case whose steps disagree past a tenth of it is flagged\n"
    "nondeterministic. --gate\n"
    "picks what fails: counts compare across machines of one fingerprint (valgrind, the\n"
    "pinning, the OpenBLAS core and ATen capability the counting child saw, LibTorch,\n"
    "compiler) and are refused with exit 2 where it differs. Exits 1 when the gate finds a\n"
    "case slower (time), with more instructions (counts), or larger, 2 on bad input.\n\n"
    "Options";

// Parses and checks the flags; false after --help.
bool ParseCompareFlags(const std::vector<std::string>& args, CompareFlags& f) {
  po::options_description options(kCompareUsage);
  options.add_options()("help,h", "show this help");
  po::options_description hidden;
  po::positional_options_description positional;
  hidden.add_options()("base", po::value(&f.base_id));
  positional.add("base", 1);
  f.selection.Declare(options, hidden, positional);  // NEW_RUN: the second positional
  options.add_options()("base-db", po::value(&f.base_db), "database of the base run, if another")(
      "base-group", po::value(&f.base_group),
      "base: a run group (run --group), its shards gathered as one run")(
      "base-latest-on", po::value(&f.base_latest_on),
      "base: the newest complete run of the new run's suite with this --label, or else from a "
      "commit on this branch's history (CI: --base-latest-on main)")(
      "threshold", po::value(&f.threshold_text)->default_value("5%"),
      "smallest change that counts: 5% or 0.05")(
      "confidence", po::value(&f.settings.confidence)->default_value(0.95, "0.95"),
      "of the ratio's bootstrap interval, in (0, 1)")(
      "gate", po::value(&f.gate_text)->default_value("auto"),
      "what sets the exit status: time, counts (instructions per step, from run --count), "
      "both, or auto (counts when both runs were counted, else time); memory always")(
      "count-threshold", po::value(&f.count_threshold_text)->default_value("1%"),
      "smallest change of counted instructions that counts: 1% or 0.01")(
      "format", po::value(&f.format)->default_value("md"),
      "md (a table), json (for machines: per-case intervals, a geometric-mean summary) or pr "
      "(one pull-request comment: verdict first, moved cases and functions, all cases "
      "collapsed; under GitHub's 65,536 characters)")(
      "allow-different-suites", "judge runs of different suites on the cases they share")(
      "allow-different-machines", "judge runs from different CPUs or GPUs");
  auto values = ParseArguments(args, options, hidden, positional, "compare");
  if (!values) return false;
  f.values = std::move(*values);
  if (f.format != "md" && f.format != "json" && f.format != "pr")
    throw UsageError("compare: --format must be md, json or pr, got '" + f.format + "'");
  f.settings.threshold = ParseThreshold(f.threshold_text, "compare --threshold");
  f.settings.count_threshold = ParseThreshold(f.count_threshold_text, "compare --count-threshold");
  if (!(f.settings.confidence > 0 && f.settings.confidence < 1))
    throw UsageError("compare: --confidence must lie in (0, 1), e.g. 0.95");
  // With --base-latest-on, the one run id given is the new run.
  if (f.Given("base-latest-on") && f.Given("base")) {
    if (f.Given("run"))
      throw UsageError("compare: --base-latest-on picks the base; give only NEW_RUN");
    f.selection.run_id = f.base_id;
    f.base_id = 0;
  }
  if (f.Given("base-group") && f.Given("base") && !f.Given("run")) {
    f.selection.run_id = f.base_id;  // the one id given is the new run
    f.base_id = 0;
  }
  const int bases = (f.base_id > 0 ? 1 : 0) + (f.Given("base-latest-on") ? 1 : 0) +
                    (f.Given("base-group") ? 1 : 0);
  if (bases > 1) throw UsageError("compare: give one of BASE_RUN, --base-group, --base-latest-on");
  const bool new_given = f.selection.run_id > 0 || f.Given("latest") ||
                         !f.selection.filter.empty() || !f.selection.group.empty();
  if (!new_given || bases == 0)
    throw UsageError(
        "compare: give BASE_RUN and NEW_RUN ids (or BASE_RUN --latest, or --base-latest-on "
        "BRANCH)");
  const int news = (f.selection.run_id > 0 ? 1 : 0) + (f.selection.group.empty() ? 0 : 1) +
                   (f.Given("latest") || !f.selection.filter.empty() ? 1 : 0);
  if (news > 1)
    throw UsageError("compare: give one of NEW_RUN, --group, or --latest/--suite/--git/--label");
  return true;
}

// The two runs compared, each with its store's cases.
struct ComparedRuns {
  std::unique_ptr<Store> new_store, base_store;
  RunRecord base, next;
  std::vector<CaseRecord> base_cases, new_cases;
};

ComparedRuns ResolveComparedRuns(const CompareFlags& f) {
  ComparedRuns runs;
  runs.new_store = OpenExistingStore(f.selection.db_path, "compare");
  if (!f.base_db.empty()) runs.base_store = OpenExistingStore(f.base_db, "compare");
  const Store& base_source = runs.base_store ? *runs.base_store : *runs.new_store;
  const int64_t avoid = runs.base_store ? 0 : f.base_id;  // NEW is not BASE in one store
  if (!f.selection.group.empty()) {
    GatheredRun group = GatherGroupOrFail(*runs.new_store, f.selection.group, "compare")[0];
    runs.next = std::move(group.run);
    runs.new_cases = std::move(group.cases);
  } else {
    runs.next = f.selection.run_id > 0
                    ? FindRunOrFail(*runs.new_store, f.selection.run_id, "compare")
                    : LatestRun(*runs.new_store, f.selection.filter, "compare", avoid);
    runs.new_cases = runs.new_store->Cases(runs.next.run_id);
  }
  if (!f.base_group.empty()) {
    GatheredRun group = GatherGroupOrFail(base_source, f.base_group, "compare")[0];
    runs.base = std::move(group.run);
    runs.base_cases = std::move(group.cases);
  } else {
    runs.base = f.base_id > 0 ? FindRunOrFail(base_source, f.base_id, "compare")
                              : LatestRunOn(base_source, f.base_latest_on, runs.next.suite_name,
                                            runs.base_store ? 0 : runs.next.run_id, "compare");
    runs.base_cases = base_source.Cases(runs.base.run_id);
  }
  for (const RunRecord* run : {&runs.base, &runs.next}) {
    if (run->status != "complete") {
      std::cerr << "seqbench: warning: run " << run->run_id << " is "
                << escape::TerminalText(run->status, false)
                << ": only its stored cases are compared\n";
    }
  }
  return runs;
}

// Refuses runs of other suites or machines unless allowed; returns what the reader is
// warned of.
std::vector<std::string> CheckComparable(const CompareFlags& f, const ComparedRuns& runs,
                                         Gate gate) {
  const RunRecord &base = runs.base, &next = runs.next;
  if (base.suite_name != next.suite_name && !f.Given("allow-different-suites")) {
    throw UsageError("compare: run " + std::to_string(base.run_id) + " is of suite '" +
                     base.suite_name + "' and run " + std::to_string(next.run_id) + " of '" +
                     next.suite_name +
                     "'; pass --allow-different-suites to judge the cases they share");
  }
  // Counts on a matching fingerprint compare across machines; times do not.
  if (const auto machines = MachineDifferences(base, next);
      !machines.empty() && gate != Gate::kCounts && !f.Given("allow-different-machines")) {
    std::string message = "compare: the runs were measured on different machines:";
    for (const auto& difference : machines) message += "\n  " + difference;
    throw UsageError(message + "\npass --allow-different-machines to judge them anyway");
  }
  std::vector<std::string> notes;
  if (base.suite_name != next.suite_name)
    notes.push_back("different suites: " + base.suite_name + " and " + next.suite_name);
  else if (base.suite_hash != next.suite_hash)
    notes.push_back("suite '" + next.suite_name + "' was edited between the runs");
  for (const auto& difference : EnvironmentDifferences(base, next))
    notes.push_back("environments differ: " + difference);
  return notes;
}

// The verdicts counted, and whether the gate fails.
struct CompareSummary {
  std::map<std::string, int> verdicts, count_verdicts;
  bool regression = false;
  std::optional<double> geometric_mean, count_mean;
  int64_t timed = 0, counted_cases = 0;
};

CompareSummary Summarize(const std::vector<CaseComparison>& comparisons, Gate gate) {
  CompareSummary summary;
  for (const CaseComparison& c : comparisons) {
    summary.regression = summary.regression || IsRegression(c, gate);
    ++summary.verdicts[c.verdict];
    if (!c.count_verdict.empty()) ++summary.count_verdicts[c.count_verdict];
  }
  const GeometricMean time = GeometricMeanOf(comparisons, TimeRatio);
  const GeometricMean counts = GeometricMeanOf(comparisons, CountRatio);
  summary.geometric_mean = time.value;
  summary.timed = time.count;
  summary.count_mean = counts.value;
  summary.counted_cases = counts.count;
  return summary;
}

void PrintCompareJson(const ComparedRuns& runs, const CompareSettings& settings, Gate gate,
                      const std::vector<std::string>& notes,
                      const std::vector<CaseComparison>& comparisons, const CompareSummary& s) {
  json cases = json::array();
  for (const CaseComparison& c : comparisons) cases.push_back(ComparisonJson(c, gate));
  const auto maybe = [](const std::optional<double>& value) {
    return value ? json(*value) : json(nullptr);
  };
  const json document = {{"base", RunSummaryJson(runs.base)},
                         {"new", RunSummaryJson(runs.next)},
                         {"gate", GateName(gate)},
                         {"threshold", settings.threshold},
                         {"count_threshold", settings.count_threshold},
                         {"confidence", settings.confidence},
                         {"notes", notes},
                         {"cases", cases},
                         {"summary",
                          {{"verdicts", s.verdicts},
                           {"count_verdicts", s.count_verdicts},
                           {"timed_cases", s.timed},
                           {"counted_cases", s.counted_cases},
                           {"geometric_mean_ratio", maybe(s.geometric_mean)},
                           {"geometric_mean_count_ratio", maybe(s.count_mean)},
                           {"regression", s.regression}}}};
  std::cout << escape::DumpJson(document) << "\n";
}

void PrintCompareTable(const ComparedRuns& runs, const CompareSettings& settings, Gate gate,
                       const std::vector<std::string>& notes,
                       const std::vector<CaseComparison>& comparisons, const CompareSummary& s) {
  for (const auto& note : notes)
    std::cerr << "seqbench: warning: " << escape::TerminalText(note) << "\n";
  const bool counted = HasCounts(runs.base_cases) && HasCounts(runs.new_cases);
  std::cout << "compare " << escape::TerminalText(RunName(runs.base), false) << " (base) with "
            << escape::TerminalText(RunName(runs.next), false) << " (new), suite "
            << escape::TerminalText(escape::MarkdownText(runs.next.suite_name), false)
            << "; gate: " << GateName(gate) << "\n\n"
            << RenderCompareTable(comparisons, counted) << "\n";
  if (const std::string moved = RenderMovedFunctions(comparisons); !moved.empty())
    std::cout << moved << "\n";
  for (const auto& [verdict, count] : s.verdicts) std::cout << verdict << ": " << count << "  ";
  if (s.geometric_mean) {
    std::cout << "\ngeometric mean of the ratios: " << FormatSignificant(*s.geometric_mean, 4)
              << " over " << s.timed << " timed case(s)";
  }
  if (s.count_mean) {
    std::cout << "\ninstructions: ";
    for (const auto& [verdict, count] : s.count_verdicts)
      std::cout << verdict << ": " << count << "  ";
    std::cout << "geometric mean " << FormatSignificant(*s.count_mean, 5) << " over "
              << s.counted_cases << " counted case(s), threshold "
              << FormatSignificant(settings.count_threshold * 100, 3) << "%";
  }
  std::cout << "\n"
            << (s.regression ? "REGRESSION beyond the threshold" : "no regression") << " (gate "
            << GateName(gate) << (gate == Gate::kCounts ? "; time is advice" : "") << ")\n";
}

// `--format pr`: one pull-request comment on stdout.
void PrintPullRequestComment(const ComparedRuns& runs, const CompareSettings& settings, Gate gate,
                             const std::vector<std::string>& notes,
                             const std::vector<CaseComparison>& comparisons) {
  // "run 3 at d2fa1edf25f7-dirty": run ids repeat across the two databases, commits do not.
  const auto name = [](const RunRecord& run) {
    const std::string sha = run.Environment("git_sha").substr(0, 12);
    return RunName(run) + (sha.empty() ? "" : " at " + sha) +
           (run.Environment("git_dirty") == "true" ? "-dirty" : "");
  };
  PullRequestContext context;
  context.base_name = name(runs.base);
  context.new_name = name(runs.next);
  context.suite = runs.next.suite_name;
  context.gate = gate;
  context.threshold = settings.threshold;
  context.count_threshold = settings.count_threshold;
  context.counted = HasCounts(runs.base_cases) && HasCounts(runs.new_cases);
  context.notes = notes;
  std::cout << RenderPullRequestComment(context, comparisons);
}

}  // namespace

int RunCompare(const std::vector<std::string>& args) {
  CompareFlags f;
  if (!ParseCompareFlags(args, f)) return 0;
  const ComparedRuns runs = ResolveComparedRuns(f);
  const Gate gate = ResolveGate(f.gate_text, runs.base, runs.next, runs.base_cases, runs.new_cases);
  std::vector<std::string> notes = CheckComparable(f, runs, gate);
  CompareSettings settings = f.settings;
  settings.paired = IsAbPair(runs.base, runs.next);
  if (settings.paired)
    notes.push_back("an A/B pair (seqbench ab): each case judged on the ratios of its rounds");
  const auto comparisons = CompareCases(runs.base_cases, runs.new_cases, settings);
  const CompareSummary summary = Summarize(comparisons, gate);
  if (f.format == "json")
    PrintCompareJson(runs, settings, gate, notes, comparisons, summary);
  else if (f.format == "pr")
    PrintPullRequestComment(runs, settings, gate, notes, comparisons);
  else
    PrintCompareTable(runs, settings, gate, notes, comparisons, summary);
  return summary.regression ? 1 : 0;
}

int RunCheck(const std::vector<std::string>& args) {
  RunSelection selection;
  po::options_description options(
      "Usage: seqbench check [RUN_ID | --group ID | --latest | --suite NAME | --git REV |\n"
      "                       --label TEXT]\n"
      "                      [--db FILE]\n\n"
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
  const GatheredRun selected = selection.SelectRun(*values, store, "check");
  const RunRecord& run = selected.run;
  const auto& cases = selected.cases;
  if (run.status != "complete") {
    throw UsageError("check: run " + std::to_string(run.run_id) + " is " + run.status +
                     "; finish it with seqbench run " + run.suite_path + " --resume " +
                     std::to_string(run.run_id));
  }
  if (run.expectations.empty()) {
    throw UsageError("check: suite '" + run.suite_name + "' has no [[expect]] entries to check");
  }
  const auto outcomes = run.kind == kRunKindTraining
                            ? EvaluateTrainingExpectations(run.expectations, cases,
                                                           LoadCurves(*store, run.run_id, cases))
                            : EvaluateExpectations(run.expectations, cases, &run);
  MarkdownTable table({"", "expectation", "measured"});
  int failed = 0;
  for (const ExpectationOutcome& outcome : outcomes) {
    table.AddRow({outcome.held ? "✓" : "✗", outcome.expectation, outcome.measured});
    failed += outcome.held ? 0 : 1;
  }
  // Markdown (a CI job's summary shows it), so the suite's name is Markdown text, which
  // VisibleText also keeps free of terminal control sequences.
  std::cout << "check of " << escape::MarkdownText(RunName(run)) << " (suite "
            << escape::MarkdownText(run.suite_name) << ")\n\n"
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
      "Usage: seqbench plot [RUN_ID | --group ID | --latest | --suite NAME | --git REV |\n"
      "                      --label TEXT]\n"
      "                     --x seq_len|batch|layers --y runtime|memory|tokens_per_s|speedup\n"
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
                        "seq_len, batch, layers, or memory (activation memory: one line per "
                        "registered variant across its options, e.g. --y recompute)")(
      "y", po::value(&request.y)->default_value("runtime"),
      "runtime, memory, tokens_per_s, speedup or recompute")(
      "over", po::value(&request.over), "with --y speedup: the variant it is relative to")(
      "out", po::value(&request.output), "the SVG file (default: run<ID>_<y>.svg)");
  const auto values = ParseArguments(args, options, hidden, positional, "plot");
  if (!values) return 0;
  std::unique_ptr<Store> store;
  const GatheredRun selected = selection.SelectRun(*values, store, "plot");
  const RunRecord& run = selected.run;
  const auto& cases = selected.cases;
  // A group id is a file name's characters (IsGroupId).
  const std::string stem = RunName(run).rfind("group", 0) == 0 ? "group-" + run.group
                                                               : "run" + std::to_string(run.run_id);
  if (request.output.empty()) request.output = stem + "_" + request.y + ".svg";
  RefuseDatabaseOutput(request.output, selection.db_path);
  request.title = run.suite_name + ", " + RunName(run);
  try {
    if (run.kind == kRunKindTraining) {
      LossPlotRequest loss_request;
      loss_request.y = values->count("y") && !values->at("y").defaulted() ? request.y : "loss";
      loss_request.x = values->count("x") && !values->at("x").defaulted() ? request.x : "step";
      loss_request.title = request.title;
      loss_request.over = request.over;
      loss_request.output =
          values->count("out") ? request.output : stem + "_" + loss_request.y + ".svg";
      RenderLossPlot(cases, LoadCurves(*store, run.run_id, cases), loss_request);
      std::cout << escape::TerminalText(loss_request.output, false) << "\n";
      return 0;
    }
    RenderPlot(cases, request);
  } catch (const std::invalid_argument& error) {
    throw UsageError(std::string("plot: ") + error.what());
  }
  std::cout << escape::TerminalText(request.output, false) << "\n";
  return 0;
}

}  // namespace seqbench::cli
