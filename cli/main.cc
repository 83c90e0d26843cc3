// seqbench: runs benchmark suites of recurrent-model variants and reports on them.
// Exit codes: 0 success, 1 a failure while running, 2 bad user input.
#include <boost/program_options.hpp>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <map>
#include <regex>
#include <sstream>

#include "base/files.h"
#include "cli/command.h"
#include "harness/cuda_probe.h"
#include "harness/environment.h"
#include "harness/memory_limit.h"
#include "harness/run_driver.h"
#include "reports/escape/terminal.h"
#include "variants/core/plugin.h"
#include "variants/core/registry.h"

namespace po = boost::program_options;

namespace seqbench::cli {

const std::vector<Command>& Commands() {
  static const std::vector<Command> commands = {
      {"list", "list model families and variants with their capabilities", RunList},
      {"run", "run a suite and store every case's results", RunRun},
      {"show", "show a stored run, or list the runs", RunShow},
      {"merge", "merge result databases (e.g. shards) without duplicates", RunMerge},
      {"rm", "remove stored runs, whole, in one transaction (refuses what others need)", RunRemove},
      {"report", "render a run: Markdown tables, CSV, JSON, Google Benchmark JSON", RunReport},
      {"readme", "regenerate the seqbench sections of a Markdown file", RunReadme},
      {"compare", "compare two runs case by case (bootstrap interval); exit 1 on regression",
       RunCompare},
      {"ab", "time a suite with two builds in alternating processes (a linked pair of runs)",
       RunAbCommand},
      {"bisect", "find the first commit whose counted instructions moved (builds each once)",
       RunBisect},
      {"check", "evaluate a run's suite expectations (the CI gate); exit 1 on a miss", RunCheck},
      {"plot", "plot a metric against seq_len or batch, one line per variant (SVG)", RunPlot},
      {"history", "a suite's metric across its runs, case by case, with change points", RunHistory},
      {"site", "write a static HTML site of the runs: trends, change points, reports", RunSite},
      {"slurm", "submit a suite to Slurm as a job array of shards, gathered as one group",
       RunSlurm},
      {"verify", "check every variant against the baseline and print the errors", RunVerify},
      {"profile", "the ops a case's step spends its time in (LibTorch's profiler)", RunProfile},
      {"train", "train on real text: pipelines side by side, every step's loss stored", RunTrain},
      {"generate", "greedy generation from a training checkpoint, with per-token latency",
       RunGenerate},
  };
  return commands;
}

namespace {
std::string command_line;
}  // namespace

const std::string& CommandLine() { return command_line; }

namespace {
std::vector<std::string> plugin_paths;
}  // namespace

const std::vector<std::string>& LoadedPluginPaths() { return plugin_paths; }

std::vector<std::string> AbsolutePluginPaths() {
  std::vector<std::string> paths;
  for (const std::string& plugin : plugin_paths)
    paths.push_back(std::filesystem::absolute(plugin).string());
  return paths;
}

void SetCommandLine(int argc, char** argv) {
  command_line.clear();
  for (int i = 0; i < argc; ++i) command_line += (i ? " " : "") + std::string(argv[i]);
}

std::optional<po::variables_map> ParseArguments(
    const std::vector<std::string>& args, const po::options_description& options,
    const po::options_description& hidden, const po::positional_options_description& positional,
    const std::string& command) {
  po::options_description all;
  all.add(options).add(hidden);
  po::variables_map values;
  try {
    po::store(po::command_line_parser(args).options(all).positional(positional).run(), values);
    po::notify(values);
  } catch (const po::error& error) {
    throw UsageError(command + ": " + error.what() + " (see seqbench " + command + " --help)");
  }
  if (values.count("help")) {
    std::cout << options;
    return std::nullopt;
  }
  return values;
}

void DeclareDatabases(po::options_description& options, std::vector<std::string>& paths) {
  options.add_options()(
      "db",
      po::value(&paths)->default_value({kDefaultDatabasePath}, kDefaultDatabasePath)->composing(),
      "results database; repeat it to read several");
}

std::vector<std::unique_ptr<Store>> OpenExistingStores(const std::vector<std::string>& paths,
                                                       const std::string& command) {
  std::vector<std::unique_ptr<Store>> stores;
  for (const std::string& path : paths) stores.push_back(OpenExistingStore(path, command));
  return stores;
}

std::vector<const Store*> StorePointers(const std::vector<std::unique_ptr<Store>>& stores) {
  std::vector<const Store*> pointers;
  for (const auto& store : stores) pointers.push_back(store.get());
  return pointers;
}

std::unique_ptr<Store> OpenExistingStore(const std::string& path, const std::string& command) {
  if (!std::filesystem::exists(path)) {
    throw UsageError(command + ": no results database at " + path +
                     " (run a suite first, or give --db)");
  }
  auto store = std::make_unique<Store>(path, StoreAccess::kReadOnly);
  for (const std::string& warning : store->warnings())
    std::cerr << "warning: " << escape::TerminalText(warning) << "\n";
  return store;
}

double ParseDuration(const std::string& text, const std::string& what) {
  static const std::regex pattern("([0-9]*\\.?[0-9]+)(ns|us|ms|s|min)");
  std::smatch match;
  if (!std::regex_match(text, match, pattern)) {
    throw UsageError(what + " takes a duration with its unit, e.g. 10ms or 0.5s; got '" + text +
                     "'");
  }
  static const std::map<std::string, double> seconds_per = {
      {"ns", 1e-9}, {"us", 1e-6}, {"ms", 1e-3}, {"s", 1}, {"min", 60}};
  try {
    return std::stod(match[1]) * seconds_per.at(match[2]);
  } catch (const std::out_of_range&) {
    throw UsageError(what + ": '" + text + "' is out of range");
  }
}

void DeclareDatabase(po::options_description& options, std::string* db_path, const char* meaning) {
  options.add_options()("db", po::value(db_path)->default_value(kDefaultDatabasePath), meaning);
}

namespace {

std::string GlobalUsage(const po::options_description& options) {
  std::ostringstream usage;
  usage << "Usage: seqbench [--plugin LIB.so]... COMMAND [ARGS...]\n\nCommands:\n";
  for (const Command& command : Commands()) {
    usage << "  " << command.name << std::string(12 - std::string(command.name).size(), ' ')
          << command.summary << "\n";
  }
  usage << "\nRun 'seqbench COMMAND --help' for a command's options.\n\n" << options;
  return usage.str();
}

int Main(int argc, char** argv) {
  po::options_description options("Global options");
  options.add_options()("help,h", "show this help")(
      "version", "print seqbench's version, git SHA and LibTorch version")(
      "plugin", po::value<std::vector<std::string>>()->composing(),
      "load a shared library that registers more variants (repeatable)");
  po::options_description hidden;
  hidden.add_options()("command", po::value<std::string>())("args",
                                                            po::value<std::vector<std::string>>());
  po::options_description all;
  all.add(options).add(hidden);
  po::positional_options_description positional;
  positional.add("command", 1).add("args", -1);

  // "--" and what follows are the command's (slurm passes them on to run), kept verbatim:
  // the parser would drop the "--" and treat the rest as its positionals.
  int parsed_argc = argc;
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--") {
      parsed_argc = i;
      break;
    }
  }
  po::variables_map values;
  po::parsed_options parsed = po::command_line_parser(parsed_argc, argv)
                                  .options(all)
                                  .positional(positional)
                                  .allow_unregistered()
                                  .run();
  po::store(parsed, values);
  if (!values.count("command")) {
    if (values.count("version")) {
      std::cout << VersionLine() << "\n";
      return 0;
    }
    if (values.count("help")) {
      std::cout << GlobalUsage(options);
      return 0;
    }
    throw UsageError("no command given\n\n" + GlobalUsage(options));
  }
  // Everything after the command belongs to it, including its own --help.
  std::vector<std::string> command_args =
      po::collect_unrecognized(parsed.options, po::include_positional);
  command_args.erase(command_args.begin());                    // the command's name
  if (values.count("help")) command_args.push_back("--help");  // before "--": the command's
  command_args.insert(command_args.end(), argv + parsed_argc, argv + argc);

