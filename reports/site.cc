#include "reports/site.h"

#include <cmark-gfm-core-extensions.h>
#include <cmark-gfm.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <regex>
#include <set>
#include <utility>

#include "base/text.h"
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

bool IsSitePageName(const std::string& file) {
  static const std::regex page(
      "(index|regressions|suite-[A-Za-z0-9_-]{1,48}|(run|ab)-[0-9]+-[0-9a-f]{10}|"
      "group-[A-Za-z0-9_-]{1,48}-[0-9a-f]{10}|"
      // The names sites before 2026-12-04 gave, by the database's position: still the
      // site's, so that a new site removes them from its folder.
      "(run|ab|group)-[0-9]+-[0-9]+)\\.html");
  return std::regex_match(file, page);
}

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

// A run's page, and an A/B pair's or a run group's, is named for the run itself (its id
// and a hash of its uuid), never for the position of its database on the command line:
// a link into the site holds whatever other databases a later site is given, in any order.
std::string RunTag(const std::string& uuid) { return ContentHash(uuid).substr(0, 10); }
std::string RunPageName(int64_t run_id, const std::string& uuid) {
  return "run-" + std::to_string(run_id) + "-" + RunTag(uuid) + ".html";
}

// A chart's frame, in SVG units: the plot inside margins that hold the axes' labels.
constexpr double kWidth = 700, kHeight = 210, kLeft = 72, kRight = 36, kTop = 24, kBottom = 52;
// At most this many runs are named under the x axis (evenly spaced, the first and last
// always), so that the labels never overlap.
constexpr size_t kMaxAxisLabels = 8;

std::string Number(double value) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.1f", value);
  return text;
}

std::string AxisSha(const std::string& sha) { return ShortSha(sha, 7, "no git"); }

// The points named under the x axis: every one up to kMaxAxisLabels, else that many spread
// evenly from the first to the last.
std::vector<size_t> LabelledPoints(size_t n) {
  std::vector<size_t> labelled;
  const size_t count = std::min(n, kMaxAxisLabels);
  for (size_t k = 0; k < count; ++k) {
    const size_t i = count == 1 ? 0 : (k * (n - 1) + (count - 1) / 2) / (count - 1);
    if (labelled.empty() || labelled.back() != i) labelled.push_back(i);
  }
  return labelled;
}

// The plot's scale: run i to x, a value to y.
struct ChartScale {
  size_t n;
  double low, high;
  double X(double i) const {
    const double span = kWidth - kLeft - kRight;
    return kLeft + (n > 1 ? i * span / static_cast<double>(n - 1) : span / 2);
  }
  double Y(double v) const { return kTop + (high - v) / (high - low) * (kHeight - kTop - kBottom); }
};

ChartScale ScaleOf(const HistorySeries& series) {
  double low = series.points.front().low, high = series.points.front().high;
  for (const HistoryPoint& p : series.points)
    low = std::min(low, p.low), high = std::max(high, p.high);
  if (!(high > low)) high = low * 1.01 + 1e-12;
  return {series.points.size(), low, high};
}

std::string Text(double x, double y, const std::string& anchor, const std::string& text) {
  return "<text x=\"" + Number(x) + "\" y=\"" + Number(y) + "\" font-size=\"10\" text-anchor=\"" +
         anchor + "\">" + text + "</text>";
}

// The axes: the y axis with three values in the metric's unit and its name; the x axis
// with each labelled run's commit and date, and the order the runs are in.
std::string ChartAxes(const HistorySeries& series, const ChartScale& scale,
                      const HistoryMetric& metric) {
  const double bottom = kHeight - kBottom;
  std::string svg = "<g stroke=\"#888\"><line x1=\"" + Number(kLeft) + "\" x2=\"" + Number(kLeft) +
                    "\" y1=\"" + Number(kTop) + "\" y2=\"" + Number(bottom) + "\"/><line x1=\"" +
                    Number(kLeft) + "\" x2=\"" + Number(kWidth - kRight) + "\" y1=\"" +
                    Number(bottom) + "\" y2=\"" + Number(bottom) + "\"/></g>";
  svg += Text(kLeft, 12, "start", HtmlText(std::string(metric.name) + " (" + metric.unit + ")"));
  for (double v : {scale.low, (scale.low + scale.high) / 2, scale.high}) {
    svg += Text(kLeft - 4, scale.Y(v) + 3, "end",
                HtmlText(FormatSignificant(v, 3) + " " + metric.unit));
  }
  for (size_t i : LabelledPoints(series.points.size())) {
    const HistoryPoint& p = series.points[i];
    const double x = scale.X(static_cast<double>(i));
    svg += "<line x1=\"" + Number(x) + "\" x2=\"" + Number(x) + "\" y1=\"" + Number(bottom) +
           "\" y2=\"" + Number(bottom + 4) + "\" stroke=\"#888\"/>" +
           Text(x, bottom + 15, "middle", HtmlText(AxisSha(p.git_sha))) +
           Text(x, bottom + 27, "middle", HtmlText(DayOf(p.started_at)));
  }
  svg += Text((kLeft + kWidth - kRight) / 2, kHeight - 6, "middle",
              series.by_commit ? "commit (git's order)" : "run, in start order");
  return svg;
}

