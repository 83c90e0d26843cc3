// `seqbench bisect GOOD BAD [--suite S] [--filter CASES] [--count-threshold 1%]`: the first
// commit between GOOD and BAD whose counted instructions moved past the threshold.
//
// The search is the checkout's own ci/bisect (built on ci/lib/revision_counts.sh: each
// commit built at most once in a kept worktree, counted, and judged with `compare --gate
// counts`), so that CI and a user run one implementation. This command checks what it can
// before anything is built (a repository, two commits it knows, GOOD an ancestor of BAD, a
// suite BAD has, a threshold, a filter) and refuses bad input with exit 2; then it runs
// the script in the repository's root with the terminal as its output, stops it, builds
// and all, on Ctrl-C, and passes its exit status on: 0 a commit named, 1 BAD did not move
// against GOOD, 2 bad input or an answer left between commits that do not build.
#include <boost/program_options.hpp>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "base/process.h"
#include "cli/command.h"
#include "reports/escape/terminal.h"

namespace po = boost::program_options;

namespace seqbench::cli {
namespace {

struct BisectFlags {
  std::vector<std::string> revisions;
  std::string suite = "suites/ci.toml";
  std::string filter;
  std::string count_threshold = "1%";
};

std::optional<BisectFlags> ParseBisectFlags(const std::vector<std::string>& args) {
  BisectFlags f;
  po::options_description options(
      "seqbench bisect GOOD BAD [options]: the first commit on BAD's first-parent line after "
      "GOOD whose counted instructions per step moved (more or fewer) past the threshold "
      "against GOOD, each commit built once in build/gate/base of this checkout (ci/bisect)");
  options.add_options()("suite", po::value(&f.suite)->default_value(f.suite),
                        "the suite to count, a path in the repository (each commit's own copy)")(
      "filter", po::value(&f.filter), "count only the cases matching this regex")(
      "count-threshold", po::value(&f.count_threshold)->default_value(f.count_threshold),
      "how far a case's instructions must move: 1% or 0.01")("help,h", "show this help");
  po::options_description hidden;
  hidden.add_options()("revision", po::value(&f.revisions));
  po::positional_options_description positional;
  positional.add("revision", -1);
  if (!ParseArguments(args, options, hidden, positional, "bisect")) return std::nullopt;
  if (f.revisions.size() != 2)
    throw UsageError("bisect: give two commits, GOOD and BAD (seqbench bisect --help)");
  ParseThreshold(f.count_threshold, "bisect --count-threshold");
  if (!f.filter.empty()) CheckFilterFlag("bisect", f.filter);
  return f;
}

// The repository's root, which has ci/bisect: the checkout this command works in.
std::filesystem::path CheckoutRoot() {
  const auto root = GitLines({"rev-parse", "--show-toplevel"});
  if (!root || root->empty())
    throw UsageError("bisect: not inside a git repository; run it in a seqbench checkout");
  const std::filesystem::path path = root->front();
  if (!std::filesystem::is_regular_file(path / "ci" / "bisect"))
    throw UsageError("bisect: " + escape::TerminalText(path.string()) +
                     " has no ci/bisect; run it in a seqbench checkout");
  return path;
}

// GOOD's and BAD's full SHAs, checked: what ci/bisect is given, so that no revision the
// user typed reaches it as something else (an option).
std::vector<std::string> CheckedRevisions(const BisectFlags& f) {
  std::vector<std::string> shas;
  for (const std::string& revision : f.revisions) {
    const auto sha = CommitSha(revision);
    if (!sha)
      throw UsageError("bisect: '" + escape::TerminalText(revision) +
                       "' is not a commit this repository knows (git rev-parse)");
    shas.push_back(*sha);
  }
  if (shas[0] == shas[1]) throw UsageError("bisect: GOOD and BAD are one commit");
  if (!GitLines({"merge-base", "--is-ancestor", shas[0], shas[1]}))
    throw UsageError("bisect: GOOD " + shas[0].substr(0, 12) + " is not an ancestor of BAD " +
                     shas[1].substr(0, 12) + "; give the older commit first");
  if (!GitLines({"cat-file", "-e", shas[1] + ":" + f.suite}))
    throw UsageError("bisect: BAD " + shas[1].substr(0, 12) + " has no '" +
                     escape::TerminalText(f.suite) +
                     "' (--suite takes a path in the repository, e.g. suites/ci.toml)");
  return shas;
}

}  // namespace

int RunBisect(const std::vector<std::string>& args) {
  const std::optional<BisectFlags> f = ParseBisectFlags(args);
  if (!f) return 0;
  const std::filesystem::path root = CheckoutRoot();
  const std::vector<std::string> shas = CheckedRevisions(*f);
  ChildSpec spec;
  spec.argv = {(root / "ci" / "bisect").string(),
               shas[0],
               shas[1],
               "--suite",
               f->suite,
               "--count-threshold",
               f->count_threshold};
  if (!f->filter.empty()) spec.argv.insert(spec.argv.end(), {"--filter", f->filter});
  spec.working_dir = root.string();
  InstallStopHandlers();
  spec.should_stop = StopRequested;
  const ChildOutcome outcome = RunChild(spec);
  if (outcome.end == ChildOutcome::End::kExited) return outcome.exit_code;
  std::fprintf(stderr, "seqbench bisect: ci/bisect %s\n",
               escape::TerminalText(outcome.Describe()).c_str());
  return outcome.end == ChildOutcome::End::kInterrupted ? 130 : 1;
}

}  // namespace seqbench::cli
