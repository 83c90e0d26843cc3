// The seqbench command line: one function per subcommand, dispatched by main.cc. Each
// command parses its own options with Boost.Program_options and answers --help.
//
// Thread-safety: commands run on the main thread only.
#pragma once

#include <boost/program_options.hpp>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "harness/suite.h"
#include "results/run_group.h"
#include "results/store.h"

namespace seqbench::cli {

// Bad user input (unknown option, malformed value, unknown key). main() prints it and
// exits with code 2; the message says what was wrong and how to fix it.
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct Command {
  const char* name;
  const char* summary;
  int (*run)(const std::vector<std::string>& args);  // returns the exit code
};

// Every subcommand, in the order `seqbench --help` lists them.
const std::vector<Command>& Commands();

int RunList(const std::vector<std::string>& args);
int RunVerify(const std::vector<std::string>& args);
int RunRun(const std::vector<std::string>& args);
// `seqbench run ARGS` checked as RunRun checks it before it touches a database (flags,
// suite, overrides, the cases selected), without running anything: a UsageError names
// what the command would refuse. For commands seqbench submits on a user's behalf.
void CheckRunCommand(const std::vector<std::string>& args);
int RunProfile(const std::vector<std::string>& args);
int RunShow(const std::vector<std::string>& args);
int RunMerge(const std::vector<std::string>& args);
int RunRemove(const std::vector<std::string>& args);
int RunReport(const std::vector<std::string>& args);
int RunReadme(const std::vector<std::string>& args);
int RunCompare(const std::vector<std::string>& args);
int RunAbCommand(const std::vector<std::string>& args);
int RunCheck(const std::vector<std::string>& args);
int RunPlot(const std::vector<std::string>& args);
int RunHistory(const std::vector<std::string>& args);
int RunSite(const std::vector<std::string>& args);
int RunSlurm(const std::vector<std::string>& args);
int RunBisect(const std::vector<std::string>& args);

// The whole command line as typed, for provenance.
const std::string& CommandLine();
void SetCommandLine(int argc, char** argv);
// The --plugin libraries this process loaded, in order (a child seqbench loads them too).
const std::vector<std::string>& LoadedPluginPaths();
// The same, absolute: what a child seqbench loads, whatever folder it runs in.
std::vector<std::string> AbsolutePluginPaths();
int RunTrain(const std::vector<std::string>& args);
int RunGenerate(const std::vector<std::string>& args);
// Parses a command's arguments: `options` are what --help shows, `hidden` the slots that
// `positional` fills. Bad input throws UsageError naming `command`; with --help the options
// are printed and nullopt comes back (the command then exits 0).
std::optional<boost::program_options::variables_map> ParseArguments(
    const std::vector<std::string>& args,
    const boost::program_options::options_description& options,
    const boost::program_options::options_description& hidden = {},
    const boost::program_options::positional_options_description& positional = {},
    const std::string& command = "");

// Opens, read-only, a database that must already exist; a missing file is a UsageError
// naming `command`, rather than a new empty database. For the commands that only read.
std::unique_ptr<Store> OpenExistingStore(const std::string& path, const std::string& command);

// --db FILE, repeatable, for the commands that read several databases at once (readme,
// history, site): `paths` defaults to the default database.
void DeclareDatabases(boost::program_options::options_description& options,
                      std::vector<std::string>& paths);
// OpenExistingStore for each of `paths`, in order.
std::vector<std::unique_ptr<Store>> OpenExistingStores(const std::vector<std::string>& paths,
                                                       const std::string& command);
// The stores as the reports' pointers.
std::vector<const Store*> StorePointers(const std::vector<std::unique_ptr<Store>>& stores);

// Which stored runs a command may pick, as the user names them; every given field must
// match. One meaning in every command (show, report, check, plot, compare).
struct RunFilter {
  std::string suite;  // the suite's name
  std::string git;    // a commit: a SHA prefix, or a branch or tag that `git rev-parse` knows
  std::string label;  // the run's --label, exactly

