// A static site over one or more stores: plain HTML with inline SVG, no script, no server,
// readable from file://. index.html lists the suites and every run; a suite's page has one
// trend chart per case and machine (reports/history.h: the median step over the runs with
// its IQR band, the change points marked, each point a link to its run; the x axis names
// each run's commit and date, in commit order where git's order is given, the y axis its
// unit); regressions.html lists every change point of every suite and store, newest first,
// with links to its chart and to the runs on either side; a run's page is its Markdown
// report rendered to HTML by cmark-gfm, with its warnings, its `check` verdicts, its
// environment and links to the suite's runs before and after it; an A/B pair's page (seqbench ab)
// compares its two sides as `compare` judges a pair, with the functions that moved in each counted
// case that moved; a run group's page lists its shards and renders the group read whole (results/
// run_group.h). Every user-written string is HTML-escaped
// (escape::HtmlText) or Markdown-escaped before cmark-gfm renders it; file names are made
// here from numbers and, for a suite's page, NameStem (base/text.h) of its name, so no user
// text reaches a path unmade: a suite's page and its charts' anchors are named for what they
// show, and a link into the site keeps working as other suites, cases and machines appear.
//
// Thread-safety: pure functions over the stores they are given.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "results/store.h"

namespace seqbench {

struct SitePage {
  std::string name;  // "index.html", "regressions.html", "suite-ci.html",
                     // "run-42-<10 hex>.html", "ab-42-<hex>", "group-g1-<hex>": named for
                     // the run (its id, a hash of its uuid) and NameStem, never by position
  std::string html;
};

struct SiteOptions {
  // Commits in git's topological order, oldest first (HistoryRequest::commit_order; reports/
  // reads only the store, so the caller asks git): the charts' runs go in commit order
  // where every run's commit is among them, else in start order.
  std::vector<std::string> commit_order;
  // Called after each run's and each suite's pages, with how many of `total` are made
  // (the caller's progress line); called on the calling thread. May be empty.
  std::function<void(size_t done, size_t total)> on_progress;
};

// Every page of the site over `stores`; a page's name does not depend on their order.
std::vector<SitePage> BuildSite(const std::vector<const Store*>& stores,
                                const SiteOptions& options = {});

// Whether `file` is a name BuildSite gives a page ("suite-ci.html", "run-42-<hex>.html",
// ...) or gave one before 2026-12-04 ("run-1-42.html"): the files a later site over other
// runs may remove from its folder as stale.
bool IsSitePageName(const std::string& file);

// Markdown (GitHub's dialect with tables) as HTML through cmark-gfm, raw HTML left out.
std::string MarkdownToHtml(const std::string& markdown);

}  // namespace seqbench
