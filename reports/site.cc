#include "reports/site.h"

#include <cmark-gfm-core-extensions.h>
#include <cmark-gfm.h>

#include <algorithm>
#include <cstdio>
#include <map>

#include "reports/check.h"
#include "reports/compare.h"
#include "reports/escape/html.h"
#include "reports/format.h"
#include "reports/history.h"
#include "reports/report.h"
#include "reports/training.h"
#include "results/machine.h"
#include "results/run_group.h"

namespace seqbench {

std::string MarkdownToHtml(const std::string& markdown) {
  cmark_gfm_core_extensions_ensure_registered();
  cmark_parser* parser = cmark_parser_new(CMARK_OPT_DEFAULT);
  cmark_syntax_extension* table = cmark_find_syntax_extension("table");
  cmark_parser_attach_syntax_extension(parser, table);
  cmark_parser_feed(parser, markdown.data(), markdown.size());
  cmark_node* root = cmark_parser_finish(parser);
  // CMARK_OPT_DEFAULT leaves raw HTML out ("<!-- raw HTML omitted -->").
  char* html =
      cmark_render_html(root, CMARK_OPT_DEFAULT, cmark_parser_get_syntax_extensions(parser));
  std::string text(html);
  cmark_get_default_mem_allocator()->free(html);
  cmark_node_free(root);
  cmark_parser_free(parser);
  return text;
}

namespace {

using escape::HtmlText;

std::string Page(const std::string& title, const std::string& body) {
  return "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>" +
         HtmlText(title) +
         "</title><style>body{font-family:sans-serif;margin:2em;max-width:80em}"
         "h2{font-size:1em}table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:2px "
         "6px}"
         "</style></head><body>\n<p><a href=\"index.html\">seqbench runs</a></p>\n<h1>" +
         HtmlText(title) + "</h1>\n" + body + "</body></html>\n";
}

std::string RunPageName(size_t store, int64_t run_id) {
  return "run-" + std::to_string(store) + "-" + std::to_string(run_id) + ".html";
}

// SVG coordinates of a chart `kWidth` by `kHeight` with its plot inside `kMargin`.
constexpr double kWidth = 640, kHeight = 180, kMargin = 40;

std::string Number(double value) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.1f", value);
  return text;
}

// One series: the IQR band, the medians' line, a linked dot per run, a dashed line before
// each change with its ratio.
std::string TrendChart(const HistorySeries& series, const std::map<std::string, size_t>& stores) {
  double low = series.points.front().low, high = series.points.front().high;
  for (const HistoryPoint& p : series.points)
    low = std::min(low, p.low), high = std::max(high, p.high);
  if (!(high > low)) high = low * 1.01 + 1e-12;
  const size_t n = series.points.size();
  const auto x = [&](double i) {
    return kMargin + (n > 1 ? i * (kWidth - 2 * kMargin) / static_cast<double>(n - 1) : 0);
  };
  const auto y = [&](double v) {
    return kHeight - kMargin + 10 - (v - low) / (high - low) * (kHeight - 2 * kMargin);
  };
  std::string band, line, dots;
  for (size_t i = 0; i < n; ++i)
    band += Number(x(i)) + "," + Number(y(series.points[i].high)) + " ";
  for (size_t i = n; i-- > 0;) band += Number(x(i)) + "," + Number(y(series.points[i].low)) + " ";
  for (size_t i = 0; i < n; ++i) {
    const HistoryPoint& p = series.points[i];
    line += Number(x(i)) + "," + Number(y(p.value)) + " ";
    dots += "<a href=\"" + RunPageName(stores.at(p.database), p.run_id) + "\"><circle cx=\"" +
            Number(x(i)) + "\" cy=\"" + Number(y(p.value)) + "\" r=\"3\"><title>run " +
            std::to_string(p.run_id) + " " + HtmlText(p.git_sha.substr(0, 10)) + ": " +
            FormatSignificant(p.value, 3) + "</title></circle></a>";
  }
  std::string changes;
  for (const stats::ChangePoint& change : series.changes) {
    const double at = x(static_cast<double>(change.index) - 0.5);
    changes += "<line x1=\"" + Number(at) + "\" x2=\"" + Number(at) + "\" y1=\"10\" y2=\"" +
               Number(kHeight - kMargin + 10) + "\" stroke=\"red\" stroke-dasharray=\"4\"/>" +
               "<text x=\"" + Number(at + 3) + "\" y=\"20\" fill=\"red\" font-size=\"11\">" +
               FormatSignificant(change.ratio.estimate, 3) + "×</text>";
  }
  return "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + Number(kWidth) + "\" height=\"" +
         Number(kHeight) + "\" role=\"img\"><polygon points=\"" + band +
         "\" fill=\"#cde\" stroke=\"none\"/><polyline points=\"" + line +
         "\" fill=\"none\" stroke=\"#246\"/>" + dots + changes + "<text x=\"2\" y=\"" +
         Number(y(high) + 4) + "\" font-size=\"10\">" + FormatSignificant(high, 3) +
         "</text><text x=\"2\" y=\"" + Number(y(low)) + "\" font-size=\"10\">" +
         FormatSignificant(low, 3) + "</text></svg>\n";
}

std::string SuitePage(const std::string& suite, const std::vector<HistorySeries>& series,
                      const std::map<std::string, size_t>& stores) {
  std::string body =
      "<p>The median step (s) of each case over the suite's complete runs, in start order; "
      "the band is the samples' interquartile range, a red dashed line a change point with "
      "its ratio of medians (reports/README.md, \"history and change points\"). A new "
      "machine starts a new chart. Each dot links to its run.</p>\n";
  for (const HistorySeries& s : series) {
    body += "<h2>" + HtmlText(s.case_key) + "</h2>\n<p>" + HtmlText(s.machine) + "</p>\n" +
            TrendChart(s, stores);
  }
  return Page("suite " + suite, body);
}

std::string RunPage(const Store& store, const RunRecord& run) {
  const std::vector<CaseRecord> cases = store.Cases(run.run_id);
  std::string body = "<p>" +
                     HtmlText(run.kind + " run " + std::to_string(run.run_id) + " of " +
                              store.path() + ", " + run.status + ", started " + run.started_at +
                              (run.label.empty() ? "" : ", label " + run.label) + ", git " +
                              run.Environment("git_sha")) +
                     "</p>\n";
  const std::string markdown =
      run.kind == kRunKindTraining ? RenderTrainingTable(cases) : RenderMarkdown(run, cases);
  body += MarkdownToHtml(markdown + "\n" + RenderWarnings(RunWarnings(run, cases)));
  if (!run.expectations.empty() && run.kind != kRunKindTraining && run.status == "complete") {
    body += "<h2>check</h2>\n<table><tr><th></th><th>expectation</th><th>measured</th></tr>\n";
    for (const ExpectationOutcome& o : EvaluateExpectations(run.expectations, cases, &run)) {
      body += "<tr><td>" + std::string(o.held ? "✓" : "✗") + "</td><td>" + HtmlText(o.expectation) +
              "</td><td>" + HtmlText(o.measured) + "</td></tr>\n";
    }
    body += "</table>\n";
  }
  body += "<h2>environment</h2>\n<table>\n";
  for (const auto& [key, value] : run.environment)
    body += "<tr><td>" + HtmlText(key) + "</td><td>" + HtmlText(value) + "</td></tr>\n";
  return Page("run " + std::to_string(run.run_id) + ": " + run.suite_name, body + "</table>\n");
}

// An A/B pair's page (seqbench ab): the new side against the base, judged on the ratios
// of their rounds as `compare` judges a pair, and, where both sides were counted, the
// functions that moved in each moved case (as `compare` prints them).
std::string AbPairPage(const Store& store, const RunRecord& base, const RunRecord& next) {
  CompareSettings settings;
  settings.paired = true;
  const std::vector<CaseRecord> base_cases = store.Cases(base.run_id);
  const std::vector<CaseRecord> new_cases = store.Cases(next.run_id);
  const bool counted = HasCounts(base_cases) && HasCounts(new_cases);
  const std::vector<CaseComparison> comparisons = CompareCases(base_cases, new_cases, settings);
  const std::string body =
      "<p>" +
      HtmlText("seqbench ab pair of " + store.path() + ": base run " + std::to_string(base.run_id) +
               " (" + base.Environment("ab_binary") + "), new run " + std::to_string(next.run_id) +
               " (" + next.Environment("ab_binary") + "), label " + base.label) +
      "; each case judged on the ratios of its rounds (new / base), at compare's defaults: " +
      FormatSignificant(settings.threshold * 100, 3) + "% threshold, " +
      FormatSignificant(settings.confidence * 100, 3) + "% interval.</p>\n" +
      MarkdownToHtml(RenderCompareTable(comparisons, counted)) +
      MarkdownToHtml(RenderMovedFunctions(comparisons));
  return Page("A/B pair: " + base.suite_name + ", runs " + std::to_string(base.run_id) + " and " +
                  std::to_string(next.run_id),
              body);
}

// A run group's page: its shards, and the group read whole (one table set per machine),
// or what keeps it from being whole.
std::string GroupPage(const Store& store, const std::string& group, size_t store_number) {
  std::string body = "<p>" + HtmlText("run group " + group + " of " + store.path()) + "</p>\n";
  std::vector<GatheredRun> parts;
  try {
    parts = GatherGroup(store, group, MixedMachines::kSplit);
  } catch (const GroupError& error) {
    return Page("group " + group, body + "<pre>" + HtmlText(error.what()) + "</pre>\n");
  }
  body += "<ul>\n";
  for (const GatheredRun& part : parts) {
    for (const RunRecord& shard : part.shards) {
      body += "<li><a href=\"" + RunPageName(store_number, shard.run_id) + "\">shard " +
              HtmlText(shard.shard) + ": run " + std::to_string(shard.run_id) + "</a></li>\n";
    }
  }
  body += "</ul>\n";
  for (const GatheredRun& part : parts) {
    if (parts.size() > 1) body += "<h2>" + HtmlText(MachineText(MachineOf(part.run))) + "</h2>\n";
    body += MarkdownToHtml(RenderMarkdown(part.run, part.cases));
  }
  return Page("group " + group + ": " + parts[0].run.suite_name, body);
}

// index.html's lists, filled as the pages are made.
struct SiteIndex {
  std::string runs, pairs, groups;
  std::vector<std::string> suites;
};

// A page per run of store `k` (from 1), per A/B pair and per run group in it.
void AddStorePages(const Store& store, size_t k, std::vector<SitePage>& pages, SiteIndex& index) {
  std::vector<std::string> groups;
  for (const RunRecord& listed : store.Runs()) {
    const RunRecord run = *store.FindRun(listed.run_id);
    index.suites.push_back(run.suite_name);
    pages.push_back({RunPageName(k, run.run_id), RunPage(store, run)});
    index.runs += "<tr><td>" + HtmlText(store.path()) + "</td><td><a href=\"" + pages.back().name +
                  "\">" + std::to_string(run.run_id) + "</a></td><td>" + HtmlText(run.suite_name) +
                  "</td><td>" + HtmlText(run.label) + "</td><td>" + HtmlText(run.status) +
                  "</td><td>" + HtmlText(run.started_at) + "</td></tr>\n";
    if (!run.group.empty() && std::find(groups.begin(), groups.end(), run.group) == groups.end())
      groups.push_back(run.group);
    if (run.Environment("ab_side") != "base") continue;
    const auto partner = store.FindRunByUuid(run.Environment("ab_pair"));
    if (!partner || !IsAbPair(run, *partner)) continue;
    pages.push_back({"ab-" + std::to_string(k) + "-" + std::to_string(run.run_id) + ".html",
                     AbPairPage(store, run, *partner)});
    index.pairs += "<li><a href=\"" + pages.back().name + "\">" +
                   HtmlText(run.suite_name + ": runs " + std::to_string(run.run_id) + " and " +
                            std::to_string(partner->run_id) + ", " + run.started_at) +
                   "</a></li>\n";
  }
  for (size_t g = 0; g < groups.size(); ++g) {
    pages.push_back({"group-" + std::to_string(k) + "-" + std::to_string(g + 1) + ".html",
                     GroupPage(store, groups[g], k)});
    index.groups += "<li><a href=\"" + pages.back().name + "\">" +
                    HtmlText(groups[g] + " (" + store.path() + ")") + "</a></li>\n";
  }
}

}  // namespace

