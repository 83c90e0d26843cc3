// Every sink escapes user text for itself (reports/escape/): examples per sink, then the
// properties on generated hostile strings (10,000 a sink, plus a corpus of known attacks),
// checked by a reader no one here wrote: cmark-gfm's own parser (with GitHub's table,
// autolink and strikethrough extensions) for Markdown; Python's csv, json and html.parser
// for the exports, through tests/escape/check_sinks.py (the hidden [.escape_corpus] case
// writes their input).
#include <cmark-gfm-core-extensions.h>
#include <cmark-gfm.h>

#include <catch2/catch.hpp>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "reports/escape/csv.h"
#include "reports/escape/html.h"
#include "reports/escape/json.h"
#include "reports/escape/markdown.h"
#include "reports/escape/terminal.h"
#include "reports/escape/visible.h"

namespace seqbench::escape {
namespace {

// Known attacks and the syntax each sink has, as whole strings and as fragments.
const std::vector<std::string>& Corpus() {
  static const std::vector<std::string> corpus = {"<b>bold</b>",
                                                  "<script>alert(1)</script>",
                                                  "<img src=x onerror=alert(1)>",
                                                  "<!-- c -->",
                                                  "[x](javascript:alert(1))",
                                                  "![i](http://evil.example/x.png)",
                                                  "<http://evil.example>",
                                                  "http://evil.example/x",
                                                  "www.evil.example",
                                                  "a@b.example",
                                                  "mailto:a@b.example",
                                                  "=HYPERLINK(\"http://e\",\"x\")",
                                                  "+1+1",
                                                  "-2+3",
                                                  "@SUM(A1)",
                                                  "\t=1",
                                                  "\r=1",
                                                  "\x1b[31mred\x1b[0m",
                                                  "\x1b]0;title\x07",
                                                  "a\x1b[2Jb",
                                                  "\x9b"
                                                  "31m",
                                                  "\xc2\x9b"
                                                  "31m",
                                                  "\xe2\x80\xae"
                                                  "txt.exe",
                                                  "&amp;",
                                                  "&#60;b&#62;",
                                                  "&lt;",
                                                  "| --- |",
                                                  "a | b",
                                                  "# h",
                                                  "## h",
                                                  "1. x",
                                                  "2) y",
                                                  "- item",
                                                  "+ item",
                                                  "* item",
                                                  "> quote",
                                                  ">q",
                                                  "---",
                                                  "===",
                                                  "```",
                                                  "`code`",
                                                  "~~s~~",
                                                  "**b**",
                                                  "_e_",
                                                  "__u__",
                                                  "fused_recurrent",
                                                  "a\\",
                                                  "\\",
                                                  "line\nbreak",
                                                  "cr\rlf\r\n",
                                                  "[^1]",
                                                  "[x]: http://e",
                                                  "    indented",
                                                  "\xff\xfe",
                                                  "\xc0\xaf",
                                                  "\xed\xa0\x80",
                                                  "\xf4\x90\x80\x80",
                                                  "\xe2\x82",
                                                  std::string("nul\0byte", 8),
                                                  "\x7f",
                                                  "x\"y",
                                                  "a,b",
                                                  "\"",
                                                  "'",
                                                  "é ｜ 中",
                                                  "]]>",
                                                  "{{x}}",
                                                  "$(rm -rf /)",
                                                  "`rm`"};
  return corpus;
}

// Random strings from a hostile alphabet: ASCII punctuation and blanks weighted up,
// control bytes, invalid UTF-8, multi-byte characters, and corpus fragments.
std::vector<std::string> HostileStrings(size_t count, uint64_t seed) {
  static const std::vector<std::string> pieces = {"\\",
                                                  "`",
                                                  "|",
                                                  "*",
                                                  "_",
                                                  "[",
                                                  "]",
                                                  "(",
                                                  ")",
                                                  "!",
                                                  "<",
                                                  ">",
                                                  "&",
                                                  "#",
                                                  "~",
                                                  ":",
                                                  "/",
                                                  ".",
                                                  "-",
                                                  "+",
                                                  "=",
                                                  "@",
                                                  "\"",
                                                  "'",
                                                  ",",
                                                  ";",
                                                  "^",
                                                  "{",
                                                  "}",
                                                  " ",
                                                  " ",
                                                  "\t",
                                                  "\n",
                                                  "\r",
                                                  "\x1b",
                                                  std::string(1, '\0'),
                                                  "\x7f",
                                                  "\x80",
                                                  "\xbf",
                                                  "\xc3",
                                                  "\xe2\x80",
                                                  "\xf0",
                                                  "\xff",
                                                  "é",
                                                  "｜",
                                                  "\xe2\x80\xae",
                                                  "\xe2\x81\xa6",
                                                  "\xc2\x85",
                                                  "a",
                                                  "b",
                                                  "z",
                                                  "w",
                                                  "W",
                                                  "x",
                                                  "0",
                                                  "1",
                                                  "9",
                                                  "www.",
                                                  "://",
                                                  "http",
                                                  "mailto:",
                                                  "&#",
                                                  "&lt;"};
  std::mt19937_64 generator(seed);
  std::uniform_int_distribution<size_t> length(0, 40), piece(0, pieces.size() - 1);
  std::uniform_int_distribution<size_t> attack(0, Corpus().size() - 1);
  std::uniform_int_distribution<int> kind(0, 9);
  std::vector<std::string> strings;
  for (size_t i = 0; i < count; ++i) {
    std::string text;
    for (size_t n = length(generator); n > 0; --n)
      text += kind(generator) == 0 ? Corpus()[attack(generator)] : pieces[piece(generator)];
    strings.push_back(std::move(text));
  }
  strings.insert(strings.end(), Corpus().begin(), Corpus().end());
  return strings;
}

std::string Trimmed(const std::string& text) {
  const size_t first = text.find_first_not_of(" \t");
  if (first == std::string::npos) return "";
  return text.substr(first, text.find_last_not_of(" \t") - first + 1);
}

// A Markdown document parsed as GitHub renders it.
class Parsed {
 public:
  explicit Parsed(const std::string& markdown) {
    cmark_gfm_core_extensions_ensure_registered();
    cmark_parser* parser = cmark_parser_new(CMARK_OPT_DEFAULT);
    for (const char* name : {"table", "autolink", "strikethrough", "tagfilter"})
      cmark_parser_attach_syntax_extension(parser, cmark_find_syntax_extension(name));
    cmark_parser_feed(parser, markdown.data(), markdown.size());
    root_ = cmark_parser_finish(parser);
    cmark_parser_free(parser);
  }
  ~Parsed() { cmark_node_free(root_); }
  Parsed(const Parsed&) = delete;
  cmark_node* root() const { return root_; }

