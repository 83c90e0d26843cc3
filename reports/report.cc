#include "reports/report.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "reports/format.h"
#include "reports/markdown.h"

namespace seqbench {
namespace {

using nlohmann::json;

// Every metric a case may carry, in the order CSV columns list them.
const std::vector<std::string> kMetricColumns = {
    "runtime_mean_s",   "runtime_median_s", "runtime_stddev_s", "runtime_cv",
    "runtime_min_s",    "runtime_max_s",    "tokens_per_s",     "peak_bytes",
    "activation_bytes", "max_rss_bytes",    "logits_max_abs",   "logits_max_rel",
    "loss_max_abs",     "grad_max_abs",     "grad_max_rel",     "mismatched_tokens",
    "correct"};

// 3 significant figures without exponents: 1899.4 -> "1899", 8.233 -> "8.23".
std::string Throughput(double value) {
  char text[32];
  std::snprintf(text, sizeof(text), value >= 100 ? "%.0f" : "%.3g", value);
  return text;
}

std::string Speedup(double ratio) {
  char text[32];
  std::snprintf(text, sizeof(text),
                ratio >= 100  ? "%.0f×"
                : ratio >= 10 ? "%.1f×"
                              : "%.2f×",
                ratio);
  return text;
}

std::string StatusCell(const CaseRecord& c) {
  if (c.status == "ok") return "✓";
  if (c.status == "mismatch") return "✗ mismatch";
  return c.status + ": " + c.message;
}

std::string ModificationsCell(const CaseRecord& c) {
  std::string text = c.variant_name;
  if (!c.options.empty()) text += " (" + c.options + ")";
  if (!c.description.empty()) text += ": " + c.description;
  return text;
}

std::string ShapeCell(const CaseRecord& c) {
  const std::string model =
      c.layers > 0 ? "L=" + std::to_string(c.layers) + " D=" + std::to_string(c.width) + " " : "";
  std::string text = model + "B=" + std::to_string(c.batch) + " T=" + std::to_string(c.seq_len);
  if (c.min_len > 0) text += " (min " + std::to_string(c.min_len) + ")";
  if (c.mode == "generate") {
    text = model + "B=" + std::to_string(c.batch) + " P=" + std::to_string(c.seq_len) +
           " N=" + std::to_string(c.generate_tokens);
  }
  return text;
}

// The row a case's speedup is relative to: the baseline on the same workload, else the
// group's first baseline row; nullptr when the group has no baseline.
const CaseRecord* SpeedupReference(const CaseRecord& c, const std::vector<const CaseRecord*>& group,
                                   const std::string& baseline) {
  const CaseRecord* first = nullptr;
  for (const CaseRecord* other : group) {
    if (other->variant_name != baseline || !other->MetricValue("tokens_per_s")) continue;
    if (SameWorkload(*other, c)) return other;
    if (first == nullptr) first = other;
  }
  return first;
}

std::string DateOf(const std::string& timestamp) { return timestamp.substr(0, 10); }

}  // namespace

double SampleMedian(std::vector<double> samples) {
  std::sort(samples.begin(), samples.end());
  const size_t n = samples.size();
  return n % 2 ? samples[n / 2] : 0.5 * (samples[n / 2 - 1] + samples[n / 2]);
}

std::string EnvironmentValue(const RunRecord& run, const std::string& key) {
  for (const auto& [name, value] : run.environment) {
    if (name == key) return value;
  }
  return "";
}

std::string WorkloadLabel(const CaseRecord& c) {
  std::ostringstream text;
  text << "mode=" << c.mode;
  if (c.layers > 0) text << " L=" << c.layers << " D=" << c.width;
  text << " B=" << c.batch << " T=" << c.seq_len;
  if (c.min_len > 0) text << " min_len=" << c.min_len;
  if (c.mode == "generate") text << " N=" << c.generate_tokens;
  text << " dtype=" << c.dtype << " device=" << c.device;
  return text.str();
}

std::string CaseField(const CaseRecord& c, const std::string& name) {
  if (name == "mode") return c.mode;
  if (name == "dtype") return c.dtype;
  if (name == "device") return c.device;
  if (name == "batch") return std::to_string(c.batch);
  if (name == "seq_len") return std::to_string(c.seq_len);
  if (name == "min_len") return std::to_string(c.min_len);
  if (name == "generate_tokens") return std::to_string(c.generate_tokens);
  if (name == "layers") return std::to_string(c.layers);
  if (name == "width") return std::to_string(c.width);
  return "";
}

bool SameWorkload(const CaseRecord& a, const CaseRecord& b) {
  return WorkloadLabel(a) == WorkloadLabel(b);
}

std::string RenderMarkdown(const RunRecord& run, const std::vector<CaseRecord>& cases,
                           const std::string& baseline) {
  // Groups in first-appearance order: one table per mode, dtype and device.
  std::vector<std::string> order;
  std::map<std::string, std::vector<const CaseRecord*>> groups;
  for (const CaseRecord& c : cases) {
    const std::string group = c.mode + " · " + c.dtype + " · " + c.device;
    if (!groups.count(group)) order.push_back(group);
    groups[group].push_back(&c);
  }
  std::string text;
  for (const std::string& group_name : order) {
    const auto& group = groups[group_name];
    const std::string device = group.front()->device;
    std::string hardware =
        device == "cuda" ? EnvironmentValue(run, "gpu_name") : EnvironmentValue(run, "cpu_model");
    if (hardware.empty()) hardware = device;
    text += "**" + run.suite_name + " · " + group_name + "** — " + hardware + ", LibTorch " +
            EnvironmentValue(run, "torch_version") + ", " + EnvironmentValue(run, "torch_threads") +
            " thread(s), " + DateOf(run.started_at) + ", run " + std::to_string(run.run_id) +
            " (git " + EnvironmentValue(run, "git_sha").substr(0, 7) +
            (EnvironmentValue(run, "git_dirty") == "true" ? "-dirty" : "") + ")\n\n";
    MarkdownTable table({"S/N", "Modifications", "Improvement Cat.", "Workload", "Runtime duration",
                         "Peak memory usage", "Activation memory", "Speedup", "Tokens/s",
                         "Correct"});
    std::string reference_note;
    int serial = 1;
    for (const CaseRecord* c : group) {
      const auto mean = c->MetricValue("runtime_mean_s");
      const auto std = c->MetricValue("runtime_stddev_s");
      const auto tokens = c->MetricValue("tokens_per_s");
      const auto peak = c->MetricValue("peak_bytes");
      const auto activation = c->MetricValue("activation_bytes");
      std::string speedup = "—";
      if (const CaseRecord* reference = SpeedupReference(*c, group, baseline);
          reference && tokens) {
        speedup = Speedup(*tokens / *reference->MetricValue("tokens_per_s"));
        if (!SameWorkload(*reference, *c) || reference_note.empty()) {
          reference_note =
              "Speedup: throughput (tokens/s) over " + baseline + " at " + ShapeCell(*reference);
        }
      }
      table.AddRow({std::to_string(serial++), ModificationsCell(*c), c->category, ShapeCell(*c),
                    mean ? FormatMeanStd(*mean, std ? *std : -1) : "—",
                    peak ? FormatBytes(static_cast<int64_t>(*peak)) : "—",
                    activation ? FormatBytes(static_cast<int64_t>(*activation)) : "—", speedup,
                    tokens ? Throughput(*tokens) : "—", StatusCell(*c)});
    }
    text += table.Render();
    if (!reference_note.empty()) text += "\n" + reference_note + " (same workload where it ran).\n";
    text += "\n";
  }
  return text;
}

std::string RenderCsv(const RunRecord& run, const std::vector<CaseRecord>& cases) {
  const auto quote = [](const std::string& field) {
    if (field.find_first_of(",\"\n") == std::string::npos) return field;
    std::string quoted = "\"";
    for (const char c : field) quoted += (c == '"') ? std::string("\"\"") : std::string(1, c);
    return quoted + "\"";
  };
  std::string text =
      "run_id,suite,case_key,variant_name,variant_key,category,options,mode,dtype,device,batch,"
      "seq_len,min_len,generate_tokens,layers,width,status,message,reference,iterations,"
      "repetitions,tokens_per_step,wall_s";
  for (const auto& metric : kMetricColumns) text += "," + metric;
  text += "\n";
  for (const CaseRecord& c : cases) {
    const std::vector<std::string> fields = {std::to_string(run.run_id),
                                             run.suite_name,
                                             c.case_key,
                                             c.variant_name,
                                             c.variant_key,
                                             c.category,
                                             c.options,
                                             c.mode,
                                             c.dtype,
                                             c.device,
                                             std::to_string(c.batch),
                                             std::to_string(c.seq_len),
                                             std::to_string(c.min_len),
                                             std::to_string(c.generate_tokens),
                                             std::to_string(c.layers),
                                             std::to_string(c.width),
                                             c.status,
                                             c.message,
                                             c.reference,
                                             std::to_string(c.iterations),
                                             std::to_string(c.samples_s.size()),
                                             std::to_string(c.tokens_per_step),
                                             FormatSignificant(c.wall_s, 6)};
    std::string line;
    for (const auto& field : fields) line += (line.empty() ? "" : ",") + quote(field);
    for (const auto& metric : kMetricColumns) {
      const auto value = c.MetricValue(metric);
      line += "," + (value ? FormatSignificant(*value, 10) : std::string());
    }
    text += line + "\n";
  }
  return text;
}

std::string RenderJson(const RunRecord& run, const std::vector<CaseRecord>& cases) {
  json environment = json::object();
  for (const auto& [key, value] : run.environment) environment[key] = value;
  json document = {{"run",
                    {{"run_id", run.run_id},
                     {"uuid", run.uuid},
                     {"suite", run.suite_name},
                     {"suite_path", run.suite_path},
                     {"suite_hash", run.suite_hash},
                     {"command_line", run.command_line},
                     {"shard", run.shard},
                     {"seed", run.seed},
                     {"status", run.status},
                     {"started_at", run.started_at},
                     {"finished_at", run.finished_at},
                     {"environment", environment},
                     {"warnings", run.warnings}}},
                   {"cases", json::array()}};
  for (const CaseRecord& c : cases) {
    json metrics = json::object();
    for (const Metric& metric : c.metrics)
      metrics[metric.name] = {{"value", metric.value}, {"unit", metric.unit}};
    document["cases"].push_back({{"case_key", c.case_key},
                                 {"variant_name", c.variant_name},
                                 {"variant_key", c.variant_key},
                                 {"category", c.category},
                                 {"description", c.description},
                                 {"options", c.options},
                                 {"mode", c.mode},
                                 {"dtype", c.dtype},
                                 {"device", c.device},
                                 {"batch", c.batch},
                                 {"seq_len", c.seq_len},
                                 {"min_len", c.min_len},
                                 {"generate_tokens", c.generate_tokens},
                                 {"layers", c.layers},
                                 {"width", c.width},
                                 {"status", c.status},
                                 {"message", c.message},
                                 {"reference", c.reference},
                                 {"iterations", c.iterations},
                                 {"tokens_per_step", c.tokens_per_step},
                                 {"wall_s", c.wall_s},
                                 {"samples_s", c.samples_s},
                                 {"metrics", metrics}});
  }
  return document.dump(2) + "\n";
}

std::string RenderGbenchJson(const RunRecord& run, const std::vector<CaseRecord>& cases) {
  // Google Benchmark's JSONReporter layout (v1.7): a context object and one entry per
  // repetition ("iteration") plus one per aggregate. Times are per step, in ms; seqbench
  // times wall clock only, so cpu_time repeats real_time.
  json context = {
      {"date", run.started_at},
      {"host_name", EnvironmentValue(run, "hostname")},
      {"executable", "seqbench run " + run.suite_path},
      {"num_cpus", std::atoi(EnvironmentValue(run, "cpu_logical_cores").c_str())},
      {"mhz_per_cpu", 0},
      {"cpu_scaling_enabled", EnvironmentValue(run, "cpu_governor") != "performance"},
      {"caches", json::array()},
      {"load_avg", json::array()},
      {"library_build_type", EnvironmentValue(run, "build_type") == "Debug" ? "debug" : "release"},
      {"seqbench_run_id", run.run_id},
      {"seqbench_suite", run.suite_name}};
  json benchmarks = json::array();
  int64_t family_index = 0;
  for (const CaseRecord& c : cases) {
    if (c.samples_s.empty()) continue;  // errors and skips have no timings
    std::string name = c.case_key;
    for (char& ch : name) {
      if (ch == ' ') ch = '/';
    }
    const int64_t repetitions = static_cast<int64_t>(c.samples_s.size());
    const auto entry = [&](const std::string& run_type, int64_t repetition_index, double seconds) {
      return json{{"name", name},
                  {"family_index", family_index},
                  {"per_family_instance_index", 0},
                  {"run_name", name},
                  {"run_type", run_type},
                  {"repetitions", repetitions},
                  {"repetition_index", repetition_index},
                  {"threads", 1},
                  {"iterations", c.iterations},
                  {"real_time", seconds * 1e3},
                  {"cpu_time", seconds * 1e3},
                  {"time_unit", "ms"}};
    };
    for (int64_t i = 0; i < repetitions; ++i)
      benchmarks.push_back(entry("iteration", i, c.samples_s[i]));
    for (const char* aggregate : {"mean", "median", "stddev", "cv", "min", "max"}) {
      const bool is_cv = std::string(aggregate) == "cv";
      const auto value = c.MetricValue(std::string("runtime_") + aggregate + (is_cv ? "" : "_s"));
      if (!value) continue;
      json item = entry("aggregate", 0, *value);
      item.erase("repetition_index");
      item["name"] = name + "_" + aggregate;
      item["aggregate_name"] = aggregate;
      item["aggregate_unit"] = is_cv ? "percentage" : "time";
      item["iterations"] = repetitions;
      if (is_cv) item["real_time"] = item["cpu_time"] = *value;
      benchmarks.push_back(item);
    }
    ++family_index;
  }
  return json{{"context", context}, {"benchmarks", benchmarks}}.dump(2) + "\n";
}

}  // namespace seqbench