std::vector<SitePage> BuildSite(const std::vector<const Store*>& stores) {
  std::vector<SitePage> pages;
  SiteIndex index;
  std::map<std::string, size_t> store_numbers;
  for (size_t k = 0; k < stores.size(); ++k) {
    store_numbers[stores[k]->path()] = k + 1;
    AddStorePages(*stores[k], k + 1, pages, index);
  }
  std::vector<std::string>& suites = index.suites;
  std::sort(suites.begin(), suites.end());
  suites.erase(std::unique(suites.begin(), suites.end()), suites.end());
  std::string html = "<h2>suites</h2>\n<ul>\n";
  for (size_t i = 0; i < suites.size(); ++i) {
    HistoryRequest request;
    request.suite = suites[i];
    request.metric = FindHistoryMetric("runtime");
    const std::vector<HistorySeries> series = BuildHistory(stores, request);
    if (series.empty()) continue;  // training suites, or no complete run
    const std::string name = "suite-" + std::to_string(i + 1) + ".html";
    pages.push_back({name, SuitePage(suites[i], series, store_numbers)});
    html += "<li><a href=\"" + name + "\">" + HtmlText(suites[i]) + "</a> (" +
            std::to_string(series.size()) + " charts)</li>\n";
  }
  html += "</ul>\n";
  if (!index.pairs.empty()) html += "<h2>A/B pairs</h2>\n<ul>\n" + index.pairs + "</ul>\n";
  if (!index.groups.empty()) html += "<h2>run groups</h2>\n<ul>\n" + index.groups + "</ul>\n";
  html +=
      "<h2>runs</h2>\n<table><tr><th>database</th><th>run</th><th>suite</th>"
      "<th>label</th><th>status</th><th>started</th></tr>\n" +
      index.runs + "</table>\n";
  pages.push_back({"index.html", Page("seqbench runs", html)});
  return pages;
}

}  // namespace seqbench