 private:
  cmark_node* root_;
};

std::string Type(cmark_node* node) { return cmark_node_get_type_string(node); }

std::vector<cmark_node*> Children(cmark_node* node) {
  std::vector<cmark_node*> children;
  for (cmark_node* child = cmark_node_first_child(node); child; child = cmark_node_next(child))
    children.push_back(child);
  return children;
}

// The children of `node`, which must be `count` of them, and the first of `type`.
std::vector<cmark_node*> ChildrenOf(cmark_node* node, size_t count, const std::string& type) {
  const std::vector<cmark_node*> children = Children(node);
  REQUIRE(children.size() == count);
  REQUIRE(Type(children[0]) == type);
  return children;
}

// Whether `link` is one of GitHub's e-mail autolinks, which the Markdown sink leaves (they
// run nothing): its text is its address, the destination that or "mailto:"/"xmpp:" before
// it, and only an address's characters, so no scheme that runs code ("javascript:",
// "data:") and no web address (the sink escapes "://" and "www.").
bool EmailAutolink(cmark_node* link, const std::string& text) {
  const std::string url = cmark_node_get_url(link);
  if (url != text && url != "mailto:" + text && url != "xmpp:" + text) return false;
  if (url.find('@') == std::string::npos || url.find("//") != std::string::npos) return false;
  for (const char c : url) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && std::strchr(".+-_:@/", c) == nullptr)
      return false;
  }
  for (size_t k = url.find(':'); k != std::string::npos; k = url.find(':', k + 1)) {
    const bool mailto = k >= 6 && url.compare(k - 6, 7, "mailto:") == 0;
    if (!mailto && !(k >= 4 && url.compare(k - 4, 5, "xmpp:") == 0)) return false;
  }
  return true;
}

