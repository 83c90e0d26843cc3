// Selecting stored runs as users think of them: by id, or the newest complete run of a
// suite, a commit or branch, or a label. Branches are resolved by running git (argv, no
// shell: a branch name is user input).
#include <boost/program_options.hpp>
#include <cctype>
#include <cstdio>
#include <set>
#include <string>
#include <vector>

#include "base/process.h"
#include "cli/command.h"
#include "reports/escape/terminal.h"

namespace po = boost::program_options;

namespace seqbench::cli {

std::optional<std::vector<std::string>> GitLines(const std::vector<std::string>& args) {
  ChildSpec spec;
  spec.argv = {"git"};
  spec.argv.insert(spec.argv.end(), args.begin(), args.end());
  spec.search_path = true;
  spec.timeout_s = 60;
  spec.output = ChildSpec::Output::kCaptureStdout;
  // git's own complaints (not a repository, an unknown revision) stay off the terminal:
  // the caller says what it could not resolve.
  spec.discard_stderr = true;
  const ChildOutcome outcome = RunChild(spec);
  if (!outcome.Succeeded() || outcome.output_truncated) return std::nullopt;
  const std::string& output = outcome.output;
  std::vector<std::string> lines;
  size_t start = 0;
  while (start < output.size()) {
    const size_t end = output.find('\n', start);
    lines.push_back(output.substr(start, end - start));
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return lines;
}

std::optional<std::string> CommitSha(const std::string& name) {
  // "--end-of-options" ends git's options: a name starting with '-' is a revision.
  const auto resolved =
      GitLines({"rev-parse", "--verify", "--quiet", "--end-of-options", name + "^{commit}"});
  if (!resolved || resolved->size() != 1) return std::nullopt;
  return resolved->front();
}

std::vector<std::string> GitCommitOrder() {
  auto order = GitLines({"rev-list", "--topo-order", "--reverse", "--all"});
  return order ? std::move(*order) : std::vector<std::string>{};
}

namespace {

bool IsHex(const std::string& text) {
  return !text.empty() && text.find_first_not_of("0123456789abcdef") == std::string::npos;
}

// Whether a run's commit is `git`: a SHA prefix of at least 4 digits, or what git resolves
// the name to (a branch, a tag, HEAD~2).
class CommitMatcher {
 public:
  explicit CommitMatcher(const std::string& name) {
    if (name.empty()) return;
    std::string git = name;
    for (char& c : git) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (!IsHex(git)) git = name;  // a branch name keeps its case
    if (const auto resolved = CommitSha(git)) {
      sha_ = *resolved;
    } else if (IsHex(git) && git.size() >= 4) {
      sha_ = git;  // not in this repository's history, perhaps in the runs'
    } else {
      throw UsageError("--git " + git +
                       ": neither a commit SHA (4 or more hex digits) nor a branch or tag that "
                       "git knows here");
    }
  }
  bool Matches(const RunRecord& run) const {
    return sha_.empty() || run.Environment("git_sha").rfind(sha_, 0) == 0;
  }

 private:
  std::string sha_;
};

}  // namespace

std::string RunFilter::Describe() const {
  std::string text;
  const auto add = [&](const std::string& name, const std::string& value) {
    if (!value.empty()) text += (text.empty() ? "" : ", ") + name + " '" + value + "'";
  };
  add("suite", suite);
  add("git", git);
  add("label", label);
  return text;
}

RunRecord FindRunOrFail(const Store& store, int64_t run_id, const std::string& command) {
  const auto run = store.FindRun(run_id);
  if (!run) {
    throw UsageError(command + ": no run " + std::to_string(run_id) + " in " + store.path() +
                     " (seqbench show --db " + store.path() + " lists them)");
  }
  return *run;
}

RunRecord LatestRun(const Store& store, const RunFilter& filter, const std::string& command,
                    int64_t excluded) {
  std::optional<CommitMatcher> commit;
  try {
    commit.emplace(filter.git);
  } catch (const UsageError& error) {
    throw UsageError(command + ": " + error.what());
  }
  const auto runs = store.Runs();
  for (auto it = runs.rbegin(); it != runs.rend(); ++it) {
    // A shard is part of a run: --group reads it whole.
    if (it->status != "complete" || it->run_id == excluded || !it->group.empty()) continue;
    if (!filter.suite.empty() && it->suite_name != filter.suite) continue;
    if (!filter.label.empty() && it->label != filter.label) continue;
    const RunRecord run = *store.FindRun(it->run_id);  // with its environment: the commit
    if (commit->Matches(run)) return run;
  }
  throw UsageError(command + ": no complete run" +
                   (filter.empty() ? "" : " with " + filter.Describe()) + " in " + store.path() +
                   " (seqbench show --db " + store.path() +
                   " lists them; the shards of a group are read with --group)");
}

RunRecord LatestRunOn(const Store& store, const std::string& ref, const std::string& suite,
                      int64_t excluded, const std::string& command) {
  RunFilter by_label;
  by_label.suite = suite;
  by_label.label = ref;
  try {
    return LatestRun(store, by_label, command, excluded);
  } catch (const UsageError&) {
  }
  // Not a label: the runs of commits in the branch's history, newest run first.
  const auto history = GitLines({"rev-list", "--max-count=100000", "--end-of-options", ref});
  if (!history) {
    throw UsageError(command + ": --base-latest-on " + ref + ": no run of suite '" + suite +
                     "' has that label, and git knows no branch, tag or commit of that name here");
  }
  const std::set<std::string> commits(history->begin(), history->end());
  const auto runs = store.Runs();
  for (auto it = runs.rbegin(); it != runs.rend(); ++it) {
    if (it->status != "complete" || it->run_id == excluded || it->suite_name != suite ||
        !it->group.empty())
      continue;
    const RunRecord run = *store.FindRun(it->run_id);
    if (commits.count(run.Environment("git_sha"))) return run;
  }
  throw UsageError(command + ": --base-latest-on " + ref + ": no complete run of suite '" + suite +
                   "' with that label or from a commit on its history in " + store.path());
}

void RunSelection::Declare(po::options_description& options, po::options_description& hidden,
                           po::positional_options_description& positional) {
  DeclareDatabase(options, &db_path);
  options.add_options()("group", po::value(&group),
                        "a run group (run --group): its shards gathered as one run")(
      "latest", "the newest complete run (of those --suite, --git, --label pick)")(
      "suite", po::value(&filter.suite), "the newest complete run of this suite")(
      "git", po::value(&filter.git),
      "the newest complete run of this commit (SHA prefix, branch or tag)")(
      "label", po::value(&filter.label), "the newest complete run with this run --label");
  hidden.add_options()("run", po::value(&run_id));
  positional.add("run", 1);
}

bool RunSelection::Given(const po::variables_map& values) const {
  return values.count("run") || values.count("latest") || !filter.empty() || !group.empty();
}

void RunSelection::CheckNamed(const po::variables_map& values, const std::string& command) const {
  if (!Given(values)) throw UsageError(command + ": give a RUN_ID, --group or --latest");
  const int named = (values.count("run") ? 1 : 0) + (group.empty() ? 0 : 1) +
                    (values.count("latest") || !filter.empty() ? 1 : 0);
  if (named > 1) {
    throw UsageError(command + ": give one of RUN_ID, --group, or --latest/--suite/--git/--label");
  }
}

std::vector<GatheredRun> GatherGroupOrFail(const Store& store, const std::string& id,
                                           const std::string& command, MixedMachines mixed) {
  if (!IsGroupId(id))  // nor then user text that reaches the messages below
    throw UsageError(command + ": '" + escape::TerminalText(id) +
                     "' is no group id (1 to 64 of A-Z a-z 0-9 . _ -, as run --group takes)");
  try {
    return GatherGroup(store, id, mixed);
  } catch (const GroupError& error) {
    throw UsageError(command + ": " + error.what());
  }
}

std::vector<GatheredRun> RunSelection::SelectRuns(const po::variables_map& values,
                                                  std::unique_ptr<Store>& store,
                                                  const std::string& command,
                                                  MixedMachines mixed) const {
  CheckNamed(values, command);
  store = OpenExistingStore(db_path, command);
  if (!group.empty()) return GatherGroupOrFail(*store, group, command, mixed);
  GatheredRun one;
  one.run = ResolveIn(values, *store, command);
  one.cases = store->Cases(one.run.run_id);
  return {std::move(one)};
}

GatheredRun RunSelection::SelectRun(const po::variables_map& values, std::unique_ptr<Store>& store,
                                    const std::string& command) const {
  return SelectRuns(values, store, command)[0];
}

RunRecord RunSelection::ResolveIn(const po::variables_map& values, const Store& store,
                                  const std::string& command) const {
  if (values.count("run")) return FindRunOrFail(store, run_id, command);
  return LatestRun(store, filter, command);
}

}  // namespace seqbench::cli