// One series: the IQR band, the medians' line, a linked dot per run, a dashed line before
// each change with its ratio, and the axes.
std::string TrendChart(const HistorySeries& series, const HistoryMetric& metric) {
  const ChartScale scale = ScaleOf(series);
  const size_t n = series.points.size();
  std::string band, line, dots;
  for (size_t i = 0; i < n; ++i)
    band += Number(scale.X(i)) + "," + Number(scale.Y(series.points[i].high)) + " ";
  for (size_t i = n; i-- > 0;)
    band += Number(scale.X(i)) + "," + Number(scale.Y(series.points[i].low)) + " ";
  for (size_t i = 0; i < n; ++i) {
    const HistoryPoint& p = series.points[i];
    line += Number(scale.X(i)) + "," + Number(scale.Y(p.value)) + " ";
    dots += "<a href=\"" + RunPageName(p.run_id, p.run_uuid) + "\"><circle cx=\"" +
            Number(scale.X(i)) + "\" cy=\"" + Number(scale.Y(p.value)) + "\" r=\"3\"><title>run " +
            std::to_string(p.run_id) + " " + HtmlText(ShortSha(p.git_sha, 10, "")) + " " +
            HtmlText(DayOf(p.started_at)) + ": " + HtmlText(FormatSignificant(p.value, 3)) + " " +
            metric.unit + "</title></circle></a>";
  }
  std::string changes;
  for (const stats::ChangePoint& change : series.changes) {
    const double at = scale.X(static_cast<double>(change.index) - 0.5);
    changes += "<line x1=\"" + Number(at) + "\" x2=\"" + Number(at) + "\" y1=\"" + Number(kTop) +
               "\" y2=\"" + Number(kHeight - kBottom) +
               "\" stroke=\"red\" stroke-dasharray=\"4\"/>" + "<text x=\"" + Number(at + 3) +
               "\" y=\"" + Number(kTop + 10) + "\" fill=\"red\" font-size=\"11\">" +
               FormatSignificant(change.ratio.estimate, 3) + "×</text>";
  }
  return "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + Number(kWidth) + "\" height=\"" +
         Number(kHeight) + "\" role=\"img\"><polygon points=\"" + band +
         "\" fill=\"#cde\" stroke=\"none\"/><polyline points=\"" + line +
         "\" fill=\"none\" stroke=\"#246\"/>" + dots + changes + ChartAxes(series, scale, metric) +
         "</svg>\n";
}

// A suite's page and a chart's anchor are named for what they show, not by position, so
// that a link into the site keeps working after other suites, cases or machines appear.
std::string SuitePageName(const std::string& suite) { return "suite-" + NameStem(suite) + ".html"; }
std::string ChartAnchor(const HistorySeries& s) {
  return "chart-" + ContentHash(s.case_key + '\n' + s.machine).substr(0, 10);
}

std::string SuitePage(const std::string& suite, const std::vector<HistorySeries>& series,
                      const HistoryMetric& metric) {
  std::string body =
      "<p>The median step (s) of each case over the suite's complete runs, in commit order "
      "where git here knew every run's commit, else in start order (each chart's x axis "
      "says which); the band is the samples' interquartile range, a red dashed line a "
      "change point with its ratio of medians (reports/README.md, \"history and change "
      "points\"; every change of every suite: <a href=\"regressions.html\">change "
      "points</a>). A new machine starts a new chart. Each dot links to its run.</p>\n";
  for (const HistorySeries& s : series) {
    body += "<h2 id=\"" + ChartAnchor(s) + "\">" + HtmlText(s.case_key) + "</h2>\n<p>" +
            HtmlText(s.machine) + "</p>\n" + TrendChart(s, metric);
  }
  return Page("suite " + suite, body);
}

// One change point of one series, for the regressions page.
struct ChangeEntry {
  std::string suite, chart;  // chart: "suite-ci.html#chart-0123456789"
  std::string case_key, machine;
  HistoryPoint before, after;  // the runs on either side of the change
  stats::ChangePoint change;
};