// The text `node` renders, adding to `markup` whatever is not plain text: any node but
// text and an e-mail autolink is markup the user typed.
std::string TextOf(cmark_node* node, std::string& markup) {
  std::string text;
  for (cmark_node* child : Children(node)) {
    const std::string type = Type(child);
    if (type == "text") {
      text += cmark_node_get_literal(child);
    } else if (type == "link") {
      std::string inner_markup;
      const std::string inner = TextOf(child, inner_markup);
      if (!inner_markup.empty() || !EmailAutolink(child, inner))
        markup += "link to " + std::string(cmark_node_get_url(child)) + " ";
      text += inner;
    } else {
      markup += type + " ";
    }
  }
  return text;
}

TEST_CASE("visible text: valid UTF-8, controls and bidi overrides shown", "[escape]") {
  CHECK(ValidUtf8("plain é 中 😀") == "plain é 中 😀");
  CHECK(ValidUtf8("a\xff"
                  "b") ==
        "a\xEF\xBF\xBD"
        "b");
  CHECK(ValidUtf8("\xc0\xaf") == "\xEF\xBF\xBD\xEF\xBF\xBD");  // overlong "/": C0 never leads
  CHECK(ValidUtf8("\xed\xa0\x80") == "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");  // surrogate
  CHECK(ValidUtf8("\xe2\x82") == "\xEF\xBF\xBD");  // truncated: one maximal subpart
  CHECK(ValidUtf8("\xf0\x9f\x98x") == "\xEF\xBF\xBDx");
  CHECK(VisibleText("a\x1b[31mb") == "a\\x1b[31mb");
  CHECK(VisibleText("\xc2\x9b"
                    "31m") == "\\u009b31m");
  CHECK(VisibleText("\xe2\x80\xae"
                    "exe") == "\\u202eexe");
  CHECK(VisibleText("one\ntwo\r\nthree\rfour") == "one two three\\x0dfour");
  CHECK(VisibleText("one\ntwo\r\nthree", true) == "one\ntwo\nthree");
  CHECK(VisibleText(std::string("a\0b\tc\x7f", 6)) == "a\\x00b\tc\\x7f");
}

TEST_CASE("markdown text: syntax escaped, names left readable", "[escape]") {
  CHECK(MarkdownText("fused_recurrent") == "fused_recurrent");  // intraword: no emphasis
  CHECK(MarkdownText("ratio <= 0.8 & >= 1") == "ratio <= 0.8 & >= 1");
  CHECK(MarkdownText("1.5×, -0.25 at step 5: ok") == "1.5×, -0.25 at step 5: ok");
  CHECK(MarkdownText("a|b `c` *d* _e_ [f] ~g~ \\") ==
        "a\\|b \\`c\\` \\*d\\* \\_e\\_ \\[f\\] \\~g\\~ \\\\");
  CHECK(MarkdownText("<img src=x onerror=alert(1)>") == "&lt;img src=x onerror=alert(1)>");
  CHECK(MarkdownText("&lt; &#60;") == "&amp;lt; &amp;#60;");
  CHECK(MarkdownText("see http://x.example and www.y.example") ==
        "see http\\://x.example and www\\.y.example");
  CHECK(MarkdownText("# title") == "\\# title");
  CHECK(MarkdownText("12. item") == "12\\. item");
  CHECK(MarkdownText("  - item") == "\\- item");
  CHECK(MarkdownText("line\nbreak") == "line break");
  CHECK(MarkdownCode("plain") == "`plain`");
  CHECK(MarkdownCode("a`b") == "``a`b``");
  CHECK(MarkdownCode("`x") == "`` `x ``");
  CHECK(MarkdownDestination("plots/p.svg") == "plots/p.svg");
  CHECK(MarkdownDestination("my plots/p (1).svg") == "<my plots/p (1).svg>");
}

