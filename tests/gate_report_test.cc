// What the counts gate says beyond its verdict: which functions moved (callgrind's self
// costs, stored with a counted case and compared), and the pull-request comment
// (compare --format pr), judged by cmark-gfm's own parser as GitHub renders it.
#include <cmark-gfm-core-extensions.h>
#include <cmark-gfm.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <map>
#include <string>
#include <vector>

#include "harness/callgrind_functions.h"
#include "harness/instruction_count.h"
#include "reports/compare.h"
#include "reports/pull_request.h"
#include "reports/site.h"
#include "results/store.h"

namespace seqbench {
namespace {

// A dump as callgrind writes one: compressed names (fn= and cfn= share ids), relative
// positions, calls whose inclusive cost is not the caller's own, a recursion level ('2),
// and a function named only by a cfn= before its own fn= block.
constexpr char kDump[] =
    "version: 1\n"
    "creator: callgrind-3.19.0\n"
    "positions: line\n"
    "events: Ir\n"
    "desc: Trigger: Client Request: case 0 step 1\n"
    "fl=(1) /src/a.cc\n"
    "fn=(1) main\n"
    "10 5\n"
    "+2 3\n"
    "cfl=(1)\n"
    "cfn=(2) helper(int)\n"
    "calls=2 20\n"
    "11 100\n"
    "fn=(2)\n"
    "20 60\n"
    "-1 40\n"
    "cfn=(3) recurse'2\n"
    "calls=1 0\n"
    "* 7\n"
    "fn=(3)\n"
    "0 4\n"
    "fn=(4) recurse\n"
    "0 6\n"
    "fn=(5) idle\n"
    "3 0\n"
    "ob=(2) /usr/lib/libtorch_cpu.so.1.13\n"
    "fn=(6) 0x0000000000d173c0\n"
    "0 2\n"
    "totals: 120\n";

TEST_CASE("callgrind's self costs: own instructions, calls left out, names resolved",
          "[count][gate]") {
  const std::map<std::string, double> costs = CallgrindSelfCosts(kDump);
  CHECK(costs == std::map<std::string, double>{{"main", 8},
                                               {"helper(int)", 100},
                                               {"recurse", 10},
                                               {"libtorch_cpu.so.1.13 0x0000000000d173c0", 2}});
  // The self costs add up to the dump's total: nothing counted twice, nothing lost.
  double sum = 0;
  for (const auto& [name, self] : costs) sum += self;
  CHECK(sum == CallgrindTotal(kDump).value());

  // Two position columns: the count is the third field, not the line number.
  const std::string two = "positions: instr line\nevents: Ir\nfn=f\n0x4005d0 12 9\n+3 13 2\n";
  CHECK(CallgrindSelfCosts(two) == std::map<std::string, double>{{"f", 11}});
  CHECK(CallgrindSelfCosts("").empty());
  CHECK(CallgrindSelfCosts("events: Ir\n10 5\n").empty());  // a cost with no function
}

TEST_CASE("the costliest functions, most first, at most the limit", "[count][gate]") {
  const std::map<std::string, double> costs = {{"b", 5}, {"a", 5}, {"c", 9}, {"d", 1}};
  const std::vector<FunctionCost> all = CostliestFunctions(costs, 10);
  REQUIRE(all.size() == 4);
  CHECK(all[0].function == "c");
  CHECK(all[1].function == "a");  // ties by name
  CHECK(all[2].function == "b");
  CHECK(all[3].function == "d");
  CHECK(CostliestFunctions(costs, 2).size() == 2);
  CHECK(CostliestFunctions(costs, 0).empty());
  CHECK(CostliestFunctions(costs, 4).size() == 4);
}

const std::vector<double> kSamples = {1.0, 1.1, 1.9, 1.05, 1.2};

CaseRecord Counted(const std::string& variant, const std::vector<double>& steps,
                   std::vector<FunctionCost> functions) {
  CaseRecord record;
  record.identity.variant_name = record.identity.variant_key = variant;
  record.status = kStatusOk;
  record.samples_s = kSamples;
  StepCounts counts;
  counts.steps["instructions"] = steps;
  record.metrics = CountMetrics(counts);
  record.functions = std::move(functions);
  return record;
}

// Base: 1,000,000 instructions a step. New: 1,020,000, of which gemm +15,000, `scan`
// +6,000 (new), copy -1,000; `quiet` unchanged.
CaseComparison GrownCase() {
  const CaseRecord base = Counted("fused", {1'000'000, 1'000'000, 1'000'000},
                                  {{"gemm", 600'000}, {"copy", 300'000}, {"quiet", 100'000}});
  const CaseRecord grown =
      Counted("fused", {1'020'000, 1'020'000, 1'020'000},
              {{"gemm", 615'000}, {"copy", 299'000}, {"quiet", 100'000}, {"scan", 6'000}});
  return CompareCases({base}, {grown}, CompareSettings{}).at(0);
}

TEST_CASE("a moved case names the functions that moved, largest change first", "[count][gate]") {
  const CaseComparison c = GrownCase();
  REQUIRE(c.count_verdict == "more");
  REQUIRE(c.moved_functions.size() == 3);  // quiet did not move
  CHECK(c.moved_functions[0].function == "gemm");
  CHECK(c.moved_functions[0].share == Approx(0.75));  // 15,000 of the case's 20,000
  CHECK(c.moved_functions[1].function == "scan");
  CHECK(c.moved_functions[1].base == 0);
  CHECK(c.moved_functions[2].function == "copy");
  CHECK(c.moved_functions[2].share == Approx(-0.05));

  // An unchanged case lists none, though its functions' costs jitter.
  const CaseRecord base = Counted("fused", {1'000'000, 1'000'000, 1'000'000}, {{"gemm", 600'000}});
  const CaseRecord same = Counted("fused", {1'000'100, 1'000'100, 1'000'100}, {{"gemm", 600'100}});
  CHECK(CompareCases({base}, {same}, CompareSettings{}).at(0).moved_functions.empty());
  // Functions on one side only (a base from before v11): none listed, none invented.
  const CaseRecord older = Counted("fused", {1'000'000, 1'000'000, 1'000'000}, {});
  const CaseRecord grown = Counted("fused", {1'020'000, 1'020'000, 1'020'000}, {{"gemm", 1}});
  CHECK(CompareCases({older}, {grown}, CompareSettings{}).at(0).moved_functions.empty());

  // More than kMovedFunctions moved: the largest kept.
  std::vector<FunctionCost> before, after;
  for (int i = 0; i < 15; ++i) {
    before.push_back({"f" + std::to_string(i), 1000.0});
    after.push_back({"f" + std::to_string(i), 1000.0 + 100 * (i + 1)});
  }
  const CaseComparison many =
      CompareCases({Counted("x", {100'000, 100'000, 100'000}, before)},
                   {Counted("x", {112'000, 112'000, 112'000}, after)}, CompareSettings{})
          .at(0);
  REQUIRE(many.moved_functions.size() == kMovedFunctions);
  CHECK(many.moved_functions.front().function == "f14");
  CHECK(many.moved_functions.back().function == "f5");

  // Full lists (kStoredFunctions each): a function on one side only that may just have
  // fallen below the other side's cut is not a move; one costlier than all the other side
  // kept is.
  std::vector<FunctionCost> full_base, full_new;
  for (size_t i = 0; i < kStoredFunctions; ++i) {
    full_base.push_back({"g" + std::to_string(i), 1000.0 + static_cast<double>(i)});
    full_new.push_back({"g" + std::to_string(i), 1000.0 + static_cast<double>(i)});
  }
  full_base.back() = {"slipped", 999.5};   // under the new side's cut of 1000: unknown
  full_new.back() = {"appeared", 50'000};  // above the base's cut of 1000: a real move
  const auto cut =
      CompareCases({Counted("y", {100'000, 100'000, 100'000}, full_base)},
                   {Counted("y", {150'000, 150'000, 150'000}, full_new)}, CompareSettings{})
          .at(0)
          .moved_functions;
  REQUIRE(cut.size() == 1);  // g0..g98 did not move; g99 is on neither side
  CHECK(cut[0].function == "appeared");
  CHECK(cut[0].base == 0);
  CHECK(std::none_of(cut.begin(), cut.end(),
                     [](const FunctionMove& f) { return f.function == "slipped"; }));
}

TEST_CASE("a counted case's functions survive the store", "[count][gate][store]") {
  Store store(":memory:");
  RunRecord run;
  run.uuid = "functions";
  run.suite_name = "demo";
  run.started_at = "2026-11-28T00:00:00Z";
  // A refused row's error names the statement (once garbage: the statement kept a pointer
  // into the temporary its SQL was built in).
  CHECK_THROWS_WITH(store.CreateRun(run), Catch::Contains("INSERT INTO runs ("));
  run.status = "running";
  const int64_t id = store.CreateRun(run);
  CaseRecord c = Counted("fused", {10, 10, 10}, {{"b<int>", 7}, {"a | b", 3}});
  store.AddCase(id, c);
  const std::vector<CaseRecord> read = store.Cases(id);
  REQUIRE(read.size() == 1);
  REQUIRE(read[0].functions.size() == 2);
  CHECK(read[0].functions[0].function == "b<int>");
  CHECK(read[0].functions[0].instructions == 7);
  CHECK(read[0].functions[1].function == "a | b");
}

TEST_CASE("the site's A/B pair page names the functions that moved", "[count][gate][site]") {
  Store store(":memory:");
  const auto add_side = [&](bool is_base, const CaseRecord& c) {
    RunRecord run;
    run.uuid = is_base ? "base-side" : "new-side";
    run.suite_name = "demo";
    run.label = is_base ? "ab base" : "ab new";
    run.status = "running";
    run.started_at = "2026-11-29T00:00:00Z";
    run.environment = {{"ab_side", is_base ? "base" : "new"},
                       {"ab_pair", is_base ? "new-side" : "base-side"}};
    const int64_t id = store.CreateRun(run);
    store.AddCase(id, c);
    store.SetRunStatus(id, "complete", "2026-11-29T00:00:01Z");
  };
  // The case grew 2%, all of it in one function whose name needs escaping in HTML.
  add_side(true, Counted("fused", {1'000'000, 1'000'000, 1'000'000},
                         {{"Scan<float>(x)", 500'000}, {"copy", 400'000}}));
  add_side(false, Counted("fused", {1'020'000, 1'020'000, 1'020'000},
                          {{"Scan<float>(x)", 520'000}, {"copy", 400'000}}));
  const std::vector<SitePage> pages = BuildSite({&store});
  const auto pair = std::find_if(pages.begin(), pages.end(), [](const SitePage& page) {
    return page.name.rfind("ab-", 0) == 0;
  });
  REQUIRE(pair != pages.end());
  CHECK_THAT(pair->html, Catch::Contains("Functions moved in"));
  CHECK_THAT(pair->html, Catch::Contains("Scan&lt;float&gt;(x)"));
  CHECK_THAT(pair->html, Catch::Contains("+20,000"));
  CHECK(pair->html.find("Scan<float>") == std::string::npos);    // escaped, never raw
  CHECK(pair->html.find("<td>copy</td>") == std::string::npos);  // copy did not move
}

// cmark-gfm's parse of a comment, as GitHub renders it (tables, autolinks, strikethrough).
class Rendered {
 public:
  explicit Rendered(const std::string& markdown) {
    cmark_gfm_core_extensions_ensure_registered();
    cmark_parser* parser = cmark_parser_new(CMARK_OPT_DEFAULT);
    for (const char* name : {"table", "autolink", "strikethrough"})
      cmark_parser_attach_syntax_extension(parser, cmark_find_syntax_extension(name));
    cmark_parser_feed(parser, markdown.data(), markdown.size());
    root_ = cmark_parser_finish(parser);
    cmark_parser_free(parser);
  }
  ~Rendered() { cmark_node_free(root_); }
  Rendered(const Rendered&) = delete;
  Rendered& operator=(const Rendered&) = delete;

  // The types of the document's top-level blocks, in order.
  std::vector<std::string> Blocks() const {
    std::vector<std::string> types;
    for (cmark_node* n = cmark_node_first_child(root_); n; n = cmark_node_next(n))
      types.push_back(cmark_node_get_type_string(n));
    return types;
  }
  // How many nodes of `type` the whole document holds.
  size_t Count(const std::string& type) const {
    size_t count = 0;
    cmark_iter* iter = cmark_iter_new(root_);
    for (cmark_event_type e; (e = cmark_iter_next(iter)) != CMARK_EVENT_DONE;)
      if (e == CMARK_EVENT_ENTER && type == cmark_node_get_type_string(cmark_iter_get_node(iter)))
        ++count;
    cmark_iter_free(iter);
    return count;
  }
  // Every table cell's text, in document order.
  std::vector<std::string> Cells() const {
    std::vector<std::string> cells;
    cmark_iter* iter = cmark_iter_new(root_);
    for (cmark_event_type e; (e = cmark_iter_next(iter)) != CMARK_EVENT_DONE;) {
      cmark_node* node = cmark_iter_get_node(iter);
      if (e == CMARK_EVENT_ENTER && std::string(cmark_node_get_type_string(node)) == "table_cell")
        cells.push_back(Text(node));
    }
    cmark_iter_free(iter);
    return cells;
  }

 private:
  static std::string Text(cmark_node* node) {
    std::string text;
    for (cmark_node* child = cmark_node_first_child(node); child; child = cmark_node_next(child)) {
      if (const char* literal = cmark_node_get_literal(child)) text += literal;
      text += Text(child);
    }
    return text;
  }
  cmark_node* root_;
};

size_t CountOf(const std::vector<std::string>& values, const std::string& value) {
  return static_cast<size_t>(std::count(values.begin(), values.end(), value));
}

PullRequestContext Context() {
  PullRequestContext context;
  context.base_name = "run 1 (abc123)";
  context.new_name = "run 2 | <b>";
  context.suite = "ci";
  context.counted = true;
  return context;
}

TEST_CASE("the pull-request comment: verdict first, moved cases and functions, all collapsed",
          "[gate][reports]") {
  CaseComparison grown = GrownCase();
  grown.case_key = "fused mode=train <script>|x";
  const CaseRecord a = Counted("same", {1000, 1000, 1000}, {});
  std::vector<CaseComparison> comparisons = CompareCases({a}, {a}, CompareSettings{});
  comparisons.push_back(grown);
  const std::string comment = RenderPullRequestComment(Context(), comparisons);

  CHECK(comment.rfind("**❌ seqbench: 1 case regressed**", 0) == 0);
  CHECK(comment.find("1 regressed, 0 improved, 1 unchanged") != std::string::npos);
  const Rendered rendered(comment);
  const std::vector<std::string> blocks = rendered.Blocks();
  CHECK(blocks.front() == "paragraph");
  CHECK(CountOf(blocks, "table") == 3);       // moved cases; gemm, scan, copy; all cases
  CHECK(CountOf(blocks, "html_block") == 2);  // <details><summary>..., </details>
  const std::vector<std::string> cells = rendered.Cells();
  // User text reads back as itself, inside its cell: a '|' did not split a row.
  CHECK(CountOf(cells, "fused mode=train <script>|x") == 2);  // moved table, all cases
  CHECK(CountOf(cells, "gemm") == 1);
  // A template's long name is cut in the table, whole in the store and JSON.
  CaseComparison long_name = grown;
  long_name.moved_functions[0].function = std::string(400, 'x');
  const std::string cut = RenderMovedFunctions({long_name});
  CHECK(cut.find(std::string(160, 'x') + "…") != std::string::npos);
  CHECK(cut.find(std::string(161, 'x')) == std::string::npos);
  CHECK(rendered.Count("html_inline") == 0);  // no markup from user text
  CHECK(comment.find("</details>") != std::string::npos);

  // Nothing moved: says so, passes, no functions section.
  const std::string quiet =
      RenderPullRequestComment(Context(), CompareCases({a}, {a}, CompareSettings{}));
  CHECK(quiet.rfind("**✅ seqbench: no regression**", 0) == 0);
  CHECK(quiet.find("No case moved") != std::string::npos);
  CHECK(quiet.find("Functions that moved") == std::string::npos);
}

TEST_CASE("the pull-request comment stays under GitHub's limit, cut where it says",
          "[gate][reports]") {
  std::vector<CaseComparison> many;
  for (int i = 0; i < 2000; ++i) {
    CaseComparison c = GrownCase();
    c.case_key = "variant_" + std::to_string(i) + " mode=train batch=8 seq_len=256";
    many.push_back(c);
  }
  const std::string whole = RenderPullRequestComment(Context(), many, 100'000'000);
  REQUIRE(whole.size() > kPullRequestCommentLimit);
  CHECK(whole.find("Cut here") == std::string::npos);

  const std::string cut = RenderPullRequestComment(Context(), many);
  CHECK(cut.size() <= kPullRequestCommentLimit);
  CHECK(cut.find("Cut here to stay under GitHub's 65,536-character limit") != std::string::npos);
  CHECK(cut.rfind("**❌ seqbench: 2000 cases regressed**", 0) == 0);
  CHECK(Rendered(cut).Blocks().front() == "paragraph");

  // The smallest limits: the verdict still comes first, and nothing runs past the limit.
  for (const size_t limit : {size_t{0}, size_t{40}, size_t{300}, size_t{600}}) {
    const std::string tiny = RenderPullRequestComment(Context(), many, limit);
    CHECK(tiny.size() <= limit);
    if (limit >= 300) CHECK(tiny.rfind("**❌ seqbench: 2000 cases regressed**", 0) == 0);
  }

  // At a limit that holds the moved table but not the rest, the <details> stays closed.
  const std::string narrow = RenderPullRequestComment(Context(), {many[0], many[1]}, 3000);
  CHECK(narrow.size() <= 3000);
  const size_t open = narrow.find("<details>");
  CHECK((open == std::string::npos || narrow.find("</details>", open) != std::string::npos));
}

}  // namespace
}  // namespace seqbench
