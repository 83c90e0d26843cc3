// `seqbench list`: the registered model families and variants, with what each supports.
#include <algorithm>
#include <boost/program_options.hpp>
#include <filesystem>
#include <iomanip>
#include <iostream>

#include "cli/command.h"
#include "harness/suite.h"
#include "harness/training/training_suite.h"
#include "reports/escape/terminal.h"
#include "variants/core/registry.h"

namespace po = boost::program_options;

namespace seqbench::cli {
namespace {

template <typename T, typename Name>
std::string JoinNames(const std::vector<T>& items, Name name) {
  std::string joined;
  for (const auto& item : items) joined += (joined.empty() ? "" : ",") + std::string(name(item));
  return joined;
}

// A plugin's text (its keys, descriptions, options, its own path) on one terminal line:
// a plugin is user code, and its strings reach the terminal as text, never as controls.
std::string Shown(const std::string& text) { return escape::TerminalText(text, false); }

void ListFamilies() {
  std::cout << "Model families:\n";
  for (const FamilyEntry* family : GlobalFamilies().Entries()) {
    std::cout << "  " << escape::PadToColumns(Shown(family->key), 14) << Shown(family->description)
              << "\n";
  }
}

void ListVariants() {
  std::cout << "\nVariants:\n";
  // Wide enough for the longest key (plugins bring their own), and a space after it.
  size_t key_width = 13;
  for (const VariantEntry* entry : GlobalVariants().Entries()) {
    key_width = std::max(key_width, escape::TerminalColumns(Shown(entry->key)) + 1);
  }
  for (const VariantEntry* entry : GlobalVariants().Entries()) {
    const Capabilities& caps = entry->capabilities;
    std::cout << "  " << escape::PadToColumns(Shown(entry->key), key_width)
              << Shown(entry->description) << "\n"
              << std::setw(16) << ""
              << "family=" << Shown(caps.family) << "  modes=" << JoinNames(caps.modes, ModeName)
              << "  devices=" << JoinNames(caps.devices, DeviceName)
              << "  dtypes=" << JoinNames(caps.dtypes, DtypeName) << "\n";
    for (const auto& [option, meaning] : caps.options) {
      std::cout << std::setw(16) << ""
                << "option " << Shown(option) << ": " << Shown(meaning) << "\n";
    }
    if (!caps.unavailable.empty()) {
      std::cout << std::setw(16) << ""
                << "unavailable here: " << Shown(caps.unavailable) << "\n";
    }
    if (entry->origin != "built-in") {
      std::cout << std::setw(16) << ""
                << "from plugin " << Shown(entry->origin) << "\n";
    }
  }
}

// A suite file as listed: its name, size and description, or (no count) its error.
struct SuiteRow {
  std::string name, count, unit, description;
};

SuiteRow DescribeSuiteFile(const std::filesystem::path& file) {
  try {
    const std::string text = ReadSuiteText(file.string());
    if (training::IsTrainingSuiteText(text)) {
      const auto suite = training::ParseTrainingSuite(text, file.string());
      return {suite.name, std::to_string(suite.pipelines.size()), "pipelines (seqbench train)",
              suite.description};
    }
    const Suite suite = ParseSuite(text, file.string());
    return {suite.name, std::to_string(suite.Expand().size()), "cases", suite.description};
  } catch (const SuiteError& error) {
    return {error.what(), "", "", ""};
  }
}

void ListSuites(const std::string& suites_dir) {
  std::cout << "\nSuites in " << escape::TerminalText(suites_dir, false) << "/:\n";
  std::vector<std::filesystem::path> files;
  std::error_code ignored;
  for (const auto& file : std::filesystem::directory_iterator(suites_dir, ignored)) {
    if (file.path().extension() == ".toml") files.push_back(file.path());
  }
  std::sort(files.begin(), files.end());
  if (files.empty()) std::cout << "  (none)\n";
  // Parsed first, so that the name column fits the longest name.
  std::vector<SuiteRow> rows;
  for (const auto& file : files) rows.push_back(DescribeSuiteFile(file));
  size_t name_width = 20;
  for (const SuiteRow& row : rows) {
    if (!row.count.empty()) {
      name_width =
          std::max(name_width, escape::TerminalColumns(escape::TerminalText(row.name, false)) + 2);
    }
  }
  for (const SuiteRow& row : rows) {
    std::cout << "  ";
    if (!row.count.empty()) {
      std::cout << escape::PadToColumns(escape::TerminalText(row.name, false), name_width)
                << std::left << std::setw(5) << row.count << row.unit << "  "
                << escape::TerminalText(row.description, false);
    } else {
      std::cout << escape::TerminalText(row.name);  // file:line: what is wrong
    }
    std::cout << "\n";
  }
}

}  // namespace

int RunList(const std::vector<std::string>& args) {
  std::string suites_dir;
  po::options_description options(
      "Usage: seqbench list [--suites DIR]\n\n"
      "Lists the model families, the variants (built-in and from --plugin) with their\n"
      "modes, devices, dtypes and options, and the suites in DIR.\n\nOptions");
  options.add_options()("help,h", "show this help")(
      "suites", po::value(&suites_dir)->default_value("suites"), "folder of suite files");
  const auto values = ParseArguments(args, options, {}, {}, "list");
  if (!values) return 0;
  // The default folder may be absent (list run outside a checkout); one the user named may not.
  if (!values->at("suites").defaulted() && !std::filesystem::is_directory(suites_dir)) {
    throw UsageError("list: --suites " + suites_dir + ": no such folder");
  }
  ListFamilies();
  ListVariants();
  ListSuites(suites_dir);
  return 0;
}

}  // namespace seqbench::cli
