// `seqbench show RUN_ID`: a stored run's provenance, environment and cases.
#include <boost/program_options.hpp>
#include <cstdio>
#include <iostream>

#include "cli/command.h"
#include "reports/escape/terminal.h"
#include "reports/format.h"
#include "reports/report.h"
#include "results/run_settings.h"
#include "results/store.h"

namespace po = boost::program_options;

namespace seqbench::cli {

namespace {

// What the store holds (names, labels, messages, the environment) is shown, never sent to
// the terminal as control sequences.
std::string Shown(const std::string& text) { return escape::TerminalText(text); }

void ListRuns(const Store& store) {
  std::printf("%-6s %-11s %-12s %-7s %-14s %-21s %-12s %s\n", "run", "status", "suite", "shard",
              "group", "started", "label", "command");
  const auto or_dash = [](const std::string& text) { return text.empty() ? "-" : Shown(text); };
  for (const RunRecord& run : store.Runs()) {
    std::printf("%-6lld %-11s %-12s %-7s %-14s %-21s %-12s %s\n", (long long)run.run_id,
                Shown(run.status).c_str(), Shown(run.suite_name).c_str(),
                or_dash(run.shard).c_str(), or_dash(run.group).c_str(),
                Shown(run.started_at).c_str(), or_dash(run.label).c_str(),
                Shown(run.command_line).c_str());
  }
}

// "repetitions 10, warmup 2, min time 10ms, max noise off, check policy full": every row of
// results/run_settings.h's table, so that a new setting shows with no code here.
std::string SettingsText(const RunSettings& settings) {
  std::string text;
  for (const SettingField& field : SettingFields())
    text += (text.empty() ? "" : ", ") + std::string(field.what) + " " + field.text(settings);
  return text;
}

// The run's header: provenance, settings and environment.
void PrintRunHeader(const RunRecord& run) {
  std::printf("%s  %s  suite %s (%s, hash %s)%s\n", Shown(RunName(run)).c_str(),
              Shown(run.status).c_str(), Shown(run.suite_name).c_str(),
              Shown(run.suite_path).c_str(), Shown(run.suite_hash).c_str(),
              run.shard.empty() ? "" : Shown("  shard " + run.shard).c_str());
  std::printf("started %s  finished %s  seed %llu%s\ncommand: %s\n", Shown(run.started_at).c_str(),
              run.finished_at.empty() ? "-" : Shown(run.finished_at).c_str(),
              (unsigned long long)run.seed,
              run.label.empty() ? "" : Shown("  label " + run.label).c_str(),
              Shown(run.command_line).c_str());
  if (run.settings.max_noise > 0) {
    std::printf(
        "adaptive stopping: until the median's 95%% interval is within ±%g%%, at most "
        "%g s a case\n",
        run.settings.max_noise * 100, run.settings.max_time_s);
  }
  std::printf(
      "%s run: baseline %s, %lld thread(s), %zu expectation(s)\nsettings: %s\n\n"
      "Environment:\n",
      Shown(run.kind).c_str(), Shown(run.baseline).c_str(), (long long)run.threads,
      run.expectations.size(), Shown(SettingsText(run.settings)).c_str());
  for (const auto& [key, value] : run.environment)
    std::printf("  %-22s %s\n", Shown(key).c_str(), Shown(value).c_str());
}

// "logits / grads", "N tokens differ" or "-": a case's largest error against its reference.
std::string ErrorText(const CaseRecord& c) {
  char text[64] = "-";
  if (const auto mismatched = c.MetricValue("mismatched_tokens")) {
    std::snprintf(text, sizeof(text), "%.0f tokens differ", *mismatched);
  } else if (const auto logits = c.MetricValue("logits_max_abs")) {
    if (const auto grads = c.MetricValue("grad_max_abs")) {
      std::snprintf(text, sizeof(text), "%.2g / %.2g", *logits, *grads);
    } else {
      std::snprintf(text, sizeof(text), "%.2g / -", *logits);
    }
  }
  return text;
}

void PrintCaseLine(const CaseRecord& c) {
  const auto metric = [&](const char* name) { return c.MetricValue(name); };
  std::string runtime = "-";
  if (const auto median = metric("runtime_median_s")) {
    const auto iqr = metric("runtime_iqr_s");
    runtime = FormatDuration(*median) + (iqr ? ", " + FormatDuration(*iqr) : "");
  }
  const auto peak = metric("peak_bytes");
  const auto activation = metric("activation_bytes");
  char tokens_text[32] = "-";
  if (const auto tokens = metric("tokens_per_s"))
    std::snprintf(tokens_text, sizeof(tokens_text), "%.4g", *tokens);
  const std::string label = c.name() + " " + c.workload().Label();
  std::printf("%-58s %-9s %-22s %-11s %-11s %-12s %s\n", Shown(label).c_str(),
              Shown(c.status).c_str(), runtime.c_str(),
              FormatBytes(peak ? static_cast<int64_t>(*peak) : -1).c_str(),
              FormatBytes(activation ? static_cast<int64_t>(*activation) : -1).c_str(), tokens_text,
              ErrorText(c).c_str());
  if (!c.message.empty()) std::printf("    %s\n", Shown(c.message).c_str());
}

}  // namespace

int RunShow(const std::vector<std::string>& args) {
  RunSelection selection;
  po::options_description options(
      "Usage: seqbench show [RUN_ID | --group ID | --latest | --suite NAME | --git REV |\n"
      "                      --label TEXT]\n"
      "                     [--db FILE]\n\n"
      "Shows a stored run: its suite, provenance, environment, warnings and every case\n"
      "with status, runtime, memory and correctness. Without a run, lists the runs (an\n"
      "interrupted or running one is shown by its RUN_ID; --latest and the filters pick the\n"
      "newest complete run, as in every command).\n\nOptions");
  options.add_options()("help,h", "show this help");
  po::options_description hidden;
  po::positional_options_description positional;
  selection.Declare(options, hidden, positional);
  const auto values = ParseArguments(args, options, hidden, positional, "show");
  if (!values) return 0;
  if (!selection.Given(*values)) {
    ListRuns(*OpenExistingStore(selection.db_path, "show"));
    return 0;
  }
  std::unique_ptr<Store> store;
  const GatheredRun selected = selection.SelectRun(*values, store, "show");
  const RunRecord& run = selected.run;
  const std::vector<CaseRecord>& cases = selected.cases;
  PrintRunHeader(run);
  for (const RunRecord& shard : selected.shards) {
    std::printf("shard %s: run %lld, %s to %s\n", Shown(shard.shard).c_str(),
                (long long)shard.run_id, Shown(shard.started_at).c_str(),
                Shown(shard.finished_at).c_str());
  }
  for (const auto& warning : RunWarnings(run, cases)) {
    std::printf("warning: %s\n", Shown(warning).c_str());
  }
  std::printf("\n%-58s %-9s %-22s %-11s %-11s %-12s %s\n", "case", "status",
              "runtime (median, IQR)", "peak", "activation", "tokens/s",
              "max error (logits / grads)");
  for (const CaseRecord& c : cases) PrintCaseLine(c);
  const TimedShare timed = TimedShareOf(run, cases);
  if (timed.wall_s > 0) {
    std::printf("\ntimed steps: %s of %s of case wall time (%.0f%%)\n",
                FormatDuration(timed.timed_s).c_str(), FormatDuration(timed.wall_s).c_str(),
                100 * timed.share());
  }
  return 0;
}

}  // namespace seqbench::cli