std::string RunLink(const HistoryPoint& p) {
  return "<a href=\"" + RunPageName(p.run_id, p.run_uuid) + "\">run " + std::to_string(p.run_id) +
         "</a> (" + HtmlText(AxisSha(p.git_sha)) + ", " + HtmlText(DayOf(p.started_at)) + ")";
}

// Every change point, newest first (by the start of the first run after it): asv's
// regressions page. A runtime ratio above 1 is a slowdown.
std::string RegressionsPage(std::vector<ChangeEntry> entries) {
  std::stable_sort(entries.begin(), entries.end(), [](const ChangeEntry& a, const ChangeEntry& b) {
    return a.after.started_at > b.after.started_at;
  });
  std::string body =
      "<p>Every change point in the median step of every suite's charts, over every "
      "database given, newest first (by the start of the first run after the change). The "
      "ratio is the median after over the median before, with its 95% interval; above 1 is "
      "slower. Each links to its chart and to the runs on either side of it.</p>\n";
  if (entries.empty())
    return Page("change points", body + "<p>No series has a change point.</p>\n");
  body +=
      "<table><tr><th>after</th><th>suite</th><th>case</th><th>machine</th><th>ratio</th>"
      "<th>p</th><th></th><th>before</th><th>after</th></tr>\n";
  for (const ChangeEntry& e : entries) {
    const stats::ChangePoint& c = e.change;
    body += "<tr><td>" + HtmlText(e.after.started_at) + "</td><td>" + HtmlText(e.suite) +
            "</td><td><a href=\"" + e.chart + "\">" + HtmlText(e.case_key) + "</a></td><td>" +
            HtmlText(e.machine) + "</td><td>" +
            HtmlText(FormatSignificant(c.ratio.estimate, 3) + "× (" +
                     FormatSignificant(c.ratio.low, 3) + "–" + FormatSignificant(c.ratio.high, 3) +
                     ")") +
            "</td><td>" + HtmlText(FormatSignificant(c.p_value, 2)) + "</td><td>" +
            (c.ratio.estimate > 1 ? "slower" : "faster") + "</td><td>" + RunLink(e.before) +
            "</td><td>" + RunLink(e.after) + "</td></tr>\n";
  }
  return Page("change points", body + "</table>\n");
}

// Links to the runs of the same suite just before and after `run_id` in `runs` (a store's
// runs of one suite, oldest first).
std::string NeighbourLinks(const std::vector<RunRecord>& runs, int64_t run_id) {
  const auto at = std::find_if(runs.begin(), runs.end(),
                               [&](const RunRecord& run) { return run.run_id == run_id; });
  std::string links;
  if (at != runs.begin()) {
    links += "<a href=\"" + RunPageName((at - 1)->run_id, (at - 1)->uuid) +
             "\" rel=\"prev\">← run " + std::to_string((at - 1)->run_id) + "</a>";
  }
  if (at != runs.end() && at + 1 != runs.end()) {
    links += std::string(links.empty() ? "" : " · ") + "<a href=\"" +
             RunPageName((at + 1)->run_id, (at + 1)->uuid) + "\" rel=\"next\">run " +
             std::to_string((at + 1)->run_id) + " →</a>";
  }
  return links.empty() ? "<p>The suite's only run here.</p>\n"
                       : "<p>The suite's runs before and after: " + links + "</p>\n";
}

