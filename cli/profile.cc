// `seqbench profile SUITE.toml --filter CASES`: the ops a case's step spends its time in
// (harness/op_profile.h), for the profiles the families' READMEs cite next to their
// numbers. Each matching case is set up as `run` sets it up (same weights, batch, threads
// and malloc policy; unchecked), warmed up, then profiled over --steps steps.
#include <algorithm>
#include <boost/program_options.hpp>
#include <cstdio>
#include <string>
#include <vector>

#include "cli/command.h"
#include "harness/benchmark_run.h"
#include "harness/memory.h"
#include "harness/op_profile.h"
#include "harness/runner.h"
#include "harness/suite.h"
#include "harness/threads.h"
#include "reports/escape/terminal.h"
#include "results/records.h"

namespace po = boost::program_options;

namespace seqbench::cli {
namespace {

struct ProfileFlags {
  std::string suite_path, filter;
  int64_t steps = 5, top = 15;
};

// Parses and checks the flags; false after --help.
bool ParseProfileFlags(const std::vector<std::string>& args, ProfileFlags& f) {
  po::options_description options(
      "Usage: seqbench profile SUITE.toml --filter CASES [--steps N] [--top K]\n\n"
      "Sets up each case of the suite that --filter selects as `run` would (unchecked), warms\n"
      "it up, runs N steps under LibTorch's autograd profiler and prints the K ops with the\n"
      "most self time a step: an op's own time, less the ops it called, on the thread that\n"
      "runs the step. Custom autograd nodes and hand-written kernels show under their node's\n"
      "name. The profiler adds a few microseconds an op: the figures apportion a step; `run`\n"
      "times it.\n\nOptions");
  options.add_options()("help,h", "show this help")(
      "filter", po::value(&f.filter), "cases to profile (a regular expression over case keys)")(
      "steps", po::value(&f.steps)->default_value(5), "profiled steps per case (1 to 100)")(
      "top", po::value(&f.top)->default_value(15), "ops shown per case (1 to 1000)");
  po::options_description hidden;
  hidden.add_options()("suite", po::value(&f.suite_path));
  po::positional_options_description positional;
  positional.add("suite", 1);
  const auto values = ParseArguments(args, options, hidden, positional, "profile");
  if (!values) return false;
  if (f.suite_path.empty())
    throw UsageError("profile: give the suite file (seqbench profile --help)");
  if (!values->count("filter"))
    throw UsageError(
        "profile: give --filter CASES (profiling every case of a suite is rarely meant)");
  CheckFilterFlag("profile", f.filter);
  if (f.steps < 1 || f.steps > 100)  // the whole trace is held in memory
    throw UsageError("profile: --steps must be 1 to 100, got " + std::to_string(f.steps));
  if (f.top < 1 || f.top > 1000)
    throw UsageError("profile: --top must be 1 to 1000, got " + std::to_string(f.top));
  return true;
}

void PrintProfile(const std::string& key, const OpProfile& profile, int64_t top) {
  std::printf("%s\n", escape::TerminalText(key, false).c_str());
  std::printf("  %lld steps, %.1f ms a step under the profiler; ops' self time %.1f ms a step\n",
              (long long)profile.steps, profile.wall_ms, profile.self_ms);
  std::printf(
      "  outside any recorded op: %.1f ms a step (code no op wraps, such as a custom autograd\n"
      "  function's forward, and the Python-free glue between ops)\n",
      std::max(0.0, profile.wall_ms - profile.self_ms));
  std::printf("  %10s %6s %10s %9s  %s\n", "self ms", "share", "total ms", "calls", "op");
  for (size_t i = 0; i < profile.ops.size() && static_cast<int64_t>(i) < top; ++i) {
    const OpTime& op = profile.ops[i];
    const double share = profile.self_ms > 0 ? 100 * op.self_ms / profile.self_ms : 0;
    std::printf("  %10.2f %5.1f%% %10.2f %9.1f  %s\n", op.self_ms, share, op.total_ms, op.calls,
                escape::TerminalText(op.name, false).c_str());
  }
}

}  // namespace

int RunProfile(const std::vector<std::string>& args) {
  ProfileFlags f;
  if (!ParseProfileFlags(args, f)) return 0;
  const Suite suite = LoadSuiteOrUsageError(f.suite_path);
  CaseSelection selection;
  selection.filter = f.filter;
  const std::vector<CaseSpec> cases = SelectCases(suite, selection);
  if (cases.empty()) throw UsageError("profile: no case of " + f.suite_path + " matches --filter");
  RetainFreedMemory();  // the malloc policy `run` measures under
  CaseRunner runner(suite, CheckPolicy::kNone);
  bool all_profiled = true;
  for (const CaseSpec& spec : cases) {
    const std::string key = spec.Key();
    if (spec.variant.peer) {
      std::printf("%s\n  (a peer: it runs in its own Python process; not profiled)\n",
                  escape::TerminalText(key, false).c_str());
      continue;
    }
    std::unique_ptr<PreparedCase> prepared = runner.Prepare(spec);
    if (!prepared->ready) {
      std::printf("%s\n  (%s: %s)\n", escape::TerminalText(key, false).c_str(),
                  prepared->result.status.c_str(),
                  escape::TerminalText(prepared->result.message, false).c_str());
      all_profiled = all_profiled && prepared->result.status == kStatusSkipped;
      continue;
    }
    SetThreads(spec.workload.threads);
    PrintProfile(key, ProfileSteps(prepared->step, f.steps), f.top);
  }
  return all_profiled ? 0 : 1;
}

}  // namespace seqbench::cli
