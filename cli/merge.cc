// `seqbench merge A.db B.db ... --into C.db`: combines databases, e.g. the shards of a
// suite run on several machines, without duplicating runs or cases.
#include <boost/program_options.hpp>
#include <cstdio>
#include <iostream>

#include "cli/command.h"
#include "cli/progress.h"
#include "reports/escape/terminal.h"
#include "results/store.h"

namespace po = boost::program_options;

namespace seqbench::cli {

int RunMerge(const std::vector<std::string>& args) {
  std::vector<std::string> sources;
  std::string into;
  po::options_description options(
      "Usage: seqbench merge A.db [B.db ...] --into C.db\n\n"
      "Copies every run and case of the sources into C.db (created if missing). Runs are\n"
      "matched by their uuid and cases by their key, so merging twice adds nothing. A case\n"
      "both hold is kept when it is the same measurement, replaced when C.db's failed\n"
      "(error, timeout) and the source ran it again (run --resume --retry-failed), and\n"
      "otherwise refused (exit 2, naming the cases, nothing merged from any source). The\n"
      "sources merge in one transaction: all of them, or none.\n\nOptions");
  options.add_options()("help,h", "show this help")("into", po::value(&into), "target database");
  po::options_description hidden;
  hidden.add_options()("sources", po::value(&sources));
  po::positional_options_description positional;
  positional.add("sources", -1);
  const auto values = ParseArguments(args, options, hidden, positional, "merge");
  if (!values) return 0;
  if (sources.empty() || into.empty()) {
    throw UsageError(
        "merge: give one or more source databases and --into TARGET (see seqbench merge --help)");
  }
  std::vector<std::unique_ptr<Store>> opened;
  for (const auto& source : sources) {
    if (source == into) throw UsageError("merge: " + source + " is both a source and the target");
    opened.push_back(OpenExistingStore(source, "merge"));
    // Every source whole before the target changes: a damaged page would otherwise be
    // read as fewer cases, or fail half-way.
    opened.back()->QuickCheck();
  }
  Store target(into);
  std::vector<const Store*> readers;
  for (const auto& store : opened) readers.push_back(store.get());
  std::vector<MergeCounts> merged;
  try {
    TerminalProgress progress("merge: sources merged");
    merged = target.MergeFromEach(
        readers, [&progress](size_t done, size_t total) { progress.Update(done, total); });
  } catch (const MergeConflict& conflict) {
    throw UsageError("merge: " + escape::TerminalText(sources[conflict.source()]) + " into " +
                     escape::TerminalText(into) + ": " + escape::TerminalText(conflict.what()) +
                     "\n(nothing was merged)");
  }
  for (size_t i = 0; i < sources.size(); ++i) {
    const MergeCounts& counts = merged[i];
    std::printf("%s: %lld runs and %lld cases added, %lld replaced, %lld already present\n",
                escape::TerminalText(sources[i]).c_str(), (long long)counts.runs_added,
                (long long)counts.cases_added, (long long)counts.cases_updated,
                (long long)counts.cases_already_present);
    for (const std::string& updated : counts.updated) {
      std::printf("  replaced a failed %s with the source's\n",
                  escape::TerminalText(updated).c_str());
    }
  }
  return 0;
}

}  // namespace seqbench::cli
