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
int RunShow(const std::vector<std::string>& args);
int RunMerge(const std::vector<std::string>& args);
int RunReport(const std::vector<std::string>& args);
int RunReadme(const std::vector<std::string>& args);
int RunCompare(const std::vector<std::string>& args);
int RunCheck(const std::vector<std::string>& args);
int RunPlot(const std::vector<std::string>& args);

// The whole command line as typed, for provenance.
const std::string& CommandLine();
void SetCommandLine(int argc, char** argv);
// The --plugin libraries this process loaded, in order (a child seqbench loads them too).
const std::vector<std::string>& LoadedPluginPaths();
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

// The run a command works on: `run_id`, or with `latest` the newest run (only complete
// ones when `complete_only`, and only of `suite` if given). A missing run is a UsageError
// naming `command`.
RunRecord ResolveRun(const Store& store, int64_t run_id, bool latest, const std::string& suite,
                     const std::string& command, bool complete_only = true);

// The options of every command that works on one stored run: --db, a positional RUN_ID,
// --latest and --suite, declared once so that they mean the same everywhere.
struct RunSelection {
  std::string db_path;
  int64_t run_id = 0;
  std::string suite;

  // Adds --db, --latest and --suite to `options`, and RUN_ID as the first positional.
  void Declare(boost::program_options::options_description& options,
               boost::program_options::options_description& hidden,
               boost::program_options::positional_options_description& positional);
  // Opens the database (which must exist) and resolves the run.
  RunRecord Resolve(const boost::program_options::variables_map& values,
                    std::unique_ptr<Store>& store, const std::string& command,
                    bool complete_only = true) const;
};

// Where results go when no --db is given.
inline constexpr char kDefaultDatabasePath[] = "results/seqbench.db";

// Adds --db (default kDefaultDatabasePath) to `options`.
void DeclareDatabase(boost::program_options::options_description& options, std::string* db_path,
                     const char* meaning = "results database");

}  // namespace seqbench::cli