std::string RunPage(const Store& store, const RunRecord& run, const std::string& neighbours) {
  const std::vector<CaseRecord> cases = store.Cases(run.run_id);
  std::string body = neighbours + "<p>" +
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
std::string GroupPage(const Store& store, const std::string& group) {
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
      body += "<li><a href=\"" + RunPageName(shard.run_id, shard.uuid) + "\">shard " +
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

// index.html's lists, filled as the pages are made; the progress made so far.
struct SiteIndex {
  std::string runs, pairs, groups;
  std::vector<std::string> suites;  // every suite's name, sorted
  size_t done = 0, total = 0;
  const SiteOptions* options = nullptr;

  void Advance() {
    ++done;
    if (options->on_progress) options->on_progress(done, total);
  }
};

// Each suite's runs in `store`, oldest first.
std::map<std::string, std::vector<RunRecord>> RunsBySuite(const std::vector<RunRecord>& runs) {
  std::map<std::string, std::vector<RunRecord>> by_suite;
  for (const RunRecord& run : runs) by_suite[run.suite_name].push_back(run);
  return by_suite;
}

// The page of an A/B pair whose base side is `run`, if its partner is in the store.
void AddPairPage(const Store& store, const RunRecord& run, std::vector<SitePage>& pages,
                 SiteIndex& index) {
  if (run.Environment("ab_side") != "base") return;
  const auto partner = store.FindRunByUuid(run.Environment("ab_pair"));
  if (!partner || !IsAbPair(run, *partner)) return;
  pages.push_back({"ab-" + std::to_string(run.run_id) + "-" + RunTag(run.uuid) + ".html",
                   AbPairPage(store, run, *partner)});
  index.pairs += "<li><a href=\"" + pages.back().name + "\">" +
                 HtmlText(run.suite_name + ": runs " + std::to_string(run.run_id) + " and " +
                          std::to_string(partner->run_id) + ", " + run.started_at) +
                 "</a></li>\n";
}

// A page per run of `store`, per A/B pair and per run group in it (a group's page named
// for the group and its first run there).
void AddStorePages(const Store& store, std::vector<SitePage>& pages, SiteIndex& index) {
  std::vector<std::pair<std::string, std::string>> groups;  // the group, its first run's uuid
  const std::vector<RunRecord> listed_runs = store.Runs();
  const auto by_suite = RunsBySuite(listed_runs);
  for (const RunRecord& listed : listed_runs) {
    const RunRecord run = *store.FindRun(listed.run_id);
    pages.push_back({RunPageName(run.run_id, run.uuid),
                     RunPage(store, run, NeighbourLinks(by_suite.at(run.suite_name), run.run_id))});
    index.runs += "<tr><td>" + HtmlText(store.path()) + "</td><td><a href=\"" + pages.back().name +
                  "\">" + std::to_string(run.run_id) + "</a></td><td>" + HtmlText(run.suite_name) +
                  "</td><td>" + HtmlText(run.label) + "</td><td>" + HtmlText(run.status) +
                  "</td><td>" + HtmlText(run.started_at) + "</td></tr>\n";
    const auto same_group = [&](const auto& known) { return known.first == run.group; };
    if (!run.group.empty() && std::none_of(groups.begin(), groups.end(), same_group))
      groups.emplace_back(run.group, run.uuid);
    AddPairPage(store, run, pages, index);
    index.Advance();
  }
  for (const auto& [group, first_uuid] : groups) {
    pages.push_back(
        {"group-" + NameStem(group) + "-" + RunTag(first_uuid) + ".html", GroupPage(store, group)});
    index.groups += "<li><a href=\"" + pages.back().name + "\">" +
                    HtmlText(group + " (" + store.path() + ")") + "</a></li>\n";
  }
}

// The suites' pages, and every change point in their charts for the regressions page.
std::string AddSuitePages(const std::vector<const Store*>& stores, std::vector<SitePage>& pages,
                          SiteIndex& index, std::vector<ChangeEntry>& changes) {
  const HistoryMetric& metric = *FindHistoryMetric("runtime");
  std::string html = "<h2>suites</h2>\n<ul>\n";
  for (size_t i = 0; i < index.suites.size(); ++i) {
    HistoryRequest request;
    request.suite = index.suites[i];
    request.metric = &metric;
    request.commit_order = index.options->commit_order;
    const std::vector<HistorySeries> series = BuildHistory(stores, request);
    index.Advance();
    if (series.empty()) continue;  // training suites, or no complete run
    const std::string name = SuitePageName(index.suites[i]);
    pages.push_back({name, SuitePage(index.suites[i], series, metric)});
    html += "<li><a href=\"" + name + "\">" + HtmlText(index.suites[i]) + "</a> (" +
            std::to_string(series.size()) + " charts)</li>\n";
    for (const HistorySeries& s : series) {
      for (const stats::ChangePoint& c : s.changes) {
        changes.push_back({index.suites[i], name + "#" + ChartAnchor(s), s.case_key, s.machine,
                           s.points[c.index - 1], s.points[c.index], c});
      }
    }
  }
  return html + "</ul>\n";
}

}  // namespace

std::vector<SitePage> BuildSite(const std::vector<const Store*>& stores,
                                const SiteOptions& options) {
  std::vector<SitePage> pages;
  SiteIndex index;
  index.options = &options;
  std::set<std::string> suite_names;
  for (const Store* store : stores) {
    const std::vector<RunRecord> runs = store->Runs();
    index.total += runs.size();
    for (const RunRecord& run : runs) suite_names.insert(run.suite_name);
  }
  index.total += suite_names.size();
  for (const Store* store : stores) AddStorePages(*store, pages, index);
  index.suites.assign(suite_names.begin(), suite_names.end());
  std::vector<ChangeEntry> changes;
  std::string html = AddSuitePages(stores, pages, index, changes);
  html += "<p><a href=\"regressions.html\">Change points</a>: " + std::to_string(changes.size()) +
          " over every suite's charts, newest first.</p>\n";
  pages.push_back({"regressions.html", RegressionsPage(changes)});
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
