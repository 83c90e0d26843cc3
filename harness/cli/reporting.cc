// The report commands: `report`, `readme`, `compare`, `check` and `plot`. They read the
// results store (and, for `check`, the suite text stored with the run) and never run a
// model.
#include <boost/program_options.hpp>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <regex>
#include <sstream>

#include "harness/cli/command.h"
#include "harness/suite.h"
#include "harness/training/training_suite.h"
#include "reports/check.h"
#include "reports/compare.h"
#include "reports/format.h"
#include "reports/markdown.h"
#include "reports/plot.h"
#include "reports/readme.h"
#include "reports/report.h"
#include "reports/training.h"

namespace po = boost::program_options;

namespace seqbench::cli {
namespace {

std::string BaselineOf(const RunRecord& run) {
  const std::regex pattern("^\\s*baseline\\s*=\\s*\"([^\"]+)\"", std::regex::multiline);
  std::smatch match;
  return std::regex_search(run.suite_text, match, pattern) ? match[1].str() : "baseline";
}

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

namespace {

// The cases named in `list` ("a,b,c"), in that order; a name no case has is an error.
std::vector<CaseRecord> SelectPipelines(const std::vector<CaseRecord>& cases,
                                        const std::string& list) {
  std::vector<CaseRecord> selected;
  std::istringstream names(list);
  std::string name;
  while (std::getline(names, name, ',')) {
    const auto it = std::find_if(cases.begin(), cases.end(),
                                 [&](const CaseRecord& c) { return c.variant_name == name; });
    if (it == cases.end()) throw ReadmeError("pipelines=: no pipeline '" + name + "' in the run");
    selected.push_back(*it);
  }
  return selected;
}

TrainingCurves CurvesOf(const Store& store, int64_t run_id, const std::vector<CaseRecord>& cases) {
  TrainingCurves curves;
  for (const CaseRecord& c : cases) curves[c.case_key] = store.TrainingSteps(run_id, c.case_key);
  return curves;
}

}  // namespace

int RunReport(const std::vector<std::string>& args) {
  std::string db_path, suite, format, out;
  int64_t run_id = 0;
  po::options_description options(
      "Usage: seqbench report [RUN_ID | --latest] [--suite NAME] [--format "
      "md|csv|json|gbench-json]\n"
      "                       [--out FILE] [--db FILE]\n\n"
      "Renders a stored run: Markdown tables (one per mode, dtype and device), CSV or JSON\n"
      "with every field, or Google Benchmark's JSON for its tools/compare.py.\n\nOptions");
  options.add_options()("help,h", "show this help")(
      "db", po::value(&db_path)->default_value("results/seqbench.db"), "results database")(
      "latest", "the latest complete run")("suite", po::value(&suite),
                                           "with --latest: of this suite")(
      "format", po::value(&format)->default_value("md"), "md, csv, json or gbench-json")(
      "out", po::value(&out), "write here instead of standard output");
  po::options_description hidden;
  hidden.add_options()("run", po::value(&run_id));
  po::positional_options_description positional;
  positional.add("run", 1);
  const auto values = ParseArguments(args, options, hidden, positional, "report");
  if (!values) return 0;
  if (format != "md" && format != "csv" && format != "json" && format != "gbench-json") {
    throw UsageError("report: --format must be md, csv, json or gbench-json, got '" + format + "'");
  }
  const auto store = OpenExistingStore(db_path, "report");
  const RunRecord run = ResolveRun(*store, run_id, values->count("latest"), suite, "report");
  const auto cases = store->Cases(run.run_id);
  std::string text;
  if (format == "md") {
    text = training::IsTrainingSuiteText(run.suite_text)
               ? "# Training run " + std::to_string(run.run_id) + " (suite " + run.suite_name +
                     ", " + run.started_at + ")\n\n" + RenderTrainingTable(cases)
               : RenderMarkdown(run, cases, BaselineOf(run));
  }
  if (format == "csv") text = RenderCsv(run, cases);
  if (format == "json") text = RenderJson(run, cases);
  if (format == "gbench-json") text = RenderGbenchJson(run, cases);
  WriteOutput(text, out);
  return 0;
}

int RunReadme(const std::vector<std::string>& args) {
  std::string readme_path, db_path;
  po::options_description options(
      "Usage: seqbench readme README.md [--db FILE]\n\n"
      "Regenerates every section between <!-- seqbench:begin ATTRS --> and\n"
      "<!-- seqbench:end --> from the latest complete run that matches, and leaves the\n"
      "rest of the file byte for byte. Attributes: suite=NAME (required); any workload field\n"
      "as a filter (device=cpu, batch=1, mode=train, ...);\n"
      "and for a plot instead of tables: plot=runtime|memory|tokens_per_s|speedup,\n"
      "x=seq_len|batch|layers, over=VARIANT (speedup), file=PATH.svg (relative to the README).\n"
      "Training runs (seqbench train) render their pipeline table, or with\n"
      "plot=loss|validation_loss|loss_difference (with over=PIPELINE) and x=step|time their\n"
      "loss curves; pipelines=A,B,... picks\n"
      "and orders the pipelines shown.\n\n"
      "Options");
  options.add_options()("help,h", "show this help")(
      "db", po::value(&db_path)->default_value("results/seqbench.db"), "results database");
  po::options_description hidden;
  hidden.add_options()("readme", po::value(&readme_path));
  po::positional_options_description positional;
  positional.add("readme", 1);
  const auto values = ParseArguments(args, options, hidden, positional, "readme");
  if (!values) return 0;
  if (readme_path.empty()) throw UsageError("readme: give the Markdown file to update");
  const std::string text = ReadFile(readme_path, "readme");
  const auto store = OpenExistingStore(db_path, "readme");
  const auto runs = store->Runs();
  const std::filesystem::path readme_dir = std::filesystem::path(readme_path).parent_path();

  const SectionRenderer render = [&](const ReadmeSection& section) -> std::string {
    const auto attribute = [&](const std::string& key) {
      const auto it = section.attributes.find(key);
      return it == section.attributes.end() ? std::string() : it->second;
    };
    const std::string suite = attribute("suite");
    const std::string device = attribute("device");
    if (suite.empty()) throw ReadmeError("the section needs suite=NAME");
    for (auto it = runs.rbegin(); it != runs.rend(); ++it) {
      if (it->status != "complete" || it->suite_name != suite) continue;
      // Attributes that are not the section's own are workload filters, e.g. batch=1.
      std::map<std::string, std::string> where;
      for (const auto& [key, value] : section.attributes) {
        if (key != "suite" && key != "plot" && key != "x" && key != "over" && key != "file" &&
            key != "pipelines") {
          where[key] = value;
        }
      }
      std::vector<CaseRecord> cases;
      for (CaseRecord& c : store->Cases(it->run_id)) {
        const bool selected = std::all_of(where.begin(), where.end(), [&](const auto& item) {
          return CaseField(c, item.first) == item.second;
        });
        if (selected) cases.push_back(std::move(c));
      }
      if (!attribute("pipelines").empty()) cases = SelectPipelines(cases, attribute("pipelines"));
      if (cases.empty()) continue;
      const RunRecord run = *store->FindRun(it->run_id);
      const bool training_run = training::IsTrainingSuiteText(run.suite_text);
      if (attribute("plot").empty()) {
        return training_run ? RenderTrainingTable(cases)
                            : RenderMarkdown(run, cases, BaselineOf(run));
      }
      const std::string file = attribute("file");
      if (file.empty()) throw ReadmeError("a plot section needs file=PATH.svg");
      const std::string output = (readme_dir / file).string();
      const std::string title = suite + " (" + (device.empty() ? "all devices" : device) +
                                "), run " + std::to_string(run.run_id) + ", " +
                                run.started_at.substr(0, 10);
      std::filesystem::create_directories(std::filesystem::path(output).parent_path());
      const std::string y = attribute("plot");
      std::string x = attribute("x");
      try {
        if (training_run) {  // loss curves from the training_steps table
          LossPlotRequest request;
          request.x = x = x.empty() ? "step" : x;
          request.y = y;
          request.over = attribute("over");
          request.title = title;
          request.output = output;
          RenderLossPlot(cases, CurvesOf(*store, run.run_id, cases), request);
        } else {
          PlotRequest request;
          request.x = x = x.empty() ? "seq_len" : x;
          request.y = y;
          request.over = attribute("over");
          request.title = title;
          request.output = output;
          RenderPlot(cases, request);
        }
      } catch (const std::invalid_argument& error) {
        throw ReadmeError(error.what());
      }
      return "![" + y + " against " + x + ": " + title + "](" + file + ")\n";
    }
    throw ReadmeError("no complete run of suite '" + suite + "'" +
                      (device.empty() ? "" : " on device '" + device + "'") + " in " + db_path +
                      "; run: seqbench run suites/" + suite + ".toml --db " + db_path);
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

int RunCompare(const std::vector<std::string>& args) {
  std::string db_path, base_db, threshold_text;
  int64_t base_id = 0, new_id = 0;
  CompareSettings settings;
  po::options_description options(
      "Usage: seqbench compare BASE_RUN NEW_RUN [--threshold 5%] [--alpha 0.01] [--db FILE]\n"
      "                        [--base-db FILE]\n\n"
      "Matches the two runs' cases by key and judges each: ratio of median runtimes and a\n"
      "Mann-Whitney U test on the repetition samples (at least 9 a side). Verdicts: faster,\n"
      "slower, same, ambiguous (significant but within the threshold, or too few samples).\n"
      "Peak memory is judged against the same threshold. Exits 1 when any case is slower\n"
      "or larger beyond the threshold.\n\nOptions");
  options.add_options()("help,h", "show this help")(
      "db", po::value(&db_path)->default_value("results/seqbench.db"),
      "database of NEW_RUN (and BASE_RUN)")("base-db", po::value(&base_db),
                                            "database of BASE_RUN, if another")(
      "threshold", po::value(&threshold_text)->default_value("5%"), "smallest change that counts")(
      "alpha", po::value(&settings.alpha)->default_value(0.01), "significance level");
  po::options_description hidden;
  hidden.add_options()("base", po::value(&base_id))("new", po::value(&new_id));
  po::positional_options_description positional;
  positional.add("base", 1).add("new", 1);
  const auto values = ParseArguments(args, options, hidden, positional, "compare");
  if (!values) return 0;
  if (base_id <= 0 || new_id <= 0) throw UsageError("compare: give BASE_RUN and NEW_RUN ids");
  const std::regex percent("([0-9]*\\.?[0-9]+)%?");
  std::smatch match;
  if (!std::regex_match(threshold_text, match, percent)) {
    throw UsageError("compare: --threshold must be a percentage like 5% or 2.5, got '" +
                     threshold_text + "'");
  }
  settings.threshold = std::stod(match[1]) / 100;
  if (!(settings.alpha > 0 && settings.alpha < 1))
    throw UsageError("compare: --alpha must lie in (0, 1)");

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
      {"case", "base median", "new median", "ratio", "p-value", "verdict", "memory", "note"});
  bool regression = false;
  std::map<std::string, int> verdicts;
  for (const CaseComparison& c : comparisons) {
    char ratio[32] = "—", p_value[32] = "—", memory[48] = "—";
    if (c.ratio > 0) std::snprintf(ratio, sizeof(ratio), "%.3f", c.ratio);
    if (c.p_value) std::snprintf(p_value, sizeof(p_value), "%.2g", *c.p_value);
    if (c.memory_ratio)
      std::snprintf(memory, sizeof(memory), "%.3f× %s", *c.memory_ratio, c.memory_verdict.c_str());
    table.AddRow({c.case_key, c.base_median_s > 0 ? FormatDuration(c.base_median_s) : "—",
                  c.new_median_s > 0 ? FormatDuration(c.new_median_s) : "—", ratio, p_value,
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
  std::string db_path;
  int64_t run_id = 0;
  po::options_description options(
      "Usage: seqbench check [RUN_ID | --latest] [--db FILE]\n\n"
      "Evaluates the [[expect]] entries of the suite stored with the run (ratios measured\n"
      "side by side in that run), prints what held, and exits 1 when anything fell "
      "short.\n\nOptions");
  options.add_options()("help,h", "show this help")(
      "db", po::value(&db_path)->default_value("results/seqbench.db"), "results database")(
      "latest", "the latest complete run");
  po::options_description hidden;
  hidden.add_options()("run", po::value(&run_id));
  po::positional_options_description positional;
  positional.add("run", 1);
  const auto values = ParseArguments(args, options, hidden, positional, "check");
  if (!values) return 0;
  const auto store = OpenExistingStore(db_path, "check");
  const RunRecord run = ResolveRun(*store, run_id, values->count("latest"), "", "check");
  if (run.status != "complete") {
    throw UsageError("check: run " + std::to_string(run.run_id) + " is " + run.status +
                     "; finish it with seqbench run " + run.suite_path + " --resume " +
                     std::to_string(run.run_id));
  }
  const bool training_run = training::IsTrainingSuiteText(run.suite_text);
  const std::string stored_path =
      run.suite_path + " (as stored with run " + std::to_string(run.run_id) + ")";
  std::vector<Expectation> suite_expectations;
  try {
    suite_expectations =
        training_run ? training::ParseTrainingSuite(run.suite_text, stored_path).expectations
                     : ParseSuite(run.suite_text, stored_path).expectations;
  } catch (const SuiteError& error) {
    throw UsageError(std::string("check: ") + error.what());
  }
  std::vector<RatioExpectation> expectations;
  for (const Expectation& e : suite_expectations) {
    expectations.push_back({e.what, e.variant, e.over, e.at_least, e.at_most, e.where, e.line});
  }
  if (expectations.empty()) {
    throw UsageError("check: suite '" + run.suite_name + "' has no [[expect]] entries to check");
  }
  const auto cases = store->Cases(run.run_id);
  const auto outcomes = training_run ? EvaluateTrainingExpectations(
                                           expectations, cases, CurvesOf(*store, run.run_id, cases))
                                     : EvaluateExpectations(expectations, cases);
  MarkdownTable table({"", "expectation", "measured"});
  int failed = 0;
  for (const ExpectationOutcome& outcome : outcomes) {
    table.AddRow({outcome.held ? "✓" : "✗", outcome.expectation, outcome.measured});
    failed += outcome.held ? 0 : 1;
  }
  std::cout << "check of run " << run.run_id << " (suite " << run.suite_name << ")\n\n"
            << table.Render() << "\n";
  std::cout << (outcomes.size() - failed) << " held, " << failed << " fell short\n";
  return failed ? 1 : 0;
}

int RunPlot(const std::vector<std::string>& args) {
  std::string db_path;
  int64_t run_id = 0;
  PlotRequest request;
  po::options_description options(
      "Usage: seqbench plot RUN_ID --x seq_len|batch|layers --y "
      "runtime|memory|tokens_per_s|speedup\n"
      "                     [--over VARIANT] [--out FILE.svg] [--db FILE]\n\n"
      "Plots one line per variant through gnuplot (SVG), log axes where the data spans a\n"
      "decade or more. runtime is the median step time; memory the activation memory.\n"
      "For a training run (seqbench train): --y loss|validation_loss --x step|time, one line\n"
      "per pipeline.\n\nOptions");
  options.add_options()("help,h", "show this help")(
      "db", po::value(&db_path)->default_value("results/seqbench.db"), "results database")(
      "x", po::value(&request.x)->default_value("seq_len"), "seq_len, batch or layers")(
      "y", po::value(&request.y)->default_value("runtime"),
      "runtime, memory, tokens_per_s or speedup")(
      "over", po::value(&request.over), "with --y speedup: the variant it is relative to")(
      "out", po::value(&request.output), "the SVG file (default: run<ID>_<y>.svg)");
  po::options_description hidden;
  hidden.add_options()("run", po::value(&run_id));
  po::positional_options_description positional;
  positional.add("run", 1);
  const auto values = ParseArguments(args, options, hidden, positional, "plot");
  if (!values) return 0;
  const auto store = OpenExistingStore(db_path, "plot");
  const RunRecord run = ResolveRun(*store, run_id, false, "", "plot");
  if (request.output.empty())
    request.output = "run" + std::to_string(run.run_id) + "_" + request.y + ".svg";
  request.title = run.suite_name + ", run " + std::to_string(run.run_id);
  const auto cases = store->Cases(run.run_id);
  try {
    if (training::IsTrainingSuiteText(run.suite_text)) {
      LossPlotRequest loss_request;
      loss_request.y = values->count("y") && !values->at("y").defaulted() ? request.y : "loss";
      loss_request.x = values->count("x") && !values->at("x").defaulted() ? request.x : "step";
      loss_request.title = request.title;
      loss_request.over = request.over;
      loss_request.output =
          values->count("out") ? request.output
                               : "run" + std::to_string(run.run_id) + "_" + loss_request.y + ".svg";
      RenderLossPlot(cases, CurvesOf(*store, run.run_id, cases), loss_request);
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
