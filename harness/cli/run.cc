// `seqbench run SUITE.toml`: runs a suite's cases and stores every result, one
// transaction per finished case, with the run's environment and provenance.
#include <boost/program_options.hpp>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <ctime>
#include <iostream>
#include <random>
#include <regex>

#include "harness/cli/command.h"
#include "harness/cuda_probe.h"
#include "harness/environment.h"
#include "harness/memory.h"
#include "harness/runner.h"
#include "reports/format.h"
#include "results/store.h"
#include "variants/core/trace.h"

namespace po = boost::program_options;

namespace seqbench::cli {
namespace {

volatile std::sig_atomic_t stop_requested = 0;
void RequestStop(int) { stop_requested = 1; }

std::string OptionsText(const VariantOptions& options) {
  std::string text;
  for (const auto& [name, value] : options) {
    text += (text.empty() ? "" : ",") + name + "=" + std::to_string(value);
  }
  return text;
}

CaseRecord ToRecord(const CaseResult& result, int64_t position) {
  const Workload& w = result.spec.workload;
  CaseRecord record;
  record.case_key = result.spec.Key();
  record.position = position;
  record.variant_name = result.spec.variant.name;
  record.variant_key = result.spec.variant.key;
  record.category = result.category;
  record.description = result.description;
  record.options = OptionsText(result.spec.variant.options);
  record.mode = std::string(ModeName(w.mode));
  record.dtype = w.dtype;
  record.device = w.device;
  record.batch = w.batch;
  record.seq_len = w.seq_len;
  record.min_len = w.min_len;
  record.generate_tokens = w.generate_tokens;
  record.layers = result.model.num_layers;
  record.width = result.model.width;
  record.status = result.status;
  record.message = result.message;
  record.reference = result.reference;
  record.iterations = result.timing.iterations;
  record.tokens_per_step = result.tokens_per_step;
  record.wall_s = result.wall_s;
  record.samples_s = result.timing.samples_s;
  const auto add = [&](const std::string& name, double value, const char* unit) {
    record.metrics.push_back({name, value, unit});
  };
  for (const auto& [name, value] : result.timing.statistics) {
    add("runtime_" + name + (name == "cv" ? "" : "_s"), value, name == "cv" ? "ratio" : "s");
  }
  if (result.timing.samples_s.size() == 1) {  // Google Benchmark aggregates need 2 samples
    for (const char* name : {"mean", "median", "min", "max"}) {
      add(std::string("runtime_") + name + "_s", result.timing.samples_s[0], "s");
    }
  }
  if (const auto mean = record.MetricValue("runtime_mean_s"); mean && *mean > 0) {
    add("tokens_per_s", result.tokens_per_step / *mean, "tokens/s");
  }
  if (result.memory.peak_bytes >= 0) add("peak_bytes", result.memory.peak_bytes, "bytes");
  if (result.memory.activation_bytes >= 0)
    add("activation_bytes", result.memory.activation_bytes, "bytes");
  if (result.memory.max_rss_bytes >= 0) add("max_rss_bytes", result.memory.max_rss_bytes, "bytes");
  if (result.checked) {
    const EquivalenceResult& c = result.correctness;
    if (w.mode == Mode::kGenerate) {
      add("mismatched_tokens", c.mismatched_tokens, "count");
    } else {
      add("logits_max_abs", c.logits.max_abs, "abs");
      add("logits_max_rel", c.logits.max_rel, "ratio");
      add("loss_max_abs", c.loss.max_abs, "abs");
      if (w.mode == Mode::kTrain) {
        add("grad_max_abs", c.gradients.max_abs, "abs");
        add("grad_max_rel", c.gradients.max_rel, "ratio");
      }
    }
    add("correct", c.passed() ? 1 : 0, "bool");
  }
  return record;
}

std::string ProgressLine(const CaseResult& result, const CaseRecord& record) {
  std::string line = result.spec.variant.name + " " + result.spec.workload.Describe() + "  ";
  const auto mean = record.MetricValue("runtime_mean_s");
  const auto std = record.MetricValue("runtime_stddev_s");
  if (mean) line += FormatMeanStd(*mean, std ? *std : -1) + "  ";
  if (result.status == kStatusOk) return line + "✓";
  if (result.status == kStatusMismatch) return line + "✗ mismatch: " + result.message;
  return line + result.status + ": " + result.message;
}

}  // namespace

std::string NewUuid() {
  std::random_device device;
  std::mt19937_64 generator((static_cast<uint64_t>(device()) << 32) ^ device());
  char text[33];
  std::snprintf(text, sizeof(text), "%016llx%016llx", (unsigned long long)generator(),
                (unsigned long long)generator());
  return text;
}

std::string UtcNow() {
  const std::time_t now = std::time(nullptr);
  std::tm parts{};
  gmtime_r(&now, &parts);
  char text[32];
  std::strftime(text, sizeof(text), "%Y-%m-%dT%H:%M:%SZ", &parts);
  return text;
}

int RunRun(const std::vector<std::string>& args) {
  std::string suite_path, db_path, device, filter, shard_text;
  int64_t repetitions = 0, resume = 0, stop_after = 0;
  po::options_description options(
      "Usage: seqbench run SUITE.toml [OPTIONS]\n\n"
      "Runs every case of a suite: checks it against the suite's baseline, times it with\n"
      "Google Benchmark, measures its peak memory, and stores all of it with the run's\n"
      "environment. Exits 0 when every case is ok or skipped, 1 when any mismatched or\n"
      "failed (all are stored either way), 2 on bad input.\n\nOptions");
  options.add_options()("help,h", "show this help")(
      "db", po::value(&db_path)->default_value("results/seqbench.db"), "results database")(
      "device", po::value(&device), "run every case on this device (cpu or cuda)")(
      "filter", po::value(&filter), "only cases whose key matches this regex")(
      "repetitions", po::value(&repetitions), "override the suite's repetitions")(
      "resume", po::value(&resume), "complete run RUN_ID: skip its finished cases")(
      "shard", po::value(&shard_text), "run shard i of n (i/n, 1-based): a deterministic subset")(
      "nvtx", "emit NVTX ranges per case and step phase (for Nsight Systems)");
  po::options_description hidden;
  hidden.add_options()("suite", po::value(&suite_path))(
      "stop-after", po::value(&stop_after), "stop after K cases, as if interrupted (tests)");
  po::positional_options_description positional;
  positional.add("suite", 1);
  const auto values = ParseArguments(args, options, hidden, positional, "run");
  if (!values) return 0;
  if (suite_path.empty()) throw UsageError("run: no suite file given (see seqbench run --help)");
  if (values->count("nvtx")) {
    if (!TracingCompiledIn()) {
      throw UsageError(
          "run: --nvtx: this seqbench was built without NVTX3 (no nvtx3/nvToolsExt.h found "
          "at configure time; install the CUDA Toolkit and reconfigure)");
    }
    SetTracing(true);
  }
  if (values->count("device") && device != "cpu" && device != "cuda") {
    throw UsageError("run: --device must be cpu or cuda, got '" + device + "'");
  }
  if (values->count("repetitions") && repetitions < 1) {
    throw UsageError("run: --repetitions must be at least 1");
  }
  int64_t shard_index = 1, shard_count = 1;
  if (!shard_text.empty()) {
    const std::regex shard_pattern("([0-9]+)/([0-9]+)");
    std::smatch match;
    if (!std::regex_match(shard_text, match, shard_pattern) ||
        (shard_index = std::stoll(match[1])) < 1 ||
        (shard_count = std::stoll(match[2])) < shard_index) {
      throw UsageError("run: --shard must be i/n with 1 <= i <= n, e.g. 2/4; got '" + shard_text +
                       "'");
    }
  }
  std::regex case_filter;
  try {
    case_filter = std::regex(filter.empty() ? ".*" : filter);
  } catch (const std::regex_error& error) {
    throw UsageError("run: --filter '" + filter + "' is not a valid regex: " + error.what());
  }

  // Everything the user gave is checked before the database is touched.
  Suite suite;
  try {
    suite = LoadSuiteFile(suite_path);
  } catch (const SuiteError& error) {
    throw UsageError(error.what());
  }
  if (values->count("repetitions")) suite.measurement.repetitions = repetitions;
  std::vector<CaseSpec> cases;
  for (CaseSpec spec : suite.Expand()) {
    if (values->count("device")) spec.workload.device = device;
    if (std::regex_search(spec.Key(), case_filter)) cases.push_back(spec);
  }
  cases = Shard(cases, shard_index, shard_count);
  if (cases.empty())
    throw UsageError("run: no case of " + suite_path + " matches --filter/--shard");

  Store store(db_path);
  int64_t run_id = 0;
  std::set<std::string> finished;
  if (resume > 0) {
    const auto run = store.FindRun(resume);
    if (!run)
      throw UsageError("run: --resume " + std::to_string(resume) + ": no such run in " + db_path);
    if (run->suite_hash != ContentHash(suite.text)) {
      throw UsageError("run: --resume " + std::to_string(resume) + ": " + suite_path +
                       " changed since that run (hash " + ContentHash(suite.text) + ", run has " +
                       run->suite_hash + "); resume needs the same suite file");
    }
    const std::string shard = shard_text.empty() ? "" : shard_text;
    if (run->shard != shard) {
      throw UsageError("run: --resume " + std::to_string(resume) + ": that run was shard '" +
                       run->shard + "'; pass the same --shard");
    }
    run_id = resume;
    finished = store.CaseKeys(run_id);
    store.SetRunStatus(run_id, "running", "");
  } else {
    const Environment env = CaptureEnvironment();
    RunRecord run;
    run.uuid = NewUuid();
    run.suite_name = suite.name;
    run.suite_path = suite_path;
    run.suite_text = suite.text;
    run.suite_hash = ContentHash(suite.text);
    run.command_line = CommandLine();
    run.shard = shard_text;
    run.seed = suite.seed;
    run.status = "running";
    run.started_at = UtcNow();
    run.environment = env.entries;
    run.environment.emplace_back(
        "timer", cuda_probe::Compiled()
                     ? "CUDA events around the step on CUDA; steady_clock around the step on CPU"
                     : "steady_clock around the step (device synchronised)");
    for (const auto& entry : cuda_probe::Environment()) run.environment.push_back(entry);
    run.environment.emplace_back("repetitions", std::to_string(suite.measurement.repetitions));
    run.environment.emplace_back("warmup", std::to_string(suite.measurement.warmup));
    run.environment.emplace_back("nvtx", !TracingCompiledIn() ? "not compiled in"
                                         : TracingEnabled()   ? "on"
                                                              : "off");
    run.warnings = env.warnings;
    run_id = store.CreateRun(run);
    for (const auto& warning : env.warnings) std::cerr << "seqbench: warning: " << warning << "\n";
  }

  std::signal(SIGINT, RequestStop);
  std::signal(SIGTERM, RequestStop);
  std::printf(
      "run %lld: suite %s, %zu cases%s -> %s\n", (long long)run_id, suite.name.c_str(),
      cases.size(),
      finished.empty() ? "" : (" (" + std::to_string(finished.size()) + " already done)").c_str(),
      db_path.c_str());
  std::fflush(stdout);

  CaseRunner runner(suite);
  std::map<std::string, int64_t> counts;
  int64_t done = 0, ran = 0;
  double elapsed_s = 0;
  const int64_t to_run = static_cast<int64_t>(cases.size()) -
                         std::count_if(cases.begin(), cases.end(), [&](const CaseSpec& c) {
                           return finished.count(c.Key()) > 0;
                         });
  bool interrupted = false;
  for (size_t position = 0; position < cases.size(); ++position) {
    const CaseSpec& spec = cases[position];
    if (finished.count(spec.Key())) continue;
    if (stop_requested || (stop_after > 0 && ran >= stop_after)) {
      interrupted = true;
      break;
    }
    const CaseResult result = runner.Run(spec);
    const CaseRecord record = ToRecord(result, static_cast<int64_t>(position));
    store.AddCase(run_id, record);
    ++counts[result.status];
    ++ran;
    ++done;
    elapsed_s += result.wall_s;
    const double eta = elapsed_s / done * (to_run - done);
    std::printf("[%lld/%lld] %s  ETA %s\n", (long long)done, (long long)to_run,
                ProgressLine(result, record).c_str(), FormatEta(eta).c_str());
    std::fflush(stdout);
  }
  store.SetRunStatus(run_id, interrupted ? "interrupted" : "complete", interrupted ? "" : UtcNow());
  std::printf("run %lld %s: %lld ok, %lld mismatch, %lld error, %lld skipped\n", (long long)run_id,
              interrupted ? "interrupted (finish it with --resume)" : "complete",
              (long long)counts[kStatusOk], (long long)counts[kStatusMismatch],
              (long long)counts[kStatusError], (long long)counts[kStatusSkipped]);
  if (interrupted) return 1;
  return counts[kStatusMismatch] + counts[kStatusError] > 0 ? 1 : 0;
}

}  // namespace seqbench::cli