TEST_CASE("csv, json, terminal and html: each sink's own escapes", "[escape]") {
  CHECK(CsvField("fused") == "fused");
  CHECK(CsvField("a,b") == "\"a,b\"");
  CHECK(CsvField("say \"hi\"") == "\"say \"\"hi\"\"\"");
  CHECK(CsvField("=HYPERLINK(\"http://e\")") == "\"'=HYPERLINK(\"\"http://e\"\")\"");
  for (const char* formula : {"+1", "-1", "@A1", "\tx"})
    CHECK(CsvField(formula) == std::string("'") + formula);
  CHECK(CsvField("line\nbreak") == "line break");
  const std::string json = DumpJson(nlohmann::json{{"name", "a\xff\x1b"}}, -1);
  CHECK(json == "{\"name\":\"a\xEF\xBF\xBD\\u001b\"}");
  CHECK(TerminalText("\x1b]0;title\x07"
                     "ok\n") == "\\x1b]0;title\\x07ok\n");
  CHECK(TerminalText("a\nb", false) == "a b");
  CHECK(HtmlText("<a href='x'>&\"") == "&lt;a href=&#39;x&#39;&gt;&amp;&quot;");
}

TEST_CASE("markdown: 10,000 hostile strings read back as their text, never markup",
          "[escape][property]") {
  size_t checked = 0;
  for (const std::string& text : HostileStrings(10000, 46)) {
    INFO("string " << checked << ": " << nlohmann::json(ValidUtf8(text)).dump());
    const std::string expected = Trimmed(VisibleText(text));
    const std::string escaped = MarkdownText(text);
    std::string markup;
    {  // A table cell: still two cells in one row, the second intact.
      const Parsed parsed("| a | b |\n|---|---|\n| " + escaped + " | z |\n");
      const auto table = ChildrenOf(parsed.root(), 1, "table")[0];
      const auto rows = ChildrenOf(table, 2, "table_header");  // the header row, then ours
      const auto cells = ChildrenOf(rows[1], 2, "table_cell");
      CHECK(TextOf(cells[0], markup) == expected);
      CHECK(TextOf(cells[1], markup) == "z");
    }
    if (!expected.empty()) {  // A list item (the warnings): one item, one paragraph.
      const Parsed parsed("- " + escaped + "\n");
      const auto list = ChildrenOf(parsed.root(), 1, "list")[0];
      const auto item = ChildrenOf(list, 1, "item")[0];
      CHECK(TextOf(ChildrenOf(item, 1, "paragraph")[0], markup) == expected);
    }
    if (const std::string code = MarkdownCode(text); !code.empty()) {  // A code span.
      const Parsed parsed("against " + code + ".\n");
      const auto paragraph = ChildrenOf(parsed.root(), 1, "paragraph")[0];
      const auto inlines = ChildrenOf(paragraph, 3, "text");  // "against ", the span, "."
      REQUIRE(Type(inlines[1]) == "code");
      CHECK(cmark_node_get_literal(inlines[1]) == VisibleText(text));
    }
    CHECK(markup.empty());
    ++checked;
  }
  CHECK(checked >= 10000);
}