  bool empty() const { return suite.empty() && git.empty() && label.empty(); }
  // "suite ci, label nightly": for messages.
  std::string Describe() const;
};

// The newest complete run of `store` that matches `filter` and is not `excluded`. A
// missing one is a UsageError naming `command` and the filter.
RunRecord LatestRun(const Store& store, const RunFilter& filter, const std::string& command,
                    int64_t excluded = 0);
// Run `run_id` of `store`, whatever its status; a missing one is a UsageError.
RunRecord FindRunOrFail(const Store& store, int64_t run_id, const std::string& command);
// The newest complete run of `suite` whose --label is `ref`, or else whose commit is on
// branch (or tag, or commit) `ref`'s history: the base a CI compares a new run with.
RunRecord LatestRunOn(const Store& store, const std::string& ref, const std::string& suite,
                      int64_t excluded, const std::string& command);

// The options of every command that works on one stored run: --db, a positional RUN_ID,
// or --latest, --suite, --git and --label (the newest complete run that matches, shards of
// a group left out), or --group, declared once so that they mean the same everywhere.
struct RunSelection {
  std::string db_path;
  int64_t run_id = 0;
  RunFilter filter;
  std::string group;  // --group: a run group's shards gathered as one run

  // Adds --db, --latest, --suite, --git and --label to `options`, RUN_ID as the first
  // positional.
  void Declare(boost::program_options::options_description& options,
               boost::program_options::options_description& hidden,
               boost::program_options::positional_options_description& positional);
  // Whether a run is named at all (RUN_ID, --latest or a filter).
  bool Given(const boost::program_options::variables_map& values) const;
  // The run in an open `store`.
  RunRecord ResolveIn(const boost::program_options::variables_map& values, const Store& store,
                      const std::string& command) const;
  // Opens the database and reads the run with its cases, or --group's shards gathered
  // (results/run_group.h): one, or with kSplit one per machine. A group that cannot be
  // gathered is a UsageError naming its shards.
  std::vector<GatheredRun> SelectRuns(const boost::program_options::variables_map& values,
                                      std::unique_ptr<Store>& store, const std::string& command,
                                      MixedMachines mixed = MixedMachines::kRefuse) const;
  GatheredRun SelectRun(const boost::program_options::variables_map& values,
                        std::unique_ptr<Store>& store, const std::string& command) const;

 private:
  // Refuses none, or more than one, of RUN_ID, --group and --latest with its filters.
  void CheckNamed(const boost::program_options::variables_map& values,
                  const std::string& command) const;
};

// Group `id` of `store` gathered, or a UsageError naming `command`.
std::vector<GatheredRun> GatherGroupOrFail(const Store& store, const std::string& id,
                                           const std::string& command,
                                           MixedMachines mixed = MixedMachines::kRefuse);

// A duration as users write it: a number with a unit, ns, us, ms, s or min ("10ms",
// "0.5s"). A bare number is refused, since suite keys carry their unit in the name
// (min_time_ms) and a flag that guessed would be off by 1000. `what` leads the message.
double ParseDuration(const std::string& text, const std::string& what);

// A threshold as a user writes it: "5%" or the fraction "0.05" (a bare number of 1 or more
// is refused, not guessed at); a UsageError naming `flag` ("compare --threshold")
// otherwise.
double ParseThreshold(const std::string& text, const std::string& flag);

// `--threads N` of `command` within the suite key's bounds (exit 2 naming them otherwise).
void CheckThreadsFlag(const std::string& command, int64_t threads);

// `--filter` of `command` compiled once, so a bad pattern is exit 2 before anything runs.
void CheckFilterFlag(const std::string& command, const std::string& filter);
// The suite file at `path`; a SuiteError (file, line, fix) becomes a UsageError (exit 2).
Suite LoadSuiteOrUsageError(const std::string& path);

// Ctrl-C and SIGTERM for the long-running commands (run, train, ab): after
// InstallStopHandlers() either sets the flag StopRequested() reads, and the command
// stores what it finished and stops between steps instead of dying in the middle of a
// write. The flag is process-wide and never cleared.
void InstallStopHandlers();
bool StopRequested();

// The output lines of `git ARGS...` run in the current directory (argv, no shell), or
// nullopt when git is missing or fails (not a repository, an unknown revision).
std::optional<std::vector<std::string>> GitLines(const std::vector<std::string>& args);
// The full SHA of the commit `name` names here (a SHA prefix, a branch or tag, HEAD~2; a
// name starting with '-' is a revision too), or nullopt when git knows no such commit.
std::optional<std::string> CommitSha(const std::string& name);
// Every commit git knows here in its topological order, oldest first (HistoryRequest::
// commit_order); empty outside a repository, so that runs then go in start order.
std::vector<std::string> GitCommitOrder();

// Where results go when no --db is given.
inline constexpr char kDefaultDatabasePath[] = "results/seqbench.db";

// Adds --db (default kDefaultDatabasePath) to `options`.
void DeclareDatabase(boost::program_options::options_description& options, std::string* db_path,
                     const char* meaning = "results database");

}  // namespace seqbench::cli
