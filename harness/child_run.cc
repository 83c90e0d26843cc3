#include "harness/child_run.h"

#include <cstdio>
#include <stdexcept>
#include <string>
#include <tuple>
#include <type_traits>
#include <variant>
#include <vector>

namespace seqbench {
namespace {

using Member = std::variant<std::string ChildRun::*, int64_t ChildRun::*, double ChildRun::*,
                            bool ChildRun::*>;

// One flag of the protocol. `hidden`: `run --help` does not list it.
struct FlagRow {
  const char* name;
  Member member;
  bool hidden;
};

// Every flag, in the order ToArgv() writes them.
const std::vector<FlagRow>& Rows() {
  static const std::vector<FlagRow> rows = {
      {"db", &ChildRun::db_path, false},
      {"device", &ChildRun::device, false},
      {"threads", &ChildRun::threads, false},
      {"filter", &ChildRun::filter, false},
      {"check", &ChildRun::check, false},
      {"repetitions", &ChildRun::repetitions, false},
      {"warmup", &ChildRun::warmup, false},
      {"min-time", &ChildRun::min_time, false},
      {"max-noise", &ChildRun::max_noise, false},
      {"max-time", &ChildRun::max_time, false},
      {"count", &ChildRun::count, false},
      {"count-steps", &ChildRun::count_steps, false},
      {"in-process", &ChildRun::in_process, false},
      {"nvtx", &ChildRun::nvtx, false},
      {"shard", &ChildRun::shard, false},
      {"group", &ChildRun::group, false},
      {"lockstep", &ChildRun::lockstep, false},
      {"run-case", &ChildRun::run_case, true},
      {"into-run", &ChildRun::into_run, true},
      {"run-uuid", &ChildRun::run_uuid, true},
      {"position", &ChildRun::position, true},
      {"count-out", &ChildRun::count_out, true},
      {"test-slowdown", &ChildRun::test_slowdown, true},
      {"test-slowdown-filter", &ChildRun::test_slowdown_filter, true},
      {"test-extra-head-passes", &ChildRun::test_extra_head_passes, true},
  };
  return rows;
}

const FlagRow* FindRow(const std::string& name) {
  for (const FlagRow& row : Rows()) {
    if (name == row.name) return &row;
  }
  return nullptr;
}

// A double that reads back to the same bits.
std::string ExactText(double value) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.17g", value);
  return text;
}

// The row's words for `run` (none when the field holds its default).
void AppendFlag(const ChildRun& run, const FlagRow& row, std::vector<std::string>& argv) {
  static const ChildRun defaults;
  const std::string flag = std::string("--") + row.name;
  std::visit(
      [&](auto member) {
        if (run.*member == defaults.*member) return;
        using Value = std::decay_t<decltype(run.*member)>;
        if constexpr (std::is_same_v<Value, bool>) {
          argv.push_back(flag);
        } else if constexpr (std::is_same_v<Value, std::string>) {
          argv.insert(argv.end(), {flag, run.*member});
        } else if constexpr (std::is_same_v<Value, double>) {
          argv.insert(argv.end(), {flag, ExactText(run.*member)});
        } else {
          argv.insert(argv.end(), {flag, std::to_string(run.*member)});
        }
      },
      row.member);
}

// Sets the row's field from `text`, which must be all of a value of its type.
void SetField(ChildRun& run, const FlagRow& row, const std::string& text) {
  const auto wrong = [&](const char* type) {
    return std::invalid_argument("--" + std::string(row.name) + " takes " + type + ", got '" +
                                 text + "'");
  };
  std::visit(
      [&](auto member) {
        using Value = std::decay_t<decltype(run.*member)>;
        size_t used = 0;
        try {
          if constexpr (std::is_same_v<Value, std::string>) {
            run.*member = text;
            used = text.size();
          } else if constexpr (std::is_same_v<Value, double>) {
            run.*member = std::stod(text, &used);
          } else if constexpr (std::is_same_v<Value, int64_t>) {
            run.*member = std::stoll(text, &used);
          } else {
            run.*member = true;
            used = text.size();
          }
        } catch (const std::logic_error&) {  // stoll/stod: not a number, or out of range
          used = std::string::npos;
        }
        if (used != text.size())
          throw wrong(std::is_same_v<Value, double> ? "a number" : "an integer");
      },
      row.member);
}

bool IsSwitch(const FlagRow& row) { return std::holds_alternative<bool ChildRun::*>(row.member); }

}  // namespace

std::vector<std::string> ChildRun::Arguments() const {
  std::vector<std::string> argv;
  if (!suite_path.empty()) argv.push_back(suite_path);
  for (const FlagRow& row : Rows()) AppendFlag(*this, row, argv);
  argv.insert(argv.end(), user_flags.begin(), user_flags.end());
  return argv;
}

std::vector<std::string> ChildRun::ToArgv() const {
  std::vector<std::string> argv = {binary};
  for (const std::string& plugin : plugins) argv.insert(argv.end(), {"--plugin", plugin});
  argv.push_back(command);
  const std::vector<std::string> arguments = Arguments();
  argv.insert(argv.end(), arguments.begin(), arguments.end());
  return argv;
}

ChildRun ChildRun::FromArgv(const std::vector<std::string>& argv) {
  ChildRun run;
  size_t i = 0;
  if (i < argv.size()) run.binary = argv[i++];
  for (; i + 1 < argv.size() && argv[i] == "--plugin"; i += 2) run.plugins.push_back(argv[i + 1]);
  if (i < argv.size()) run.command = argv[i++];
  if (run.command != "run") {  // a training rank: the user's command line, as given
    run.user_flags.assign(argv.begin() + i, argv.end());
    return run;
  }
  if (i < argv.size() && argv[i].rfind("--", 0) != 0) run.suite_path = argv[i++];
  for (; i < argv.size(); ++i) {
    const std::string& word = argv[i];
    const size_t equals = word.find('=');
    const FlagRow* row =
        word.rfind("--", 0) == 0
            ? FindRow(word.substr(2, equals == std::string::npos ? std::string::npos : equals - 2))
            : nullptr;
    if (row == nullptr) {
      run.user_flags.push_back(word);
    } else if (equals != std::string::npos) {
      SetField(run, *row, word.substr(equals + 1));
    } else if (IsSwitch(*row)) {
      SetField(run, *row, "");
    } else if (i + 1 < argv.size()) {
      SetField(run, *row, argv[++i]);
    } else {
      throw std::invalid_argument(word + " needs a value");
    }
  }
  return run;
}

void ChildRun::Set(const std::string& name, const std::string& text) {
  const FlagRow* row = FindRow(name);
  if (row == nullptr) throw std::invalid_argument("ChildRun: no flag --" + name);
  SetField(*this, *row, text);
}

std::string ChildRun::Flag(const std::string& name) {
  if (FindRow(name) == nullptr) throw std::invalid_argument("ChildRun: no flag --" + name);
  return "--" + name;
}

bool ChildRun::operator==(const ChildRun& other) const {
  for (const FlagRow& row : Rows()) {
    const bool same =
        std::visit([&](auto member) { return this->*member == other.*member; }, row.member);
    if (!same) return false;
  }
  return std::tie(binary, plugins, command, suite_path, user_flags) ==
         std::tie(other.binary, other.plugins, other.command, other.suite_path, other.user_flags);
}

std::vector<ChildRunFlag> ChildRunFlags() {
  std::vector<ChildRunFlag> flags;
  for (const FlagRow& row : Rows()) flags.push_back({row.name, row.hidden, IsSwitch(row)});
  return flags;
}

}  // namespace seqbench
