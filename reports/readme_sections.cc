#include "reports/readme_sections.h"

#include <algorithm>
#include <filesystem>
#include <optional>
#include <set>
#include <sstream>
#include <stdexcept>

#include "base/text.h"
#include "reports/escape/markdown.h"
#include "reports/fit.h"
#include "reports/format.h"
#include "reports/gate.h"
#include "reports/history.h"
#include "reports/plot.h"
#include "reports/report.h"
#include "reports/scaling.h"
#include "reports/training.h"
#include "results/run_group.h"

namespace seqbench {
namespace {

std::string Attribute(const ReadmeSection& section, const std::string& key) {
  const auto it = section.attributes.find(key);
  return it == section.attributes.end() ? std::string() : it->second;
}

// The cases named in `list` ("a,b,c"), in that order; a name no case has is an error.
std::vector<CaseRecord> SelectPipelines(const std::vector<CaseRecord>& cases,
                                        const std::string& list) {
  std::vector<CaseRecord> selected;
  std::istringstream names(list);
  std::string name;
  while (std::getline(names, name, ',')) {
    const auto it = std::find_if(cases.begin(), cases.end(),
                                 [&](const CaseRecord& c) { return c.name() == name; });
    if (it == cases.end()) throw ReadmeError("pipelines=: no pipeline '" + name + "' in the run");
    selected.push_back(*it);
  }
  return selected;
}

}  // namespace

bool IsSectionAttribute(const std::string& name) {
  return name == "suite" || name == "plot" || name == "x" || name == "over" || name == "file" ||
         name == "pipelines" || name == "gate" || name == "fit" || name == "scaling" ||
         name == "recall" || name == "inference" || name == "judge" || name == "label" ||
         name == "history" || name == "db" || name == "gpu" || name == "commits";
}

namespace {

// A listed run with its cases, or its whole group gathered; nullopt for a group with gaps
// (GroupGaps). A group measured on several machines is a ReadmeError: one table must not
// mix their timings.
std::optional<GatheredRun> WholeRun(const Store& store, const RunRecord& listed) {
  if (listed.group.empty()) {
    GatheredRun one{*store.FindRun(listed.run_id), store.Cases(listed.run_id), {}};
    return one;
  }
  if (!GroupGaps(GroupShards(store, listed.group)).empty()) return std::nullopt;
  try {
    return GatherGroup(store, listed.group)[0];
  } catch (const GroupError& error) {
    throw ReadmeError(std::string(error.what()) +
                      " (readme renders one machine's timings per table: `seqbench report "
                      "--allow-mixed-machines` shows them apart)");
  }
}

}  // namespace

SelectedRun SelectRunForSection(const Store& store, const ReadmeSection& section) {
  const std::string suite = Attribute(section, "suite");
  if (suite.empty()) throw ReadmeError("the section needs suite=NAME");
  // Attributes that are not the section's own are workload filters, e.g. batch=1.
  std::map<std::string, std::string> filters;
  for (const auto& [key, value] : section.attributes) {
    if (!IsSectionAttribute(key)) filters[key] = value;
  }
  // label= picks among runs of one suite measured apart on purpose (e.g. with two BLAS
  // cores), as `report --label` does.
  const std::string label = Attribute(section, "label");
  // gpu= keeps one device's table beside another's (an H100's and an H200's runs of one
  // suite): the runs whose recorded gpu_name contains it.
  const std::string gpu = Attribute(section, "gpu");
  const auto runs = store.Runs();
  std::set<std::string> groups_seen;
  for (auto it = runs.rbegin(); it != runs.rend(); ++it) {
    if (it->status != "complete" || it->suite_name != suite) continue;
    if (!label.empty() && it->label != label) continue;
    if (!it->group.empty() && !groups_seen.insert(it->group).second) continue;
    std::optional<GatheredRun> whole = WholeRun(store, *it);
    if (!whole) continue;  // a group still missing shards, as a run still running
    if (!gpu.empty() && whole->run.Environment("gpu_name").find(gpu) == std::string::npos) {
      continue;
    }
    SelectedRun selected;
    for (CaseRecord& c : whole->cases) {
      if (MatchesFilters(c.workload(), filters)) selected.cases.push_back(std::move(c));
    }
    if (selected.cases.empty()) continue;  // before picking pipelines, which would refuse
    if (!Attribute(section, "pipelines").empty()) {
      selected.cases = SelectPipelines(selected.cases, Attribute(section, "pipelines"));
    }
    selected.run = std::move(whole->run);
    return selected;
  }
  const std::string device = Attribute(section, "device");
  throw NoMatchingRun("no complete run of suite '" + suite + "'" +
                      (device.empty() ? "" : " on device '" + device + "'") +
                      (label.empty() ? "" : " labelled '" + label + "'") +
                      (gpu.empty() ? "" : " on a GPU named '*" + gpu + "*'") + " in " +
                      store.path() + "; run: seqbench run suites/" + suite + ".toml --db " +
                      store.path() + (label.empty() ? "" : " --label '" + label + "'"));
}

std::string ResolvePlotFile(const std::string& readme_dir, const std::string& file) {
  namespace fs = std::filesystem;
  if (file.empty()) throw ReadmeError("a plot section needs file=PATH.svg");
  const fs::path relative(file);
  if (relative.is_absolute()) {
    throw ReadmeError("plot file '" + file +
                      "' must be a path relative to the README's folder, not an absolute one");
  }
  if (relative.extension() != ".svg") {
    throw ReadmeError("plot file '" + file + "' must end in .svg");
  }
  // Resolved after `..` and symlinks, compared component by component.
  std::error_code error;
  const fs::path root = fs::weakly_canonical(fs::absolute(readme_dir.empty() ? "." : readme_dir));
  const fs::path target = fs::weakly_canonical(root / relative, error);
  if (error) throw ReadmeError("plot file '" + file + "': " + error.message());
  const auto [root_end, unused] =
      std::mismatch(root.begin(), root.end(), target.begin(), target.end());
  if (root_end != root.end()) {
    throw ReadmeError("plot file '" + file + "' resolves to " + target.string() +
                      ", outside the README's folder " + root.string());
  }
  if (fs::exists(target) && (!fs::is_regular_file(target) || !IsSeqbenchSvg(target.string()))) {
    throw ReadmeError("plot file '" + file + "' exists and is not an SVG that seqbench wrote; " +
                      "move it away or choose another file=");
  }
  return target.string();
}

namespace {

// What an A/B pair is measured against: the suite run alone, as CI runs it (runs labelled
// "<prefix> solo"); "" when there are none.
std::string RenderSoloCost(const Store& store, const std::string& suite,
                           const std::string& prefix) {
  const std::vector<double> solo = RunWallTimes(store, suite, prefix + " solo");
  if (solo.empty()) return "";
  return "\nRuns of the suite alone (label `" + escape::MarkdownText(prefix) + " solo`): median " +
         FormatSignificant(stats::Median(solo), 3) + " s over " + std::to_string(solo.size()) +
         " run(s), from each run's start to its finish as stored.\n";
}

// gate=PREFIX suite=NAME [judge=time|counts|both|paired]: the gate's power over the runs
// ci/measure_gate stored with that label prefix.
std::string RenderGateSection(const Store& store, const ReadmeSection& section,
                              const std::string& prefix) {
  const std::string suite = Attribute(section, "suite");
  if (suite.empty()) throw ReadmeError("a gate section needs suite=NAME");
  const CompareSettings settings;  // compare's defaults: 5%, 95%, counts 1%
  const std::string judge = Attribute(section, "judge");
  try {
    if (judge == "paired") {  // A/B pairs (seqbench ab), judged round by round
      CompareSettings paired = settings;
      paired.paired = true;
      return RenderGateTable(MeasureAbGate(store, suite, prefix, paired), paired) +
             RenderSoloCost(store, suite, prefix);
    }
    const std::optional<Gate> gate = judge.empty() ? Gate::kTime : ParseGate(judge);
    if (!gate) throw ReadmeError("judge= takes time, counts, both or paired, got '" + judge + "'");
    return RenderGateTable(MeasureGate(store, suite, prefix, settings, *gate), settings, *gate);
  } catch (const std::invalid_argument& error) {
    throw NoMatchingRun(error.what());
  }
}

// commits=B..H:expected,... suite=S: the counts gate's verdicts on pairs of real commits.
std::string RenderCommitPairsSection(const Store& store, const ReadmeSection& section,
                                     const std::string& pairs) {
  const std::string suite = Attribute(section, "suite");
  if (suite.empty()) throw ReadmeError("a commits= section needs suite=NAME");
  std::vector<CommitPair> parsed;
  try {
    parsed = ParseCommitPairs(pairs);
  } catch (const std::invalid_argument& error) {
    throw ReadmeError(error.what());
  }
  const CompareSettings settings;  // compare's defaults: counts 1%
  try {
    return RenderCommitPairTable(MeasureCommitPairs(store, suite, parsed, settings), settings);
  } catch (const std::invalid_argument& error) {
    throw NoMatchingRun(error.what());
  }
}

// fit=, scaling=, recall= or inference= over the selected run; "" when the section asks
// for none of them.
std::string RenderAnalysisSection(const ReadmeSection& section, const SelectedRun& selected) {
  const RunRecord& run = selected.run;
  const std::vector<CaseRecord>& cases = selected.cases;
  const bool training_run = run.kind == kRunKindTraining;
  try {
    if (const std::string x = Attribute(section, "fit"); !x.empty()) {
      if (training_run) throw ReadmeError("fit= needs a benchmark run, not a training run");
      return "Fitted over " + escape::MarkdownText(RunName(run)) + " (" + DayOf(run.started_at) +
             "), median step time and activation memory against " + x + ":\n\n" +
             RenderFitTable(FitComplexity(cases, x), x);
    }
    if (const std::string kind = Attribute(section, "scaling"); !kind.empty()) {
      if (!training_run) throw ReadmeError("scaling= needs a training run with data parallelism");
      if (kind == "measured") return RenderScalingTable(ScalingRows(cases));
      if (kind == "model") return RenderScalingModel(ScalingRows(cases));
      throw ReadmeError("scaling=" + kind + ": give scaling=measured or scaling=model");
    }
    if (const std::string what = Attribute(section, "recall"); !what.empty()) {
      if (what != "accuracy") throw ReadmeError("recall=" + what + ": give recall=accuracy");
      if (!training_run)
        throw ReadmeError("recall=accuracy needs a training run, not a benchmark run");
      return RenderRecallTable(cases);
    }
    if (const std::string what = Attribute(section, "inference"); !what.empty()) {
      if (what != "comparison")
        throw ReadmeError("inference=" + what + ": give inference=comparison");
      if (!training_run)
        throw ReadmeError("inference=comparison needs a training run, not a benchmark run");
      return RenderInferenceTable(cases);
    }
  } catch (const std::invalid_argument& error) {
    throw ReadmeError(error.what());
  }
  return "";
}

// plot=Y [x=X over=V file=F device=D]: the plot drawn into F (inside the README's folder),
// and the Markdown image that shows it.
std::string RenderPlotSection(const Store& store, const ReadmeSection& section,
                              const SelectedRun& selected, const std::string& readme_dir) {
  const RunRecord& run = selected.run;
  const std::vector<CaseRecord>& cases = selected.cases;
  const bool training_run = run.kind == kRunKindTraining;
  const std::string file = Attribute(section, "file");
  const std::string output = ResolvePlotFile(readme_dir, file);
  const std::string device = Attribute(section, "device");
  const std::string title = run.suite_name + " (" + (device.empty() ? "all devices" : device) +
                            "), " + RunName(run) + ", " + DayOf(run.started_at);
  std::filesystem::create_directories(std::filesystem::path(output).parent_path());
  const std::string y = Attribute(section, "plot");
  std::string x = Attribute(section, "x");
  try {
    if (training_run && (y == "efficiency" || y == "model_efficiency")) {
      ScalingPlotRequest request;
      request.y = y;
      request.x = x = y == "efficiency" ? (x.empty() ? "bandwidth" : x) : "ranks";
      request.title = title;
      request.output = output;
      RenderScalingPlot(ScalingRows(cases), request);
    } else if (training_run) {  // loss curves from the training_steps table
      LossPlotRequest request;
      request.x = x = x.empty() ? "step" : x;
      request.y = y;
      request.over = Attribute(section, "over");
      request.title = title;
      request.output = output;
      RenderLossPlot(cases, LoadCurves(store, run.run_id, cases), request);
    } else {
      PlotRequest request;
      request.x = x = x.empty() ? "seq_len" : x;
      request.y = y;
      request.over = Attribute(section, "over");
      request.title = title;
      request.output = output;
      RenderPlot(cases, request);
    }
  } catch (const std::invalid_argument& error) {
    throw ReadmeError(error.what());
  }
  return "![" + escape::MarkdownText(y + " against " + x + ": " + title) + "](" +
         escape::MarkdownDestination(file) + ")\n";
}

// history=METRIC suite=NAME: the change points `seqbench history` finds in the suite's
// series in this store (start order: reports/ does not run git).
std::string RenderHistorySection(const Store& store, const ReadmeSection& section,
                                 const std::string& metric) {
  HistoryRequest request;
  request.suite = Attribute(section, "suite");
  if (request.suite.empty()) throw ReadmeError("a history section needs suite=NAME");
  request.metric = FindHistoryMetric(metric);
  if (request.metric == nullptr) throw ReadmeError("history=" + metric + ": no such metric");
  const std::vector<HistorySeries> series = BuildHistory({&store}, request);
  if (series.empty())
    throw NoMatchingRun("no complete benchmark run of suite '" + request.suite + "' in " +
                        store.path());
  return RenderHistorySummary(series, request);
}

}  // namespace

namespace {

std::string RenderSectionFrom(const Store& store, const ReadmeSection& section,
                              const std::string& readme_dir) {
  if (const std::string prefix = Attribute(section, "gate"); !prefix.empty())
    return RenderGateSection(store, section, prefix);
  if (const std::string pairs = Attribute(section, "commits"); !pairs.empty())
    return RenderCommitPairsSection(store, section, pairs);
  if (const std::string metric = Attribute(section, "history"); !metric.empty())
    return RenderHistorySection(store, section, metric);
  const SelectedRun selected = SelectRunForSection(store, section);
  if (std::string analysis = RenderAnalysisSection(section, selected); !analysis.empty())
    return analysis;
  if (!Attribute(section, "plot").empty())
    return RenderPlotSection(store, section, selected, readme_dir);
  return selected.run.kind == kRunKindTraining ? RenderTrainingTable(selected.cases)
                                               : RenderMarkdown(selected.run, selected.cases);
}

}  // namespace

std::string RenderReadmeSection(const Store& store, const ReadmeSection& section,
                                const std::string& readme_dir) {
  // db=NAME: only the --db file of that name renders it; no other is tried after it.
  const std::string db = Attribute(section, "db");
  if (db.empty()) return RenderSectionFrom(store, section, readme_dir);
  if (std::filesystem::path(store.path()).filename() != db)
    throw NoMatchingRun("db=" + db + ": not " + store.path());
  try {
    return RenderSectionFrom(store, section, readme_dir);
  } catch (const NoMatchingRun& error) {
    throw ReadmeError(error.what());
  }
}

}  // namespace seqbench