  if (values.count("plugin")) {
    for (const auto& path : values["plugin"].as<std::vector<std::string>>()) {
      LoadPlugin(path);
      plugin_paths.push_back(path);
    }
  }
  cuda_probe::UseFullFloat32();  // for every command, before it records or runs anything
  const std::string name = values["command"].as<std::string>();
  for (const Command& command : Commands()) {
    if (name == command.name) return command.run(command_args);
  }
  std::string known;
  for (const Command& command : Commands())
    known += (known.empty() ? "" : ", ") + std::string(command.name);
  throw UsageError("unknown command '" + name + "'; commands: " + known);
}

}  // namespace
}  // namespace seqbench::cli

namespace {

// Prints why the command stopped, shown and never sent to the terminal as control
// sequences, and returns the exit status: 2 for what the user can fix, 1 otherwise.
int Refuse(const std::exception& error, int status, const char* suffix = "",
           const char* prefix = "") {
  std::cerr << "seqbench: " << prefix << seqbench::escape::TerminalText(error.what()) << suffix
            << "\n";
  return status;
}

}  // namespace

int main(int argc, char** argv) {
  seqbench::cli::SetCommandLine(argc, argv);
  try {
    const int status = seqbench::cli::Main(argc, argv);
    // A report that did not reach standard output (a full disk, a closed pipe) is a
    // failure, not a success with half a table.
    std::cout.flush();
    if (!std::cout || std::fflush(stdout) != 0 || std::ferror(stdout)) {
      std::cerr << "seqbench: cannot write standard output\n";
      return 1;
    }
    return status;
  } catch (const seqbench::cli::UsageError& error) {
    return Refuse(error, 2);
  } catch (const boost::program_options::error& error) {
    return Refuse(error, 2, " (see seqbench --help)");
  } catch (const seqbench::UnusableDatabase& error) {
    return Refuse(error, 2);
  } catch (const seqbench::StoreError& error) {
    return Refuse(error, 1);
  } catch (const seqbench::PluginError& error) {
    return Refuse(error, 2);
  } catch (const seqbench::OutputRefused& error) {
    return Refuse(error, 2);
  } catch (const seqbench::RunRefused& error) {  // a run the database contradicts
    return Refuse(error, 2);
  } catch (const seqbench::FileSystemError& error) {  // a full disk, a read-only folder
    return Refuse(error, 2);
  } catch (const std::filesystem::filesystem_error& error) {
    return Refuse(error, 2);
  } catch (const seqbench::MemoryLimitExceeded& error) {  // sizes the user asked for
    return Refuse(error, 2);
  } catch (const std::exception& error) {
    return Refuse(error, 1, "", "error: ");
  }
}
