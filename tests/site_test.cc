// The static site (reports/site.h) as a person browses it: each chart's axes name the runs'
// commits and dates and the metric's unit, the runs go in git's order when it is given,
// regressions.html lists every change point newest first with links to its chart and the
// runs on either side, each run page links to its suite's runs before and after it, and a
// suite's page and its charts are named for what they show, not by position.
#include "reports/site.h"

#include <catch2/catch.hpp>
#include <cstdio>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "base/text.h"

namespace seqbench {
namespace {

// The commit of run `i` of a fixture suite: 7 distinct leading characters, as a short SHA.
std::string ShaOf(char suite, int i) {
  const std::string digits = std::to_string(100 + i).substr(1);     // two digits
  return suite + digits + "0123456789abcdef0123456789abcdef01234";  // 40 characters
}

// A complete run of `suite` on day `day` of November 2026, minute `i`, whose case "step"
// takes `seconds` (samples 0.99, 1, 1, 1.01, 1.02 times it: median and mean differ).
void AddRun(Store& store, const std::string& suite, int day, int i, double seconds) {
  RunRecord run;
  run.uuid = suite + std::to_string(i);
  run.suite_name = suite;
  run.status = "complete";
  char started[32];
  std::snprintf(started, sizeof(started), "2026-11-%02dT10:%02d:00Z", day, i);
  run.started_at = started;
  run.environment = {{"cpu_model", "cpu A"}, {"git_sha", ShaOf(suite[0], i)}};
  const int64_t id = store.CreateRun(run);
  CaseRecord c;
  c.identity.variant_name = c.identity.variant_key = "step";
  c.status = kStatusOk;
  c.iterations = 1;
  c.tokens_per_step = 100;
  const double wobble = 1 + 0.004 * ((i * 7) % 5 - 2);  // ±0.8%, no trend
  for (double k : {0.99, 1.0, 1.0, 1.01, 1.02}) c.samples_s.push_back(seconds * wobble * k);
  store.AddCase(id, c);
}

// "demo" (runs 1-12, Nov 28) slows 1.5x from its 7th run; "older" (runs 13-24, Nov 20)
// gets 2x faster from its 7th.
void AddFixtureRuns(Store& store) {
  for (int i = 0; i < 12; ++i) AddRun(store, "demo", 28, i, i < 6 ? 0.010 : 0.015);
  for (int i = 0; i < 12; ++i) AddRun(store, "older", 20, i, i < 6 ? 1.0 : 0.5);
}

std::map<std::string, std::string> PagesByName(const std::vector<SitePage>& pages) {
  std::map<std::string, std::string> by_name;
  for (const SitePage& page : pages) by_name[page.name] = page.html;
  return by_name;
}

// The name of run `id`'s page ("run-ID-<10 hex>.html"), which must be the only one.
std::string RunPageOf(const std::map<std::string, std::string>& pages, int64_t id) {
  const std::regex shape("run-" + std::to_string(id) + "-[0-9a-f]{10}\\.html");
  std::vector<std::string> names;
  for (const auto& [name, html] : pages) {
    if (std::regex_match(name, shape)) names.push_back(name);
  }
  REQUIRE(names.size() == 1);
  return names[0];
}

// The texts of the x axis's labels that are short SHAs, in the order drawn.
std::vector<std::string> AxisShas(const std::string& html, char suite) {
  std::vector<std::string> shas;
  const std::regex label(std::string("text-anchor=\"middle\">(") + suite + "[0-9a-f]{6})</text>");
  for (auto it = std::sregex_iterator(html.begin(), html.end(), label);
       it != std::sregex_iterator(); ++it)
    shas.push_back((*it)[1]);
  return shas;
}

TEST_CASE("site: the charts' axes name commits, dates and the unit", "[site]") {
  Store store("");
  AddFixtureRuns(store);
  auto pages = PagesByName(BuildSite({&store}));
  const std::string& demo = pages.at("suite-demo.html");
  CHECK_THAT(demo, Catch::Contains("runtime (s)"));
  CHECK(std::regex_search(demo, std::regex(">[0-9.]+ s</text>")));  // a y value with its unit
  CHECK_THAT(demo, Catch::Contains(">2026-11-28</text>"));
  CHECK_THAT(demo, Catch::Contains("run, in start order"));
  // 12 runs: 8 named, the first and the last among them, in the order drawn.
  const std::vector<std::string> shas = AxisShas(demo, 'd');
  REQUIRE(shas.size() == 8);
  CHECK(shas.front() == ShaOf('d', 0).substr(0, 7));
  CHECK(shas.back() == ShaOf('d', 11).substr(0, 7));
  // 8 runs or fewer: every one named.
  Store few("");
  for (int i = 0; i < 6; ++i) AddRun(few, "few", 1, i, 1.0);
  CHECK(AxisShas(PagesByName(BuildSite({&few})).at("suite-few.html"), 'f').size() == 6);

  // In git's order where git knows every commit: here the reverse of the start order.
  SiteOptions options;
  for (int i = 11; i >= 0; --i) options.commit_order.push_back(ShaOf('d', i));
  pages = PagesByName(BuildSite({&store}, options));
  const std::string& by_commit = pages.at("suite-demo.html");
  CHECK_THAT(by_commit, Catch::Contains("commit (git's order)"));
  CHECK(AxisShas(by_commit, 'd').front() == ShaOf('d', 11).substr(0, 7));
  CHECK_THAT(pages.at("suite-older.html"),
             Catch::Contains("run, in start order"));  // not all known
}

TEST_CASE("site: regressions.html lists every change point, newest first, with links", "[site]") {
  Store store("");
  AddFixtureRuns(store);
  const auto pages = PagesByName(BuildSite({&store}));
  const std::string& page = pages.at("regressions.html");
  std::smatch demo_link, older_link;
  REQUIRE(std::regex_search(page, demo_link,
                            std::regex("href=\"suite-demo\\.html#(chart-[0-9a-f]{10})\"")));
  REQUIRE(std::regex_search(page, older_link,
                            std::regex("href=\"suite-older\\.html#(chart-[0-9a-f]{10})\"")));
  const size_t demo = demo_link.position(0);
  const size_t older = older_link.position(0);
  REQUIRE(demo != std::string::npos);
  REQUIRE(older != std::string::npos);
  CHECK(demo < older);  // Nov 28 before Nov 20
  // Each row links the runs on either side of its change: demo's 6th and 7th runs (ids 6
  // and 7), older's (ids 18 and 19).
  const std::string demo_row = page.substr(demo, older - demo);
  const auto link = [&](int64_t id) { return "href=\"" + RunPageOf(pages, id) + "\""; };
  CHECK_THAT(demo_row, Catch::Contains(link(6)) && Catch::Contains(link(7)) &&
                           Catch::Contains("slower") && Catch::Contains("1.5"));
  const std::string older_row = page.substr(older);
  CHECK_THAT(older_row,
             Catch::Contains(link(18)) && Catch::Contains(link(19)) && Catch::Contains("faster"));
  // The anchors exist on the suite pages, and the index links the page.
  CHECK_THAT(pages.at("suite-demo.html"), Catch::Contains("id=\"" + demo_link.str(1) + "\""));
  CHECK_THAT(pages.at("suite-older.html"), Catch::Contains("id=\"" + older_link.str(1) + "\""));
  CHECK_THAT(pages.at("index.html"), Catch::Contains("href=\"regressions.html\""));

  // A store without a change: the page says so.
  Store flat("");
  for (int i = 0; i < 6; ++i) AddRun(flat, "flat", 1, i, 1.0);
  const auto flat_pages = PagesByName(BuildSite({&flat}));
  CHECK_THAT(flat_pages.at("regressions.html"), Catch::Contains("No series has a change point"));
}

TEST_CASE("site: a run page links its suite's runs before and after it", "[site]") {
  Store store("");
  AddFixtureRuns(store);
  size_t last_done = 0, last_total = 0, calls = 0;
  SiteOptions options;
  options.on_progress = [&](size_t done, size_t total) {
    CHECK(done > last_done);  // forward, one at a time
    last_done = done, last_total = total, ++calls;
  };
  const auto pages = PagesByName(BuildSite({&store}, options));
  CHECK(calls == 24 + 2);  // each run, then each suite
  CHECK(last_done == last_total);
  CHECK(last_total == 26);
  const auto page = [&](int64_t id) { return pages.at(RunPageOf(pages, id)); };
  const auto link = [&](int64_t id, const char* rel) {
    return "href=\"" + RunPageOf(pages, id) + "\" rel=\"" + rel + "\"";
  };
  CHECK_THAT(page(6), Catch::Contains(link(5, "prev")) && Catch::Contains(link(7, "next")));
  // The first and the last of a suite link one way only; the next suite's first run does
  // not reach back into another suite.
  CHECK_THAT(page(1), !Catch::Contains("rel=\"prev\"") && Catch::Contains(link(2, "next")));
  CHECK_THAT(page(12), Catch::Contains(link(11, "prev")) && !Catch::Contains("rel=\"next\""));
  CHECK_THAT(page(13), !Catch::Contains("rel=\"prev\"") && Catch::Contains(link(14, "next")));
}

TEST_CASE("site: a run's page keeps its name whatever databases come before its own", "[site]") {
  Store store(""), other("");
  AddFixtureRuns(store);
  for (int i = 0; i < 3; ++i) AddRun(other, "elsewhere", 2, i, 1.0);  // runs 1-3 there too
  const auto alone = PagesByName(BuildSite({&store}));
  const auto second = PagesByName(BuildSite({&other, &store}));
  for (const auto& [name, html] : alone) {
    if (name.rfind("run-", 0) == 0) CHECK(second.count(name) == 1);
  }
  // Run 1 of each database: two pages, not one name for both.
  std::set<std::string> first_runs;
  for (const auto& [name, html] : second) {
    if (name.rfind("run-1-", 0) == 0) first_runs.insert(name);
  }
  CHECK(first_runs.size() == 2);
  for (const auto& [name, html] : second) CHECK(IsSitePageName(name));
  CHECK(IsSitePageName("run-1-42.html"));  // an earlier site's shape: still removed as stale
  CHECK_FALSE(IsSitePageName("run-1-42.html.bak"));
  CHECK_FALSE(IsSitePageName("run-1-0123456789abcdef.html"));
}

TEST_CASE("site: a suite's page and its charts keep their names as other suites appear", "[site]") {
  Store store("");
  AddFixtureRuns(store);
  const auto before = PagesByName(BuildSite({&store}));
  // "aaa" sorts before both suites (by position it would take suite-1.html), and a second
  // machine gives "demo" a second chart before or after its first.
  for (int i = 0; i < 6; ++i) AddRun(store, "aaa", 27, i, 2.0);
  RunRecord other;
  other.uuid = "demo on cpu B";
  other.suite_name = "demo";
  other.status = "complete";
  other.started_at = "2026-11-29T10:00:00Z";
  other.environment = {{"cpu_model", "cpu 0"}, {"git_sha", ShaOf('d', 50)}};
  CaseRecord c;
  c.identity.variant_name = c.identity.variant_key = "step";
  c.status = kStatusOk;
  c.iterations = 1;
  c.samples_s = {1.0, 1.0, 1.1};
  store.AddCase(store.CreateRun(other), c);
  const auto after = PagesByName(BuildSite({&store}));
  REQUIRE(after.count("suite-aaa.html") == 1);
  std::smatch anchor;
  const std::string& older = before.at("suite-older.html");
  REQUIRE(std::regex_search(older, anchor, std::regex("id=\"(chart-[0-9a-f]{10})\"")));
  CHECK_THAT(after.at("suite-older.html"), Catch::Contains(anchor.str(0)));
  const std::string& demo = before.at("suite-demo.html");
  REQUIRE(std::regex_search(demo, anchor, std::regex("id=\"(chart-[0-9a-f]{10})\"")));
  CHECK_THAT(after.at("suite-demo.html"), Catch::Contains(anchor.str(0)));
  CHECK_THAT(after.at("regressions.html"),
             Catch::Contains("href=\"suite-demo.html#" + anchor.str(1) + "\""));
}

TEST_CASE("site: a suite name that is not a plain word gets a safe, distinct page name", "[site]") {
  CHECK(NameStem("ci") == "ci");
  CHECK(NameStem("peers_lstm-2") == "peers_lstm-2");
  const std::regex safe("[A-Za-z0-9_-]{1,48}");
  for (const std::string& odd : std::vector<std::string>{"", "a/b", "a.b", "a b", "<b>x</b>",
                                                         "../../etc", std::string(49, 'x')}) {
    INFO(odd);
    CHECK(std::regex_match(NameStem(odd), safe));
    CHECK(NameStem(odd) != odd);
  }
  // Two names that read alike once made safe stay apart.
  CHECK(NameStem("a/b") != NameStem("a.b"));
  CHECK(NameStem("a b") != NameStem("a_b"));
  CHECK(NameStem(std::string(48, 'x')) == std::string(48, 'x'));  // the longest kept whole
  Store store("");
  for (int i = 0; i < 6; ++i) AddRun(store, "<b>x</b>", 1, i, 1.0);
  const auto pages = PagesByName(BuildSite({&store}));
  CHECK(pages.count("suite-" + NameStem("<b>x</b>") + ".html") == 1);
}

}  // namespace
}  // namespace seqbench
