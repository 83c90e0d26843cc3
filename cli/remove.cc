// `seqbench rm RUN... [--db FILE] [--yes] [--force]`: forgets stored runs, whole, in one
// transaction, then compacts the file. What may go is results/run_removal.h's rule.
#include <unistd.h>

#include <boost/program_options.hpp>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "cli/command.h"
#include "reports/escape/terminal.h"
#include "reports/format.h"
#include "results/run_removal.h"
#include "results/store.h"

namespace po = boost::program_options;

namespace seqbench::cli {
namespace {

struct RemoveFlags {
  std::vector<std::string> runs;
  std::string db_path;
  bool yes = false, force = false;
};

std::vector<int64_t> ParseRunIds(const std::vector<std::string>& texts) {
  std::vector<int64_t> ids;
  for (const std::string& text : texts) {
    size_t used = 0;
    int64_t id = 0;
    try {
      id = std::stoll(text, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != text.size() || id <= 0) {
      throw UsageError("rm: '" + escape::TerminalText(text) +
                       "' is not a run id (a positive integer, as `seqbench show` lists them)");
    }
    ids.push_back(id);
  }
  return ids;
}

// "run 3 (suite ci, complete, 2026-11-27T10:00:00Z)": what the user is asked to confirm.
std::string Described(const RunRecord& run) {
  return "run " + std::to_string(run.run_id) + " (suite " + escape::TerminalText(run.suite_name) +
         ", " + run.status + ", " + escape::TerminalText(run.started_at) + ")";
}

// Asks on the terminal; true for "y" or "yes".
bool Confirmed(const std::vector<RunRecord>& runs, const std::string& path) {
  std::fprintf(stderr, "seqbench rm: remove from %s:\n", escape::TerminalText(path).c_str());
  for (const RunRecord& run : runs) std::fprintf(stderr, "  %s\n", Described(run).c_str());
  std::fprintf(stderr, "with every case, sample and step stored under them? [y/N] ");
  std::string answer;
  std::getline(std::cin, answer);
  return answer == "y" || answer == "Y" || answer == "yes";
}

}  // namespace

int RunRemove(const std::vector<std::string>& args) {
  RemoveFlags f;
  po::options_description options(
      "Usage: seqbench rm RUN [RUN ...] [--db FILE] [--yes] [--force]\n\n"
      "Removes stored runs with everything under them (cases, samples, metrics, training\n"
      "steps, environment), all in one transaction, then compacts the file (VACUUM). Refuses,\n"
      "changing nothing (exit 2): an unknown run; a shard whose run group keeps other shards;\n"
      "one side of an A/B pair whose other side stays; a run still marked running. --force\n"
      "removes those too. Without --yes it asks on a terminal and refuses elsewhere.\n\n"
      "Options");
  options.add_options()("help,h", "show this help")("yes,y", po::bool_switch(&f.yes),
                                                    "remove without asking")(
      "force", po::bool_switch(&f.force),
      "also remove shards, A/B sides and running runs that others still need");
  DeclareDatabase(options, &f.db_path, "results database to remove the runs from");
  po::options_description hidden;
  hidden.add_options()("runs", po::value(&f.runs));
  po::positional_options_description positional;
  positional.add("runs", -1);
  if (!ParseArguments(args, options, hidden, positional, "rm")) return 0;
  if (f.runs.empty()) throw UsageError("rm: name the runs to remove (seqbench rm --help)");
  const std::vector<int64_t> ids = ParseRunIds(f.runs);
  if (!std::filesystem::exists(f.db_path)) {
    throw UsageError("rm: no results database at " + escape::TerminalText(f.db_path));
  }
  Store store(f.db_path);
  const RunRemovalPlan plan = PlanRunRemoval(store, ids, f.force);
  if (!plan.allowed()) {
    std::string message = "rm: nothing removed:";
    for (const auto& line : plan.missing) message += "\n  " + escape::TerminalText(line);
    for (const auto& line : plan.refusals) message += "\n  " + escape::TerminalText(line);
    throw UsageError(message);
  }
  if (!f.yes) {
    if (isatty(fileno(stdin)) == 0 || isatty(fileno(stderr)) == 0) {
      throw UsageError("rm: give --yes to remove runs where no terminal can ask (nothing removed)");
    }
    if (!Confirmed(plan.runs, f.db_path)) {
      std::fprintf(stderr, "seqbench rm: nothing removed\n");
      return 1;
    }
  }
  std::vector<int64_t> removing;
  for (const RunRecord& run : plan.runs) removing.push_back(run.run_id);
  const int64_t cases = store.RemoveRuns(removing);
  for (const RunRecord& run : plan.runs) std::printf("removed %s\n", Described(run).c_str());
  try {
    store.Vacuum();
  } catch (const StoreError& error) {
    // The removal is committed; only the compaction failed (VACUUM needs room for a copy
    // of the file): say so rather than report the removal as failed.
    std::fprintf(stderr,
                 "seqbench rm: warning: the runs are removed, but the file was not "
                 "compacted: %s\n",
                 escape::TerminalText(error.what()).c_str());
  }
  std::printf("%lld case(s) removed; %s is now %s\n", static_cast<long long>(cases),
              escape::TerminalText(f.db_path).c_str(),
              FormatBytes(static_cast<int64_t>(std::filesystem::file_size(f.db_path))).c_str());
  return 0;
}

}  // namespace seqbench::cli
