#include "harness/instruction_count.h"

#include <linux/perf_event.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <regex>
#include <sstream>
#include <stdexcept>

#include "base/files.h"
#include "base/process.h"
#include "harness/callgrind_functions.h"
#include "stats/statistics.h"

#if SEQBENCH_HAVE_CALLGRIND
#include <valgrind/callgrind.h>
#endif

namespace seqbench {
namespace {

namespace fs = std::filesystem;

std::string ReadText(const fs::path& path) {
  std::ifstream file(path);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

// The line of valgrind's log that names what went wrong: where its decoder refused an
// instruction (the line after "Illegal opcode", which names the function), else the last
// non-empty line.
std::string LastLogLine(const fs::path& log) {
  std::stringstream text(ReadText(log));
  std::string line, last;
  bool illegal_opcode = false;
  while (std::getline(text, line)) {
    const auto begin = line.find_first_not_of("=0123456789 ");
    if (begin == std::string::npos) continue;
    if (illegal_opcode)
      return "valgrind cannot decode an instruction of this CPU " + line.substr(begin);
    illegal_opcode = line.compare(begin, 14, "Illegal opcode") == 0;
    last = line.substr(begin);
  }
  return last;
}

// A private folder for one child's dumps and facts, removed when done.
class ScratchFolder {
 public:
  // Always under /tmp, whatever TMPDIR says: the folder's path is part of the child's
  // command line, whose length moves its counts.
  ScratchFolder() {
    std::string pattern = "/tmp/seqbench-count-XXXXXX";
    if (mkdtemp(pattern.data()) == nullptr)
      throw std::runtime_error(std::string("cannot create a folder under /tmp: ") +
                               std::strerror(errno));
    path_ = pattern;
  }
  ~ScratchFolder() { RemoveTree(path_.string()); }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

// What one step's dump says: its totals by event ("Ir", "D1mr", ...) and each function's
// self instructions.
struct StepDump {
  std::map<std::string, double> events, functions;
};
// The steps' dumps, keyed by (case, step).
using DumpTotals = std::map<std::pair<int64_t, int64_t>, StepDump>;

// Every dump callgrind wrote as <prefix>.<part>, by the case and step its description
// names ("Trigger: Client Request: case 3 step 2").
DumpTotals ReadDumps(const fs::path& prefix) {
  static const std::regex trigger("^desc: Trigger: Client Request: case ([0-9]+) step ([0-9]+)",
                                  std::regex::multiline);
  DumpTotals totals;
  for (int64_t part = 1;; ++part) {
    const fs::path dump = prefix.string() + "." + std::to_string(part);
    if (!fs::exists(dump)) return totals;
    const std::string text = ReadText(dump);
    std::smatch match;
    std::map<std::string, double> events = CallgrindEvents(text);
    if (!events.empty() && std::regex_search(text, match, trigger))
      totals[{std::stoll(match[1]), std::stoll(match[2])}] = {std::move(events),
                                                              CallgrindSelfCosts(text)};
  }
}

// The per-step series a callgrind step's events give: instructions, and the cycle
// estimate where the caches were simulated.
std::map<std::string, double> CallgrindSeries(const std::map<std::string, double>& events) {
  std::map<std::string, double> series;
  if (const auto ir = events.find("Ir"); ir != events.end()) series["instructions"] = ir->second;
  if (const auto cycles = CycleEstimate(events)) series["cycles_estimate"] = *cycles;
  return series;
}

// Case `index`'s counts from the dumps (or, natively counted, from its account's hw_step_<k>
// lines) and the child's account of it.
StepCounts CaseCounts(const DumpTotals& totals, const fs::path& out_dir, int64_t index,
                      int64_t steps) {
  StepCounts counts;
  double per_sample = 0;
  std::map<int64_t, double> native;
  for (const auto& [key, value] : ReadFacts(CaseCountFile(out_dir.string(), index))) {
    if (key == "error") counts.not_counted = value;
    if (key == "steps_per_sample") per_sample = std::atof(value.c_str());
    if (key.rfind("hw_step_", 0) == 0)
      native[std::atoll(key.c_str() + 8)] = std::atof(value.c_str());
  }
  if (!counts.not_counted.empty()) return counts;
  std::map<std::string, double> functions;  // summed over the steps
  for (int64_t k = 1; k <= steps; ++k) {
    std::map<std::string, double> series;
    if (const auto total = totals.find({index, k}); total != totals.end()) {
      series = CallgrindSeries(total->second.events);
      for (const auto& [name, self] : total->second.functions) functions[name] += self;
    }
    if (const auto count = native.find(k); count != native.end())
      series["hw_instructions"] = count->second;
    if (series.empty() || !(per_sample >= 1)) {
      counts.steps.clear();
      counts.not_counted = "the child wrote no count for step " + std::to_string(k);
      return counts;
    }
    // A sample of several steps (a test slowdown's exact extra steps) counts per step.
    for (const auto& [metric, value] : series) counts.steps[metric].push_back(value / per_sample);
  }
  for (auto& [name, self] : functions) self /= per_sample * static_cast<double>(steps);
  counts.functions = CostliestFunctions(functions, kStoredFunctions);
  return counts;
}

// perf_event_open's user-space instructions counter for this thread, disabled, or -1 with
// errno set.
int OpenInstructionsCounter() {
  perf_event_attr attributes;
  std::memset(&attributes, 0, sizeof(attributes));
  attributes.type = PERF_TYPE_HARDWARE;
  attributes.size = sizeof(attributes);
  attributes.config = PERF_COUNT_HW_INSTRUCTIONS;
  attributes.disabled = 1;
  attributes.exclude_kernel = 1;  // instructions:u, as rustc-perf counts them
  attributes.exclude_hv = 1;
  return static_cast<int>(syscall(SYS_perf_event_open, &attributes, 0, -1, -1, 0));
}

std::string CounterError(int error) {
  return std::string("perf_event_open(instructions:u) failed: ") + std::strerror(error) +
         (error == ENOENT ? " (no hardware counters: a VM without a PMU?)"
          : error == EACCES || error == EPERM
              ? " (kernel.perf_event_paranoid forbids it; 1 or lower allows user counting)"
              : "");
}

}  // namespace

const std::vector<CountKind>& CountKinds() {
  static const std::vector<CountKind> kinds = {
      {kCountInstructions, "instructions", "instructions",
       "callgrind's instructions (Ir), user space, under the pinning"},
      {kCountCyclesEstimate, "cycles_estimate", "cycles",
       "instructions, and Ir + 10 L1 misses + 100 LL misses from callgrind's cache simulator "
       "at pinned cache sizes (an estimate, not a measurement)"},
      {kCountHwInstructions, "hw_instructions", "instructions",
       "the CPU's instructions:u counter (perf_event_open) in a native child, under the pinning; "
       "not counted where the kernel offers no counter"},
  };
  return kinds;
}

const CountKind* FindCountKind(const std::string& name) {
  for (const CountKind& kind : CountKinds())
    if (name == kind.name) return &kind;
  return nullptr;
}

std::string CountKindNames() {
  std::string names;
  for (const CountKind& kind : CountKinds())
    names += (names.empty() ? "" : ", ") + std::string(kind.name);
  return names;
}

std::string CountKindsConflict(const std::vector<std::string>& kinds) {
  const bool native = CountsNatively(kinds);
  if (native && kinds.size() > 1)
    return "hw-instructions counts in a native child and cannot be combined with callgrind's "
           "kinds in one run; count them in two runs";
  return "";
}

bool CountsNatively(const std::vector<std::string>& kinds) {
  return std::find(kinds.begin(), kinds.end(), kCountHwInstructions) != kinds.end();
}

bool SimulatesCaches(const std::vector<std::string>& kinds) {
  return std::find(kinds.begin(), kinds.end(), kCountCyclesEstimate) != kinds.end();
}

namespace {
// Callgrind's cache simulator takes the host's caches from CPUID unless told: pinned to a
// common x86-64-v3 hierarchy (32 KiB 8-way L1s, 8 MiB 16-way last level, 64-byte lines).
const std::vector<std::string>& CacheArguments() {
  static const std::vector<std::string> arguments = {"--cache-sim=yes", "--I1=32768,8,64",
                                                     "--D1=32768,8,64", "--LL=8388608,16,64"};
  return arguments;
}
}  // namespace

std::string CountCacheText() {
  std::string text;
  for (const std::string& argument : CacheArguments()) text += (text.empty() ? "" : " ") + argument;
  return text;
}

std::optional<double> CycleEstimate(const std::map<std::string, double>& events) {
  static const char* const kL1[] = {"I1mr", "D1mr", "D1mw"};
  static const char* const kLastLevel[] = {"ILmr", "DLmr", "DLmw"};
  const auto ir = events.find("Ir");
  if (ir == events.end()) return std::nullopt;
  double l1 = 0, last_level = 0;
  for (const char* name : kL1) {
    const auto found = events.find(name);
    if (found == events.end()) return std::nullopt;
    l1 += found->second;
  }
  for (const char* name : kLastLevel) {
    const auto found = events.find(name);
    if (found == events.end()) return std::nullopt;
    last_level += found->second;
  }
  return ir->second + 10 * l1 + 100 * last_level;
}

std::string HardwareCountersUnavailable() {
  const int fd = OpenInstructionsCounter();
  if (fd < 0) return CounterError(errno);
  close(fd);
  return "";
}

std::vector<double> CountStepsWithPerf(const std::function<void()>& step, int64_t steps) {
  const int fd = OpenInstructionsCounter();
  if (fd < 0) throw std::runtime_error(CounterError(errno));
  std::vector<double> counts;
  try {
    step();  // first-use costs, as under callgrind, stay out of step 1
    for (int64_t k = 1; k <= steps; ++k) {
      ioctl(fd, PERF_EVENT_IOC_RESET, 0);
      ioctl(fd, PERF_EVENT_IOC_ENABLE, 0);
      step();
      ioctl(fd, PERF_EVENT_IOC_DISABLE, 0);
      uint64_t value = 0;
      if (read(fd, &value, sizeof(value)) != static_cast<ssize_t>(sizeof(value)))
        throw std::runtime_error(std::string("reading the instructions counter failed: ") +
                                 std::strerror(errno));
      counts.push_back(static_cast<double>(value));
    }
  } catch (...) {
    close(fd);
    throw;
  }
  close(fd);
  return counts;
}

const std::vector<std::pair<std::string, std::string>>& CountPinning() {
  // glibc picks memcpy/memset/strlen by CPUID and sizes its non-temporal and rep-movsb
  // thresholds by the caches it reads: both are fixed here, with AVX-512 and the
  // fast-string flags masked, which valgrind does not emulate uniformly either.
  static const std::vector<std::pair<std::string, std::string>> pinning = {
      {"ATEN_CPU_CAPABILITY", "avx2"},
      {"OPENBLAS_CORETYPE", "Haswell"},
      {"OPENBLAS_NUM_THREADS", "1"},
      {"OMP_NUM_THREADS", "1"},
      {"MKL_NUM_THREADS", "1"},
      {"GLIBC_TUNABLES",
       "glibc.cpu.hwcaps=-AVX512F,-AVX512VL,-AVX512BW,-AVX512DQ,-AVX512CD,-ERMS,-FSRM"
       ":glibc.cpu.x86_data_cache_size=32768:glibc.cpu.x86_shared_cache_size=1048576"
       ":glibc.cpu.x86_non_temporal_threshold=786432:glibc.cpu.x86_rep_movsb_threshold=2048"
       ":glibc.cpu.x86_rep_stosb_threshold=2048"},
  };
  return pinning;
}

std::string CountPinningText() {
  std::string text;
  for (const auto& [name, value] : CountPinning())
    text += (text.empty() ? "" : " ") + name + "=" + value;
  return text;
}

bool CallgrindCompiledIn() { return SEQBENCH_HAVE_CALLGRIND != 0; }

bool RunningUnderValgrind() {
#if SEQBENCH_HAVE_CALLGRIND
  return RUNNING_ON_VALGRIND != 0;
#else
  return false;
#endif
}

void CountStepsUnderCallgrind(const std::function<void()>& step, int64_t steps, int64_t index) {
#if SEQBENCH_HAVE_CALLGRIND
  if (!RunningUnderValgrind())
    throw std::runtime_error("counting needs this process to run under valgrind's callgrind");
  // Instrumentation on (it flushes valgrind's translations), collection on only inside
  // each step: the counts hold the step and nothing of the loop around it. One step more,
  // uncollected, first: whatever a step does once under a new instrumentation state
  // (first-use caches) is not counted in step 1.
  CALLGRIND_START_INSTRUMENTATION;
  step();
  for (int64_t k = 1; k <= steps; ++k) {
    CALLGRIND_ZERO_STATS;
    CALLGRIND_TOGGLE_COLLECT;
    step();
    CALLGRIND_TOGGLE_COLLECT;
    CALLGRIND_DUMP_STATS_AT(
        ("case " + std::to_string(index) + " step " + std::to_string(k)).c_str());
  }
  CALLGRIND_STOP_INSTRUMENTATION;
#else
  (void)step;
  (void)steps;
  (void)index;
  throw std::runtime_error(
      "this seqbench was built without valgrind/callgrind.h (install valgrind, reconfigure)");
#endif
}

std::string CaseCountFile(const std::string& out_dir, int64_t index) {
  return out_dir + "/case_" + std::to_string(index);
}

std::optional<std::string> ValgrindVersion() {
  ChildSpec spec;
  spec.argv = {"valgrind", "--version"};
  spec.search_path = true;
  spec.timeout_s = 60;
  spec.output = ChildSpec::Output::kCaptureStdout;
  spec.discard_stderr = true;
  spec.max_output = 128;
  const ChildOutcome outcome = RunChild(spec);
  if (!outcome.Succeeded() || outcome.output.empty()) return std::nullopt;
  std::string version = outcome.output.substr(0, outcome.output.find('\n'));
  version.erase(version.find_last_not_of(" \r") + 1);
  return version;
}

std::map<std::string, double> CallgrindEvents(const std::string& dump_text) {
  static const std::regex names("^events:[ \\t]*([^\\n]*)", std::regex::multiline);
  static const std::regex totals("^(?:summary|totals):[ \\t]*([^\\n]*)", std::regex::multiline);
  std::smatch names_match, totals_match;
  std::map<std::string, double> events;
  if (!std::regex_search(dump_text, names_match, names) ||
      !std::regex_search(dump_text, totals_match, totals))
    return events;
  std::stringstream name_list(names_match[1].str()), value_list(totals_match[1].str());
  std::string name;
  double value = 0;
  while (name_list >> name) {
    // A cost line may leave trailing zeros out (callgrind's format); a summary is one.
    if (!(value_list >> value)) value = 0;
    events[name] = value;
  }
  return events;
}

std::optional<double> CallgrindTotal(const std::string& dump_text) {
  static const std::regex total("^(?:summary|totals):[ \\t]*([0-9]+)", std::regex::multiline);
  std::smatch match;
  if (!std::regex_search(dump_text, match, total)) return std::nullopt;
  return std::stod(match[1]);
}

void WriteFacts(const std::string& path,
                const std::vector<std::pair<std::string, std::string>>& facts) {
  std::string text;
  for (const auto& [key, value] : facts) {
    std::string line = value;
    std::replace(line.begin(), line.end(), '\n', ' ');
    text += key + "=" + line + "\n";
  }
  WriteFileAtomically(path, text);  // whole: the parent reads it only once the child is gone
}

std::vector<std::pair<std::string, std::string>> ReadFacts(const std::string& path) {
  std::vector<std::pair<std::string, std::string>> facts;
  std::stringstream text(ReadText(path));
  std::string line;
  while (std::getline(text, line)) {
    const auto equals = line.find('=');
    if (equals != std::string::npos)
      facts.emplace_back(line.substr(0, equals), line.substr(equals + 1));
  }
  return facts;
}

namespace {
// CountInChild's work, which may throw.
CountBatch CountInScratchFolder(const CountRequest& request,
                                const std::function<bool()>& should_stop);
}  // namespace

CountBatch CountInChild(const CountRequest& request, const std::function<bool()>& should_stop) {
  try {
    return CountInScratchFolder(request, should_stop);
  } catch (const std::exception& error) {  // the scratch folder, the copies
    CountBatch batch;
    batch.cases.assign(static_cast<size_t>(request.cases),
                       StepCounts{{}, {}, std::string("cannot start counting: ") + error.what()});
    return batch;
  }
}

namespace {

// The counting child's poll: looks (twice a second) for the case files the child has
// finished in `out_dir` and tells `request.on_counted` when there are more.
std::function<void()> WatchingCountedCases(const CountRequest& request,
                                           const std::string& out_dir) {
  if (!request.on_counted) return nullptr;
  auto counted = std::make_shared<int64_t>(0);
  auto next_look = std::make_shared<std::chrono::steady_clock::time_point>();
  return [&request, out_dir, counted, next_look] {
    const auto now = std::chrono::steady_clock::now();
    if (now >= *next_look) {
      *next_look = now + std::chrono::milliseconds(500);
      int64_t present = *counted;
      std::error_code unreadable;  // progress only: a folder it cannot read shows none
      while (present < request.cases && fs::exists(CaseCountFile(out_dir, present), unreadable))
        ++present;
      if (present > *counted) request.on_counted(*counted = present);
    }
  };
}

// The counting child's preload (harness/valgrind_preload: it lets valgrind start LibTorch
// on CPUs whose CPUID hides RDTSCP), copied into `scratch` for the same reason as the
// binary; looked for beside `binary` (the build tree) and in ../libexec/seqbench (an
// install). None when neither has it: counting goes on without, as on a CPU that needs none.
std::optional<fs::path> CopyValgrindPreload(const fs::path& binary, const fs::path& scratch) {
  static const char* const kPlaces[] = {".", "../libexec/seqbench"};
  for (const char* place : kPlaces) {
    const fs::path found = binary.parent_path() / place / "libseqbench_valgrind_preload.so";
    std::error_code absent;
    if (!fs::is_regular_file(found, absent)) continue;
    const fs::path copy = scratch / "preload.so";
    std::error_code failed;  // unreadable: counting goes on without, as where none is found
    if (!fs::copy_file(found, copy, failed) || failed) return std::nullopt;
    return copy;
  }
  return std::nullopt;
}

CountBatch CountInScratchFolder(const CountRequest& request,
                                const std::function<bool()>& should_stop) {
  CountBatch batch;
  const auto fail_all = [&](const std::string& why) {
    batch.cases.assign(static_cast<size_t>(request.cases), StepCounts{{}, {}, why});
    return batch;
  };
  const bool native = CountsNatively(request.kinds);
  const std::string valgrind = native ? "" : FirstOnPath("valgrind").value_or("");
  if (native) {
    if (const std::string why = HardwareCountersUnavailable(); !why.empty()) return fail_all(why);
  } else if (valgrind.empty()) {
    return fail_all("valgrind is not installed (ci/install-deps installs it)");
  } else if (!CallgrindCompiledIn()) {
    return fail_all("built without valgrind/callgrind.h (install valgrind, reconfigure)");
  }
  ScratchFolder scratch;
  const fs::path dumps = scratch.path() / "callgrind.out";
  std::vector<std::string> argv;
  if (!native) {
    argv = {valgrind,
            "--tool=callgrind",
            "--instr-atstart=no",
            "--collect-atstart=no",
            "--callgrind-out-file=" + dumps.string(),
            "--log-file=" + (scratch.path() / "valgrind.log").string()};
    if (SimulatesCaches(request.kinds))
      argv.insert(argv.end(), CacheArguments().begin(), CacheArguments().end());
  }
  std::vector<std::string> child = request.command(scratch.path().string());
  // Where the child's files lie moves its counts: its argv and environment sit at the top
  // of its stack, and its executable's resolved path is copied to the heap early, so
  // their lengths shift stack and heap addresses and with them the alignment peeling of
  // vectorised loops (a case moved by 1.5% with the binary 40 characters deeper, and by
  // 0.1% with a 3 kB variable). The child therefore runs a copy of the binary in the
  // scratch folder (valgrind would also read /proc/self/exe as its own binary), from
  // there, reads the files the caller put there, and gets a fixed environment.
  std::vector<std::string> environment = {"PATH=/usr/bin:/bin", "HOME=/", "LC_ALL=C"};
  if (!child.empty()) {
    const fs::path binary = fs::canonical(child[0]);
    const fs::path copy = scratch.path() / "seqbench";
    fs::copy_file(binary, copy);
    fs::permissions(copy, fs::perms::owner_all);
    child[0] = copy.string();
    if (!native) {
      if (const auto preload = CopyValgrindPreload(binary, scratch.path()))
        environment.push_back("LD_PRELOAD=" + preload->string());
    }
  }
  for (std::string& arg : child) argv.push_back(std::move(arg));
  for (const auto& [name, value] : CountPinning()) environment.push_back(name + "=" + value);
  const fs::path output = scratch.path() / "output";
  ChildSpec spec;
  spec.argv = std::move(argv);
  spec.timeout_s = request.timeout_s;
  spec.should_stop = should_stop;
  spec.on_poll = WatchingCountedCases(request, scratch.path().string());
  spec.environment = std::move(environment);
  spec.inherit_environment = false;
  spec.working_dir = scratch.path().string();
  spec.output = ChildSpec::Output::kFile;
  spec.output_path = output.string();
  const ChildOutcome outcome = RunChild(spec);
  batch.wall_s = outcome.wall_s;
  const fs::path facts = scratch.path() / "facts";
  if (outcome.end == ChildOutcome::End::kInterrupted) return fail_all("interrupted");
  if (outcome.end != ChildOutcome::End::kExited || outcome.exit_code != 0 || !fs::exists(facts)) {
    // The child's own last word (run --count-out prints why it failed), else valgrind's.
    const std::string said = LastLogLine(output);
    const std::string log = said.empty() ? LastLogLine(scratch.path() / "valgrind.log") : said;
    return fail_all("the counting child failed: " + outcome.Describe() +
                    (log.empty() ? "" : " (" + log + ")"));
  }
  batch.facts = ReadFacts(facts.string());
  const auto totals = ReadDumps(dumps);
  for (int64_t index = 0; index < request.cases; ++index)
    batch.cases.push_back(CaseCounts(totals, scratch.path(), index, request.steps));
  return batch;
}

}  // namespace

std::vector<Metric> CountMetrics(const StepCounts& counts) {
  std::vector<Metric> metrics;
  for (const auto& [series, steps] : counts.steps) {
    if (steps.empty()) continue;
    std::string unit = "instructions";
    for (const CountKind& kind : CountKinds())
      if (series == kind.metric) unit = kind.unit;
    const double median = stats::Median(steps);
    const auto [low, high] = std::minmax_element(steps.begin(), steps.end());
    metrics.push_back({series + "_per_step", median, unit});
    metrics.push_back({series + "_spread", median > 0 ? (*high - *low) / median : 0, "ratio"});
    for (size_t k = 0; k < steps.size(); ++k)
      metrics.push_back({series + "_step_" + std::to_string(k + 1), steps[k], unit});
  }
  return metrics;
}

}  // namespace seqbench
