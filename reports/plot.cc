#include "reports/plot.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <stdexcept>

#include "base/files.h"
#include "base/process.h"
#include "reports/report.h"
#include "stats/statistics.h"

namespace seqbench {
namespace {

struct Axis {
  std::string label;
  double scale;  // raw value -> plotted unit
};

std::optional<double> XValue(const CaseRecord& c, const std::string& x) {
  if (x == "seq_len") return static_cast<double>(c.workload().seq_len);
  if (x == "batch") return static_cast<double>(c.workload().batch);
  if (x == "layers") return static_cast<double>(c.workload().layers);
  if (x == "memory") return c.MetricValue("activation_bytes");
  return std::nullopt;
}

std::optional<double> YValue(const CaseRecord& c, const std::string& y, const std::string& over,
                             const std::vector<CaseRecord>& cases) {
  if (y == "runtime") {
    if (c.samples_s.empty()) return std::nullopt;
    return stats::Median(c.samples_s);
  }
  if (y == "memory") return c.MetricValue("activation_bytes");
  if (y == "recompute") return c.MetricValue("recompute_factor");
  if (y == "tokens_per_s") return MedianThroughput(c);
  if (y == "speedup") {
    for (const CaseRecord& other : cases) {
      if (other.name() == over && other.workload() == c.workload()) return Speedup(c, other);
    }
  }
  return std::nullopt;
}

// The workload fields other than x, as "B=8 D=256"; only those in `varying` are named,
// so that one line never mixes workloads and a legend says no more than it must.
std::string SeriesSuffix(const CaseRecord& c, const std::set<std::string>& varying) {
  std::string suffix;
  for (const WorkloadField& field : WorkloadFields()) {
    if (varying.count(std::string(field.name))) {
      suffix += " " + std::string(field.label) + "=" + field.Get(c.workload());
    }
  }
  return suffix;
}

}  // namespace

namespace {

void CheckPlotRequest(const PlotRequest& request) {
  if (request.x != "seq_len" && request.x != "batch" && request.x != "layers" &&
      request.x != "memory") {
    throw std::invalid_argument("--x must be seq_len, batch, layers or memory, got '" + request.x +
                                "'");
  }
  if (request.y != "runtime" && request.y != "memory" && request.y != "tokens_per_s" &&
      request.y != "speedup" && request.y != "recompute") {
    throw std::invalid_argument(
        "--y must be runtime, memory, tokens_per_s, speedup or recompute, got '" + request.y + "'");
  }
  if (request.y == "speedup" && request.over.empty()) {
    throw std::invalid_argument("--y speedup needs --over VARIANT, the variant it is relative to");
  }
}

// The plot's lines, in the order first met, and the ranges of their points.
struct PlotSeries {
  std::vector<std::string> order;
  std::map<std::string, std::vector<std::pair<double, double>>> points;
  double x_min = 0, x_max = 0, y_min = 0, y_max = 0;
};

PlotSeries CollectSeries(const std::vector<CaseRecord>& cases, const PlotRequest& request) {
  // The workload fields other than x that vary name the lines apart.
  std::map<std::string, std::set<std::string>> values;
  for (const CaseRecord& c : cases) {
    for (const WorkloadField& field : WorkloadFields())
      values[std::string(field.name)].insert(field.Get(c.workload()));
  }
  std::set<std::string> varying;
  for (const auto& [field, distinct] : values) {
    if (field != request.x && distinct.size() > 1) varying.insert(field);
  }
  // Against a measurement rather than a workload field, a line is a registered variant
  // across its option settings (a schedule across budgets), not one named case.
  const bool trade_off = request.x == "memory";
  PlotSeries series;
  bool first = true;
  for (const CaseRecord& c : cases) {
    const auto x = XValue(c, request.x);
    const auto y = YValue(c, request.y, request.over, cases);
    if (!x || !y || *y <= 0 || (c.status != "ok" && c.status != "mismatch")) continue;
    if (request.y == "speedup" && c.name() == request.over) continue;
    const std::string name =
        (trade_off ? c.identity.variant_key : c.name()) + SeriesSuffix(c, varying);
    if (!series.points.count(name)) series.order.push_back(name);
    series.points[name].emplace_back(*x, *y);
    series.y_min = first ? *y : std::min(series.y_min, *y);
    series.y_max = first ? *y : std::max(series.y_max, *y);
    series.x_min = first ? *x : std::min(series.x_min, *x);
    series.x_max = first ? *x : std::max(series.x_max, *x);
    first = false;
  }
  if (series.points.empty())
    throw std::invalid_argument("no case of this run has " + request.y + " to plot");
  return series;
}

// Units that keep the axis numbers readable.
Axis YAxis(const PlotRequest& request, double y_max) {
  if (request.y == "runtime") {
    return y_max < 1e-3 ? Axis{"median step time (µs)", 1e6}
           : y_max < 1  ? Axis{"median step time (ms)", 1e3}
                        : Axis{"median step time (s)", 1};
  }
  if (request.y == "speedup") return Axis{"speedup over " + request.over + " (×)", 1};
  if (request.y == "memory") {
    return y_max < (1 << 30) ? Axis{"activation memory (MiB)", 1.0 / (1 << 20)}
                             : Axis{"activation memory (GiB)", 1.0 / (1 << 30)};
  }
  if (request.y == "recompute") return Axis{"recurrence steps run again per step", 1};
  return Axis{"tokens/s", 1};
}

Axis XAxis(const PlotRequest& request) {
  return request.x == "seq_len"  ? Axis{"sequence length T (tokens)", 1}
         : request.x == "batch"  ? Axis{"batch size B", 1}
         : request.x == "layers" ? Axis{"layers L", 1}
                                 : Axis{"activation memory of a train step (MiB)", 1.0 / (1 << 20)};
}

// The wavefront's ideal speedup over layers: L*T cells on a critical path of T+L-1.
void AddWavefrontIdeal(const std::vector<CaseRecord>& cases, PlotSeries& series) {
  int64_t steps = 0;
  for (const CaseRecord& c : cases) steps = std::max(steps, c.workload().seq_len);
  const std::string name = "ideal L·T/(T+L-1), T=" + std::to_string(steps);
  series.order.push_back(name);
  for (double layers = series.x_min; layers <= series.x_max; layers *= 2) {
    const double ideal = layers * steps / (steps + layers - 1);
    series.points[name].emplace_back(layers, ideal);
    series.y_max = std::max(series.y_max, ideal);
  }
}

}  // namespace

std::string BuildGnuplotScript(const std::vector<CaseRecord>& cases, const PlotRequest& request) {
  CheckPlotRequest(request);
  PlotSeries series = CollectSeries(cases, request);
  const Axis y_axis = YAxis(request, series.y_max);
  const Axis x_axis = XAxis(request);
  if (request.y == "speedup" && request.x == "layers") AddWavefrontIdeal(cases, series);
  std::string script = GnuplotPreamble(request.title, x_axis.label, y_axis.label);
  if (series.x_max / series.x_min >= 10) script += "set logscale x 2\n";
  if (series.y_max / series.y_min >= 10) script += "set logscale y 10\n";
  const std::vector<std::string>& order = series.order;
  for (size_t i = 0; i < order.size(); ++i) {
    auto& points = series.points[order[i]];
    std::sort(points.begin(), points.end());
    script += "$series" + std::to_string(i) + " << EOD\n";
    for (const auto& [x, y] : points) {
      char line[64];
      std::snprintf(line, sizeof(line), "%.10g %.10g\n", x * x_axis.scale, y * y_axis.scale);
      script += line;
    }
    script += "EOD\n";
  }
  script += "plot ";
  for (size_t i = 0; i < order.size(); ++i) {
    script += std::string(i ? ", \\\n     " : "") + "$series" + std::to_string(i) +
              " using 1:2 with linespoints lw 2 pt 7 title " + GnuplotQuoted(order[i]);
  }
  return script + "\n";
}

void RenderPlot(const std::vector<CaseRecord>& cases, const PlotRequest& request) {
  RunGnuplot(BuildGnuplotScript(cases, request), request.output);
}

std::string GnuplotPreamble(const std::string& title, const std::string& x_label,
                            const std::string& y_label) {
  std::string script =
      "set terminal svg size 900,480 dynamic noenhanced font 'sans,12' background rgb 'white'\n";
  if (!title.empty()) script += "set title " + GnuplotQuoted(title) + "\n";
  script +=
      "set xlabel " + GnuplotQuoted(x_label) + "\nset ylabel " + GnuplotQuoted(y_label) + "\n";
  return script + "set grid\nset key outside right top\n";
}

std::string GnuplotQuoted(const std::string& text) {
  // Single quotes: gnuplot expands backquotes (a shell command) and backslash escapes only
  // inside double quotes; inside single quotes the one special character is ' itself,
  // written twice. A newline would end the command and start another, so control
  // characters become spaces: the text reaches gnuplot as data and nothing else.
  std::string quoted = "'";
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte < 0x20 || byte == 0x7f) {
      quoted += ' ';
    } else {
      quoted += c;
      if (c == '\'') quoted += '\'';
    }
  }
  return quoted + "'";
}

