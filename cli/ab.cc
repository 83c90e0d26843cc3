// `seqbench ab --base-binary PATH SUITE.toml`: every case of a suite timed by two builds,
// in lockstep workers (or, for a base binary without run --lockstep, one process a side
// each round), stored as a linked pair of runs that `compare` judges round by round
// (harness/ab_run.h).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <boost/program_options.hpp>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <iterator>
#include <sstream>
#include <stdexcept>

#include "base/files.h"
#include "base/process.h"
#include "cli/command.h"
#include "cli/progress.h"
#include "harness/ab_run.h"
#include "harness/suite.h"
#include "reports/escape/terminal.h"

namespace po = boost::program_options;

namespace seqbench::cli {
namespace {

std::string ExistingExecutable(const std::string& path, const std::string& flag) {
  namespace fs = std::filesystem;
  std::error_code error;
  if (!fs::is_regular_file(path, error) ||
      (fs::status(path, error).permissions() & fs::perms::owner_exec) == fs::perms::none)
    throw UsageError("ab: " + flag + " '" + path + "' is not an executable file");
  return fs::absolute(path).string();
}

// Whether `binary`'s run takes --lockstep (builds older than lockstep sampling do not):
// its `run --help` lists the flag.
bool KnowsLockstep(const std::string& binary) {
  ChildSpec spec;
  spec.argv = {binary, "run", "--help"};
  spec.timeout_s = 60;
  spec.output = ChildSpec::Output::kCaptureBoth;
  const ChildOutcome outcome = RunChild(spec);
  const std::string& text = outcome.output;
  // A binary that cannot even print its help would fail the pair later, less clearly.
  if (outcome.end != ChildOutcome::End::kExited || outcome.exit_code != 0)
    throw UsageError("ab: '" + binary + " run --help' failed (" + outcome.Describe() +
                     "); is it a seqbench executable?");
  return text.find("--lockstep") != std::string::npos;
}

// `ab`'s flags: the request, and where its results and scratch files go.
struct AbFlags {
  AbRequest request;
  std::string db_path, filter, scratch;
  int64_t threads = 0;
};

// Parses and checks the flags, before anything runs; false after --help.
bool ParseAbFlags(const std::vector<std::string>& args, AbFlags& f) {
  AbRequest& request = f.request;
  po::options_description options(
      "Usage: seqbench ab --base-binary PATH SUITE.toml [OPTIONS]\n\n"
      "Times every case of the suite with two seqbench builds, the base (--base-binary) and\n"
      "the new one (--new-binary, default: this seqbench), in pairs of samples: one worker\n"
      "process a side, both alive at once, each case's samples taken in turns (lockstep),\n"
      "the pairs in a seeded interleaved order, the side that goes first a seeded coin per\n"
      "pair, so that the two samples of a pair are milliseconds apart and what the machine\n"
      "does reaches both. A base binary without `run --lockstep` (older than this mode), or\n"
      "--process-rounds: each round runs each side's process once instead. Stored as two\n"
      "linked runs (labels '<label> base' and '<label> new'); `seqbench compare BASE NEW`\n"
      "then judges each case on the median of its per-pair ratios with a distribution-free\n"
      "interval (6 rounds or more). Exits 0 when both sides ran to the end, 1 when a side's\n"
      "process failed, 2 on bad input.\n\n"
      "Options");
  options.add_options()("help,h", "show this help")("base-binary", po::value(&request.base_binary),
                                                    "the base seqbench executable (required)")(
      "new-binary", po::value(&request.new_binary), "the new seqbench (default: this one)")(
      "db", po::value(&f.db_path)->default_value(kDefaultDatabasePath), "results database")(
      "rounds", po::value(&request.rounds)->default_value(10), "rounds: samples a case and side")(
      "seed", po::value(&request.seed)->default_value(1), "seeds the order of each round's sides")(
      "filter", po::value(&f.filter), "only cases whose key matches this regex (both sides)")(
      "threads", po::value(&f.threads), "run every case with N threads (both sides)")(
      "label", po::value(&request.label)->default_value("ab"), "the pair's label prefix")(
      "keep", po::value(&f.scratch), "keep each side's rounds and output in this new folder")(
      "process-rounds", "one process a side each round, instead of lockstep workers");
  po::options_description hidden;
  hidden.add_options()("suite", po::value(&request.suite_path))(
      // Test-only: the new side slowed by whole extra steps (run --test-slowdown).
      "test-slowdown", po::value(&request.test_slowdown));
  po::positional_options_description positional;
  positional.add("suite", 1);
  const auto values = ParseArguments(args, options, hidden, positional, "ab");
  if (!values) return false;
  if (request.suite_path.empty())
    throw UsageError("ab: no suite file given (see seqbench ab --help)");
  if (request.base_binary.empty()) throw UsageError("ab: --base-binary PATH is required");
  if (values->count("test-slowdown") &&
      !(request.test_slowdown >= 1 && request.test_slowdown <= 10))
    throw UsageError("ab: --test-slowdown must be a factor between 1 and 10");
  if (request.rounds < 1 || request.rounds > 1000)
    throw UsageError("ab: --rounds must be between 1 and 1000");
  if (request.label.find_first_of("\n\r") != std::string::npos)
    throw UsageError("ab: --label must be one line");
  if (values->count("threads")) {
    CheckThreadsFlag("ab", f.threads);
    request.threads = f.threads;
  }
  if (values->count("filter")) {
    CheckFilterFlag("ab", f.filter);
    request.filter = f.filter;
  }
  try {
    request.suite_counts = !LoadSuiteFile(request.suite_path).measurement.count.empty();
  } catch (const SuiteError& error) {
    throw UsageError(error.what());
  }
  request.base_binary = ExistingExecutable(request.base_binary, "--base-binary");
  request.new_binary = request.new_binary.empty()
                           ? std::filesystem::read_symlink(SelfExecutable()).string()
                           : ExistingExecutable(request.new_binary, "--new-binary");
  request.lockstep = !values->count("process-rounds") && KnowsLockstep(request.base_binary) &&
                     KnowsLockstep(request.new_binary);
  return true;
}

// A private scratch folder holds `owner`: "PID START SYSTEM" of the ab that made it (START:
// the process's start time in clock ticks since boot, /proc/PID/stat's 22nd field, so that
// a reused pid is told apart; SYSTEM: the host name, boot id and pid namespace, so that
// an ab in another container or on another host sharing the temp folder, whose pid this
// /proc cannot see, is never taken for dead). ab removes the folder when it ends, or the
// owner file when it keeps the folder on purpose; a folder whose owner no longer runs on
// this system was left by an ab killed outright (SIGKILL, the OOM killer), and the next ab
// removes it. The folder is made as seqbench-ab-new-XXXXXX and renamed once its owner file
// is in it, so that a kill between the two leaves a "new" folder, not an ownerless one
// (which would read as kept on purpose); a "new" folder older than kStagedFor is removed.
constexpr char kScratchPrefix[] = "seqbench-ab-";
constexpr char kStagedPrefix[] = "seqbench-ab-new-";
constexpr auto kStagedFor = std::chrono::minutes(10);
constexpr char kOwnerFile[] = "owner";

// Process `pid`'s start time, or "" when no such process runs.
std::string ProcessStart(const std::string& pid) {
  std::ifstream stat("/proc/" + pid + "/stat");
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  const size_t name_end = text.rfind(')');  // the command name may hold spaces
  if (name_end == std::string::npos) return "";
  std::istringstream fields(text.substr(name_end + 2));
  std::string field;
  for (int i = 3; i <= 22; ++i) {
    if (!(fields >> field)) return "";
  }
  return field;
}

// This system, as one word: host name, boot id and pid namespace ("" when unknown).
std::string SystemIdentity() {
  char host[256] = {};
  std::ifstream boot("/proc/sys/kernel/random/boot_id");
  std::string boot_id;
  std::error_code error;
  const std::string namespace_link = std::filesystem::read_symlink("/proc/self/ns/pid", error);
  if (gethostname(host, sizeof(host) - 1) != 0 || !(boot >> boot_id) || error) return "";
  std::string identity = std::string(host) + "/" + boot_id + "/" + namespace_link;
  for (char& c : identity) {
    if (std::isspace(static_cast<unsigned char>(c))) c = '_';
  }
  return identity;
}

std::string OwnerText() {
  const std::string pid = std::to_string(getpid());
  return pid + " " + ProcessStart(pid) + " " + SystemIdentity();
}

// Whether `folder`'s owner file names a process of this system that no longer runs.
bool Abandoned(const std::filesystem::path& folder) {
  std::ifstream owner(folder / kOwnerFile);
  std::string pid, start, system;
  if (!(owner >> pid >> start >> system)) return false;  // no owner: kept, or not ours
  const std::string here = SystemIdentity();
  return !here.empty() && system == here && ProcessStart(pid) != start;
}

// Whether a folder being made (seqbench-ab-new-*) was left there: none takes minutes.
bool StagedAndLeft(const struct stat& info) {
  const auto changed = std::chrono::system_clock::from_time_t(info.st_mtime);
  return std::chrono::system_clock::now() - changed > kStagedFor;
}

// Removes the scratch folders of earlier ab processes that were killed, this user's only.
void RemoveAbandonedScratch(const std::filesystem::path& temp) {
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(temp, error)) {
    const std::string name = entry.path().filename().string();
    struct stat info {};
    if (name.rfind(kScratchPrefix, 0) != 0 || lstat(entry.path().c_str(), &info) != 0 ||
        !S_ISDIR(info.st_mode) || info.st_uid != getuid())
      continue;
    const bool staged = name.rfind(kStagedPrefix, 0) == 0;
    if (staged ? StagedAndLeft(info) : Abandoned(entry.path())) RemoveTree(entry.path().string());
  }
}

// The folder of the sides' rounds: --keep's new folder, or a private one under the temp
// folder (with its owner file; earlier killed ab's folders removed first).
std::string ScratchFolder(const std::string& keep) {
  if (!keep.empty()) {
    if (!std::filesystem::create_directory(keep))
      throw UsageError("ab: --keep '" + keep + "' exists already; name a new folder");
    return keep;
  }
  const std::filesystem::path temp = std::filesystem::temp_directory_path();
  RemoveAbandonedScratch(temp);
  std::string staged = (temp / (std::string(kStagedPrefix) + "XXXXXX")).string();
  if (mkdtemp(staged.data()) == nullptr)
    throw std::runtime_error("ab: cannot create a folder in " + temp.string() + ": " +
                             std::strerror(errno));
  WriteFileAtomically(staged + "/" + kOwnerFile, OwnerText());
  const std::string folder = (temp / (kScratchPrefix + staged.substr(staged.size() - 6))).string();
  // Never over another folder of that name (rename would replace an empty one).
  // NFS and Lustre (a cluster's TMPDIR) refuse the flag (EINVAL): a plain rename there,
  // which can replace only an empty folder, and every ab's folder holds its owner file.
  int renamed = renameat2(AT_FDCWD, staged.c_str(), AT_FDCWD, folder.c_str(), RENAME_NOREPLACE);
  if (renamed != 0 && (errno == EINVAL || errno == ENOSYS))
    renamed = rename(staged.c_str(), folder.c_str());
  if (renamed != 0) {
    const std::string why = std::strerror(errno);
    RemoveTree(staged);
    throw std::runtime_error("ab: cannot rename " + staged + " to " + folder + ": " + why);
  }
  return folder;
}

// Rounds (two sides each) or lockstep sample pairs, with an ETA, on a terminal only.
std::function<void(const AbProgress&)> AbProgressLine(TerminalProgress& line) {
  return [&line](const AbProgress& progress) {
    if (progress.pairs > 0) {
      line.Update(static_cast<size_t>(progress.pairs_done), static_cast<size_t>(progress.pairs));
    } else {
      const int64_t sides_done = 2 * (progress.round - 1) + (progress.side == "new" ? 1 : 0);
      line.Update(static_cast<size_t>(sides_done), static_cast<size_t>(2 * progress.rounds));
    }
  };
}

// The new side's run, checked as it will check it (the base binary's may know other
// flags, and says so when it starts): a refusal is this ab's input error, before any
// database or folder is made.
void CheckNewSide(const AbRequest& request) {
  ChildRun side = AbSideRun(request, "new", "ab-scratch", true, request.rounds);
  if (request.lockstep) side.lockstep = "ab-scratch/new";
  try {
    CheckRunCommand(side.Arguments());
  } catch (const UsageError& error) {
    throw UsageError(std::string("ab: the new side would refuse its run: ") + error.what());
  }
}

}  // namespace

