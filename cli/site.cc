// `seqbench site OUT_DIR`: the static site over the given databases (reports/site.h),
// written page by page into OUT_DIR and nowhere else.
#include "reports/site.h"

#include <sys/stat.h>

#include <boost/program_options.hpp>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "base/files.h"
#include "cli/command.h"
#include "cli/progress.h"
#include "reports/escape/terminal.h"

namespace po = boost::program_options;

namespace seqbench::cli {
namespace {

// OUT_DIR as a folder seqbench may write into: created if missing; a symbolic link or a
// file there is refused (exit 2), so that no page lands outside the folder named.
void PrepareOutputFolder(const std::string& folder) {
  struct stat info {};
  if (::lstat(folder.c_str(), &info) == 0) {
    if (S_ISLNK(info.st_mode))
      throw UsageError("site: " + folder + " is a symbolic link; name a real folder");
    if (!S_ISDIR(info.st_mode))
      throw UsageError("site: " + folder + " exists and is not a folder; name a folder");
    return;
  }
  if (::mkdir(folder.c_str(), 0755) != 0)
    throw UsageError("site: cannot create " + folder + ": " + std::strerror(errno));
}

// Removes the pages an earlier site wrote into `folder` that `pages` no longer has (a run
// removed by `seqbench rm`, a suite renamed), after the new pages are all written: only
// regular files whose names the site gives (IsSitePageName), never a link, a folder or a
// file of the user's. Returns how many were removed.
size_t RemoveStalePages(const std::string& folder, const std::vector<SitePage>& pages) {
  std::set<std::string> written;
  for (const SitePage& page : pages) written.insert(page.name);
  size_t removed = 0;
  for (const auto& entry : std::filesystem::directory_iterator(folder)) {
    const std::string name = entry.path().filename().string();
    if (!entry.is_regular_file() || entry.is_symlink() || written.count(name) != 0 ||
        !IsSitePageName(name))
      continue;
    if (!RemoveTree(entry.path().string()))
      throw std::runtime_error("site: cannot remove the stale page " + entry.path().string());
    ++removed;
  }
  return removed;
}

}  // namespace

int RunSite(const std::vector<std::string>& args) {
  std::string folder;
  std::vector<std::string> db_paths;
  po::options_description options(
      "Usage: seqbench site OUT_DIR [--db FILE]...\n\n"
      "Writes a static site (plain HTML and SVG, no script; opens from file://) into\n"
      "OUT_DIR: index.html with the suites and every run, a page per suite with one trend\n"
      "chart per case and machine (the median step over the runs, its IQR band, change\n"
      "points; seqbench history; the runs in git's commit order where git here knows\n"
      "them), regressions.html with every change point newest first, and a page per run\n"
      "(its report, warnings, check, environment and the suite's runs before and after).\n"
      "Pages are named from run numbers and suite names (made safe), so links into the\n"
      "site stay as runs are added; nothing is written outside OUT_DIR, which is created\n"
      "if missing, and the pages an earlier site wrote there that this one no longer has\n"
      "(a removed run, a renamed suite) are removed; no other file is touched. Progress\n"
      "shows on stderr when it is a terminal.\n\nOptions");
  options.add_options()("help,h", "show this help");
  DeclareDatabases(options, db_paths);
  po::options_description hidden;
  hidden.add_options()("out", po::value(&folder));
  po::positional_options_description positional;
  positional.add("out", 1);
  const auto values = ParseArguments(args, options, hidden, positional, "site");
  if (!values) return 0;
  if (folder.empty()) throw UsageError("site: give the folder to write, e.g. docs/site");
  const std::vector<std::unique_ptr<Store>> stores = OpenExistingStores(db_paths, "site");
  SiteOptions site_options;
  site_options.commit_order = GitCommitOrder();
  TerminalProgress progress("site: runs and suites");
  site_options.on_progress = [&progress](size_t done, size_t total) {
    progress.Update(done, total);
  };
  const std::vector<SitePage> pages = BuildSite(StorePointers(stores), site_options);
  progress.Finish();
  PrepareOutputFolder(folder);
  size_t bytes = 0;
  for (const SitePage& page : pages) {
    const std::string path = folder + "/" + page.name;
    try {
      for (const std::string& db : db_paths) RefuseDatabaseOutput(path, db, "OUT_DIR");
      WriteFileAtomically(path, page.html);
    } catch (const OutputRefused& refused) {
      throw UsageError("site: " + std::string(refused.what()));
    }
    bytes += page.html.size();
  }
  const size_t removed = RemoveStalePages(folder, pages);
  std::cout << "site: " << pages.size() << " pages, " << bytes / 1024 << " KiB in "
            << escape::TerminalText(folder, false) << "/index.html";
  if (removed > 0) std::cout << "; " << removed << " stale page(s) of an earlier site removed";
  std::cout << "\n";
  return 0;
}

}  // namespace seqbench::cli