TEST_CASE("terminal: 10,000 hostile strings print no control byte but tab and line feed",
          "[escape][property]") {
  for (const std::string& text : HostileStrings(10000, 47)) {
    const std::string shown = TerminalText(text);
    INFO(nlohmann::json(ValidUtf8(text)).dump());
    CHECK(ValidUtf8(shown) == shown);
    bool clean = true;
    for (size_t i = 0; i < shown.size(); ++i) {
      const auto byte = static_cast<unsigned char>(shown[i]);
      const auto next = i + 1 < shown.size() ? static_cast<unsigned char>(shown[i + 1]) : 0;
      const auto third = i + 2 < shown.size() ? static_cast<unsigned char>(shown[i + 2]) : 0;
      if ((byte < 0x20 && byte != '\t' && byte != '\n') || byte == 0x7f) clean = false;
      if (byte == 0xc2 && next >= 0x80 && next <= 0x9f) clean = false;  // C1, CSI included
      if (byte == 0xe2 && next == 0x80 && third >= 0xaa && third <= 0xae) clean = false;
      if (byte == 0xe2 && next == 0x81 && third >= 0xa6 && third <= 0xa9) clean = false;
    }
    CHECK(clean);
  }
}

TEST_CASE("terminal columns: a column a character, two for wide ones, none for marks", "[escape]") {
  CHECK(TerminalColumns("") == 0);
  CHECK(TerminalColumns("fused") == 5);
  CHECK(TerminalColumns("caf\u00e9") == 4);        // é: two bytes, one column
  CHECK(TerminalColumns("cafe\u0301") == 4);       // e and a combining accent
  CHECK(TerminalColumns("\u6f22\u5b57") == 4);     // two CJK ideographs, three bytes each
  CHECK(TerminalColumns("\U0001F600x") == 3);      // an emoji (four bytes), then x
  CHECK(TerminalColumns("\u2192") == 1);           // an arrow: narrow
  CHECK(PadToColumns("\u6f22", 4) == "\u6f22  ");  // padded by what is seen
  CHECK(PadToColumns("caf\u00e9", 6) == "caf\u00e9  ");
  CHECK(PadToColumns("toolong", 3) == "toolong");  // never cut
  // Any shown text pads to exactly the width asked, and never counts more columns than bytes.
  for (const std::string& text : HostileStrings(1000, 49)) {
    const std::string shown = TerminalText(text, false);
    const size_t columns = TerminalColumns(shown);
    INFO(nlohmann::json(ValidUtf8(text)).dump());
    CHECK(columns <= shown.size());
    CHECK(TerminalColumns(PadToColumns(shown, columns + 3)) == columns + 3);
  }
}

// Hidden (run by tests/escape/check_sinks.sh): writes 10,000 hostile strings through the
// CSV, JSON and HTML sinks into $SEQBENCH_ESCAPE_CORPUS, with what each should read back
// as, for Python's readers to judge.
TEST_CASE("escape corpus for Python's csv, json and html readers", "[.escape_corpus]") {
  const char* directory = std::getenv("SEQBENCH_ESCAPE_CORPUS");
  REQUIRE(directory != nullptr);
  const std::vector<std::string> strings = HostileStrings(10000, 48);
  std::ofstream csv(std::string(directory) + "/cells.csv", std::ios::binary);
  std::ofstream html(std::string(directory) + "/cells.html", std::ios::binary);
  std::ofstream expected(std::string(directory) + "/expected.jsonl", std::ios::binary);
  nlohmann::json values = nlohmann::json::array();
  for (size_t i = 0; i < strings.size(); ++i) {
    csv << i << "," << CsvField(strings[i]) << "\r\n";
    html << "<p>" << HtmlText(strings[i]) << "</p>\n";
    values.push_back(strings[i]);  // raw: the dump must make it valid
    std::string hex;
    for (const char c : strings[i]) {
      static const char digits[] = "0123456789abcdef";
      hex += digits[static_cast<unsigned char>(c) >> 4];
      hex += digits[static_cast<unsigned char>(c) & 15];
    }
    expected << DumpJson(nlohmann::json{{"visible", VisibleText(strings[i])}, {"raw", hex}}, -1)
             << "\n";
  }
  std::ofstream(std::string(directory) + "/strings.json", std::ios::binary) << DumpJson(values);
  REQUIRE(csv.good());
  REQUIRE(html.good());
  REQUIRE(expected.good());
}

}  // namespace
}  // namespace seqbench::escape