int RunAbCommand(const std::vector<std::string>& args) {
  AbFlags f;
  if (!ParseAbFlags(args, f)) return 0;
  CheckNewSide(f.request);
  if (!f.scratch.empty() && std::filesystem::exists(f.scratch))
    throw UsageError("ab: --keep '" + f.scratch + "' exists already; name a new folder");
  Store store(f.db_path);  // before the folder: a database it refuses leaves no folder behind
  const std::string folder = ScratchFolder(f.scratch);
  std::printf("ab: %s, %lld rounds\n",
              f.request.lockstep ? "lockstep workers (both sides set up first)"
                                 : "one process a side each round",
              (long long)f.request.rounds);
  InstallStopHandlers();
  AbResult result;
  try {
    TerminalProgress line(f.request.lockstep ? "ab: sample pairs" : "ab: sides run (two a round)");
    result = RunAb(f.request, store, folder, AbProgressLine(line), StopRequested);
  } catch (...) {
    // Interrupted, the private folder goes with the run (the sides' errors would name logs
    // in it); a side that failed keeps it, as its error names the log inside.
    if (!StopRequested()) {
      std::error_code ignored;  // kept on purpose: no longer the next ab's to remove
      if (f.scratch.empty()) std::filesystem::remove(folder + "/" + kOwnerFile, ignored);
      throw;
    }
    if (!f.scratch.empty()) throw std::runtime_error("ab: interrupted; the logs are in " + folder);
    RemoveTree(folder);
    throw std::runtime_error("ab: interrupted (--keep DIR keeps the sides' logs)");
  }
  if (f.scratch.empty()) RemoveTree(folder);
  std::printf(
      "ab: runs %lld (base) and %lld (new), order %s -> %s\n"
      "judge them with: seqbench compare %lld %lld --db %s\n",
      (long long)result.base_run_id, (long long)result.new_run_id, result.order.c_str(),
      escape::TerminalText(f.db_path, false).c_str(), (long long)result.base_run_id,
      (long long)result.new_run_id, escape::TerminalText(f.db_path, false).c_str());
  return 0;
}

}  // namespace seqbench::cli