bool IsSeqbenchSvg(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::string head(4096, '\0');
  in.read(head.data(), static_cast<std::streamsize>(head.size()));
  head.resize(static_cast<size_t>(in.gcount()));
  return head.find(kSeqbenchSvgStamp) != std::string::npos;
}

namespace {

// Feeds the script to a gnuplot process and returns what it wrote to its standard output;
// throws on a failure to start it or a non-zero exit. gnuplot itself, found on PATH, with
// no shell between us and it; the script reaches it on its standard input and its output
// comes back captured (base/process.h): gnuplot opens no path of its own. Its complaints
// reach the terminal.
std::string RunGnuplotProcess(const std::string& script, const std::string& output) {
  ChildSpec spec;
  spec.argv = {"gnuplot"};
  spec.search_path = true;
  spec.timeout_s = 600;
  spec.input = script;
  spec.output = ChildSpec::Output::kCaptureStdout;
  spec.max_output = size_t{256} << 20;
  const ChildOutcome outcome = RunChild(spec);
  if (outcome.end == ChildOutcome::End::kNotStarted)
    throw std::runtime_error("cannot start gnuplot (install gnuplot-nox) while writing " + output +
                             ": " + outcome.message);
  if (!outcome.Succeeded())
    throw std::runtime_error("gnuplot failed (" + outcome.Describe() + ") while writing " + output);
  if (outcome.output_truncated)
    throw std::runtime_error("gnuplot wrote more than 256 MiB while writing " + output);
  return outcome.output;
}

}  // namespace

void RunGnuplot(const std::string& script, const std::string& output) {
  CheckOutputTarget(output);  // a planted link is refused before gnuplot starts
  std::string svg = RunGnuplotProcess(script + "unset output\n", output);
  if (svg.empty()) throw std::runtime_error("gnuplot wrote nothing while writing " + output);
  // After the XML declaration (nothing may precede it), else first.
  size_t at = 0;
  if (svg.rfind("<?xml", 0) == 0)
    at = svg.find('\n') == std::string::npos ? svg.size() : svg.find('\n') + 1;
  svg.insert(at, std::string(kSeqbenchSvgStamp) + "\n");
  WriteFileAtomically(output, svg);
}

}  // namespace seqbench
