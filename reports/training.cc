#include "reports/training.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <iterator>
#include <map>
#include <set>
#include <stdexcept>
#include <utility>

#include "base/text.h"
#include "reports/escape/markdown.h"
#include "reports/format.h"
#include "reports/markdown.h"
#include "reports/plot.h"

namespace seqbench {
namespace {

const CaseRecord* FindPipeline(const std::vector<CaseRecord>& cases, const std::string& name) {
  for (const CaseRecord& c : cases) {
    if (c.name() == name) return &c;
  }
  return nullptr;
}

std::string Ratio(std::optional<double> mine, std::optional<double> theirs) {
  if (!mine || !theirs || *theirs <= 0) return "—";
  return FormatSignificant(*mine / *theirs) + "×";
}

std::string Count(std::optional<double> value) { return value ? FormatExactCount(*value) : "—"; }

std::string Percent(std::optional<double> ratio) {
  return ratio ? FormatSignificant(*ratio * 100, 3) + "%" : "—";
}

std::string Loss(std::optional<double> value) {
  if (!value) return "—";
  char text[32];
  std::snprintf(text, sizeof(text), "%.3f", *value);
  return text;
}

// "against `plain`" when every row has one reference; otherwise which rows are against
// which: "against each pipeline's own baseline: `a` for a, b; `c` for c, d".
std::string DescribeReferences(
    const std::vector<std::pair<std::string, std::vector<std::string>>>& references) {
  if (references.empty()) return "against the reference pipeline";
  const auto name = [](const std::string& text) { return escape::MarkdownCode(text); };
  if (references.size() == 1) return "against " + name(references.front().first);
  std::string text = "against each pipeline's own baseline: ";
  for (size_t i = 0; i < references.size(); ++i) {
    text += (i ? "; " : "") + name(references[i].first) + " for ";
    for (size_t j = 0; j < references[i].second.size(); ++j)
      text += (j ? ", " : "") + escape::MarkdownText(references[i].second[j]);
  }
  return text;
}

// The expectations that divide one metric of `variant` by the same of `over`: the kind,
// what it is called in the check's table, and the metric.
struct RatioKind {
  const char* what;
  const char* measure;
  const char* metric;
};
constexpr RatioKind kRatioKinds[] = {
    {"throughput", "tokens/s", "tokens_per_s"},
    {"memory_ratio", "peak memory", "peak_bytes"},
    {"optimizer_state_ratio", "optimizer state", "optimizer_state_bytes"},
    {"validation_loss_ratio", "validation loss", "final_validation_loss"}};

}  // namespace

TrainingCurves LoadCurves(const Store& store, int64_t run_id,
                          const std::vector<CaseRecord>& cases) {
  TrainingCurves curves;
  for (const CaseRecord& c : cases) curves[c.key()] = store.TrainingSteps(run_id, c.key());
  return curves;
}

std::string RenderTrainingTable(const std::vector<CaseRecord>& cases) {
  // Runs stored before the parameter count have none; their tables keep their columns.
  const bool counted = std::any_of(cases.begin(), cases.end(), [](const CaseRecord& c) {
    return c.MetricValue("parameters").has_value();
  });
  std::vector<std::string> header = {"pipeline", "options"};
  if (counted) header.push_back("parameters");
  for (const char* column : {"tokens/s", "× ref.", "peak memory", "× ref.", "optimizer state",
                             "padding eff.", "steps", "train loss", "val. loss", "status"}) {
    header.push_back(column);
  }
  MarkdownTable table(header);
  // Each reference with the pipelines measured against it, in the table's order.
  std::vector<std::pair<std::string, std::vector<std::string>>> references;
  for (const CaseRecord& c : cases) {
    const auto group = std::find_if(references.begin(), references.end(),
                                    [&](const auto& entry) { return entry.first == c.reference; });
    if (group == references.end()) {
      references.push_back({c.reference, {c.name()}});
    } else {
      group->second.push_back(c.name());
    }
    const CaseRecord* ref = FindPipeline(cases, c.reference);
    const auto tokens_per_s = c.MetricValue("tokens_per_s");
    const auto std_tokens_per_s = c.MetricValue("tokens_per_s_stddev");
    std::string throughput = "—";
    if (tokens_per_s) {
      throughput = FormatCount(*tokens_per_s) +
                   (std_tokens_per_s ? " ± " + FormatCount(*std_tokens_per_s) : "");
    }
    const auto peak = c.MetricValue("peak_bytes");
    const auto efficiency = c.MetricValue("padding_efficiency");
    // Runs stored before 8-bit AdamW have no optimizer-state figure.
    const auto optimizer_state = c.MetricValue("optimizer_state_bytes");
    std::vector<std::string> row = {c.name(), c.description};
    if (counted) row.push_back(Count(c.MetricValue("parameters")));
    const std::vector<std::string> measured = {
        throughput,
        ref ? Ratio(tokens_per_s, ref->MetricValue("tokens_per_s")) : "—",
        peak ? FormatBytes(static_cast<int64_t>(*peak)) : "n/a",
        ref ? Ratio(peak, ref->MetricValue("peak_bytes")) : "—",
        optimizer_state ? FormatBytes(static_cast<int64_t>(*optimizer_state)) : "—",
        Percent(efficiency),
        std::to_string(c.iterations),
        Loss(c.MetricValue("final_train_loss")),
        Loss(c.MetricValue("final_validation_loss")),
        c.status + (c.message.empty() ? "" : ": " + c.message)};
    row.insert(row.end(), measured.begin(), measured.end());
    table.AddRow(row);
  }
  return table.Render() +
         "\ntokens/s: non-padding tokens per second of wall time, loader waits included, over "
         "every step after the pipeline's timing warmup (± the standard deviation over steps). "
         "× ref.: " +
         DescribeReferences(references) +
         ". Peak memory: live tensor bytes at their peak over the whole training. Optimizer "
         "state: the bytes of its moments (and their block scales) after the last step. train "
         "loss: mean over the last 10% of steps; val. loss: on the held-out samples after "
         "the last step (nats/token).\n";
}

namespace {

constexpr char kRecallPrefix[] = "recall_accuracy_d";

// The distances any case has a recall accuracy at, ascending.
std::set<int64_t> RecallDistances(const std::vector<CaseRecord>& cases) {
  std::set<int64_t> distances;
  for (const CaseRecord& c : cases) {
    for (const Metric& metric : c.metrics) {
      if (metric.name.rfind(kRecallPrefix, 0) != 0) continue;
      // The whole suffix must be the distance; a name that is not one is no recall score.
      const char* first = metric.name.data() + sizeof(kRecallPrefix) - 1;
      const char* last = metric.name.data() + metric.name.size();
      int64_t distance = 0;
      const auto [end, error] = std::from_chars(first, last, distance);
      if (error == std::errc() && end == last && first != last) distances.insert(distance);
    }
  }
  return distances;
}

constexpr char kInferenceLossPrefix[] = "inference_loss_";

// The evaluate_with variants of `c`, in the order the run stored them.
std::vector<std::string> InferenceVariants(const CaseRecord& c) {
  std::vector<std::string> keys;
  for (const Metric& metric : c.metrics) {
    if (metric.name.rfind(kInferenceLossPrefix, 0) == 0 &&
        metric.name.size() > sizeof(kInferenceLossPrefix) - 1) {
      keys.push_back(metric.name.substr(sizeof(kInferenceLossPrefix) - 1));
    }
  }
  return keys;
}

}  // namespace

bool HasInferenceComparisons(const std::vector<CaseRecord>& cases) {
  return std::any_of(cases.begin(), cases.end(),
                     [](const CaseRecord& c) { return !InferenceVariants(c).empty(); });
}

std::string RenderInferenceTable(const std::vector<CaseRecord>& cases) {
  if (!HasInferenceComparisons(cases)) {
    throw std::invalid_argument(
        "no pipeline of this run ran its trained weights through another variant: give a "
        "pipeline evaluate_with = [\"int8_dynamic\"]");
  }
  MarkdownTable table({"pipeline", "through", "held-out loss (trained → through)", "Δ loss",
                       "perplexity", "argmax agrees", "logit RMS error", "greedy tokens agree",
                       "agree before first difference", "weights held"});
  std::optional<double> prompts_tokens;
  for (const CaseRecord& c : cases) {
    for (const std::string& key : InferenceVariants(c)) {
      const auto metric = [&](const std::string& name) {
        return c.MetricValue("inference_" + name + "_" + key);
      };
      const auto loss = metric("loss"), reference = metric("reference_loss");
      std::string difference = "—", perplexity = "—";
      if (loss && reference) {
        char text[32];
        std::snprintf(text, sizeof(text), "%+.4f", *loss - *reference);
        // A difference that rounds to zero has no sign worth reading.
        difference = std::string(text) == "-0.0000" ? "+0.0000" : text;
        perplexity = FormatSignificant(std::exp(*loss - *reference), 4) + "×";
      }
      const auto weight_bytes = metric("weight_bytes"), parameters = c.MetricValue("parameters");
      std::string weights = "—";
      if (weight_bytes) {
        weights = FormatBytes(static_cast<int64_t>(*weight_bytes));
        if (parameters && *parameters > 0) {
          weights += " (" + FormatSignificant(*weight_bytes / (4 * *parameters)) + "× float32)";
        }
      }
      const auto prefix = metric("generated_prefix");
      if (const auto tokens = metric("generated_tokens")) prompts_tokens = tokens;
      table.AddRow({c.name(), key, Loss(reference) + " → " + Loss(loss), difference, perplexity,
                    Percent(metric("argmax_agreement")),
                    metric("logit_rms_error") ? FormatSignificant(*metric("logit_rms_error")) : "—",
                    Percent(metric("generated_agreement")),
                    prefix ? FormatSignificant(*prefix) + " tokens" : "—", weights});
    }
  }
  return table.Render() +
         "\nThe pipeline's trained weights, set up in the variant named under \"through\", "
         "against the pipeline's own variant over every held-out target: the mean next-token "
         "loss of each, their difference in nats, the factor it puts on the perplexity, the "
         "share of positions whose most likely next token is the same, and the logits' root "
         "mean square difference. Greedy continuations: the same prompts (held-out samples' "
         "first tokens" +
         (prompts_tokens ? ", " + FormatExactCount(*prompts_tokens) + " generated tokens in all"
                         : std::string()) +
         ") decoded by both; the share of tokens that are the same at the same position, and "
         "how many agree, on average, before the first that does not. Weights held: the heap "
         "bytes the variant keeps once set up and run (its kernels' packed copies included), "
         "against the trained model's parameters in float32.\n";
}

bool HasRecallScores(const std::vector<CaseRecord>& cases) {
  return !RecallDistances(cases).empty();
}

std::string RenderRecallTable(const std::vector<CaseRecord>& cases) {
  const std::set<int64_t> distances = RecallDistances(cases);
  if (distances.empty()) {
    throw std::invalid_argument(
        "no pipeline of this run has recall accuracies: they come from a training suite with "
        "[data] corpus = \"recall\"");
  }
  std::vector<std::string> header = {"pipeline", "options", "parameters"};
  for (const int64_t d : distances) header.push_back("d = " + std::to_string(d));
  header.push_back("val. loss");
  header.push_back("status");
  MarkdownTable table(header);
  std::map<int64_t, int64_t> fewest;  // the fewest held-out samples a distance had in a row
  for (const CaseRecord& c : cases) {
    std::vector<std::string> row = {c.name(), c.description, Count(c.MetricValue("parameters"))};
    for (const int64_t d : distances) {
      const auto accuracy = c.MetricValue(kRecallPrefix + std::to_string(d));
      row.push_back(Percent(accuracy));
      if (const auto n = c.MetricValue("recall_samples_d" + std::to_string(d))) {
        const auto samples = static_cast<int64_t>(*n);
        fewest[d] = fewest.count(d) ? std::min(fewest[d], samples) : samples;
      }
    }
    row.push_back(Loss(c.MetricValue("final_validation_loss")));
    row.push_back(c.status + (c.message.empty() ? "" : ": " + c.message));
    table.AddRow(row);
  }
  std::string counts;
  for (const auto& [d, n] : fewest)
    counts += (counts.empty() ? "" : ", ") + std::to_string(n) + " at d = " + std::to_string(d);
  return table.Render() +
         "\nd: how far the query comes after the queried key's value (d − 1 filler and "
         "other tokens between). Each cell: the share of the held-out samples at that d (" +
         counts +
         ") whose answer is the trained model's greedy (argmax) prediction. A random digit "
         "scores 10%; answering with one of the stored values without matching the key, "
         "1/pairs.\n";
}

std::string BuildLossPlotScript(const std::vector<CaseRecord>& cases, const TrainingCurves& curves,
                                const LossPlotRequest& request) {
  if (request.x != "step" && request.x != "time") {
    throw std::invalid_argument("x must be step or time for a loss plot, got '" + request.x + "'");
  }
  if (request.y != "loss" && request.y != "validation_loss" && request.y != "loss_difference") {
    throw std::invalid_argument("y must be loss, validation_loss or loss_difference, got '" +
                                request.y + "'");
  }
  const bool difference = request.y == "loss_difference";
  const std::vector<TrainingStepRecord>* reference = nullptr;
  if (difference) {
    for (const CaseRecord& c : cases) {
      if (c.name() == request.over && curves.count(c.key())) {
        reference = &curves.at(c.key());
      }
    }
    if (reference == nullptr) {
      throw std::invalid_argument(
          "loss_difference needs over=PIPELINE, one of the plotted pipelines");
    }
  }
  // One window for every line, so that a short run is smoothed (and lags) as the others.
  size_t longest = 0;
  for (const CaseRecord& c : cases) {
    const auto it = curves.find(c.key());
    if (it != curves.end()) longest = std::max(longest, it->second.size());
  }
  const size_t window = std::max<size_t>(1, longest / 40);
  std::string data, plot;
  int series = 0;
  for (const CaseRecord& c : cases) {
    const auto it = curves.find(c.key());
    if (it == curves.end() || it->second.empty()) continue;
    if (difference && c.name() == request.over) continue;
    const auto& steps = it->second;
    std::string points;
    double sum = 0;
    for (size_t i = 0; i < steps.size(); ++i) {
      sum += steps[i].loss;
      if (i >= window) sum -= steps[i - window].loss;
      std::optional<double> y;
      if (request.y == "loss" && i + 1 >= window) y = sum / window;
      if (request.y == "validation_loss") y = steps[i].validation_loss;
      // Raw, per step; exact zeros have no place on the log axis and are left out.
      if (difference && i < reference->size()) {
        const double gap = std::abs(steps[i].loss - (*reference)[i].loss);
        y = gap > 0 ? std::optional<double>(gap) : std::nullopt;
      }
      if (!y || !std::isfinite(*y)) continue;
      const double x = request.x == "step" ? steps[i].step : steps[i].elapsed_s;
      char line[64];
      std::snprintf(line, sizeof(line), "%.10g %.10g\n", x, *y);
      points += line;
    }
    if (points.empty()) continue;
    data += "$series" + std::to_string(series) + " << EOD\n" + points + "EOD\n";
    plot += std::string(series ? ", \\\n     " : "") + "$series" + std::to_string(series) +
            " using 1:2 with " +
            (request.y == "validation_loss" ? "linespoints lw 2 pt 7"
             : difference                   ? "points pt 7 ps 0.5"
                                            : "lines lw 2") +
            " title " + GnuplotQuoted(c.name());
    ++series;
  }
  if (series == 0)
    throw std::invalid_argument("no pipeline of this run has " + request.y + " to plot");
  const std::string y_label =
      request.y == "loss" ? "training loss (nats/token, trailing mean)"
      : request.y == "validation_loss"
          ? "validation loss (nats/token)"
          : "|training loss − " + request.over + "'s| per step (nats/token)";
  std::string script = GnuplotPreamble(
      request.title, request.x == "step" ? "optimizer step" : "wall time (s)", y_label);
  if (difference) script += "set logscale y 10\nset format y '%.0e'\n";
  return script + data + "plot " + plot + "\n";
}

void RenderLossPlot(const std::vector<CaseRecord>& cases, const TrainingCurves& curves,
                    const LossPlotRequest& request) {
  RunGnuplot(BuildLossPlotScript(cases, curves, request), request.output);
}

std::vector<ExpectationOutcome> EvaluateTrainingExpectations(
    const std::vector<Expectation>& expectations, const std::vector<CaseRecord>& cases,
    const TrainingCurves& curves) {
  std::vector<ExpectationOutcome> outcomes;
  for (const Expectation& e : expectations) {
    if (e.what == "all_correct") {
      auto outcome = EvaluateExpectations({e}, cases);
      outcomes.insert(outcomes.end(), outcome.begin(), outcome.end());
      continue;
    }
    ExpectationOutcome outcome;
    const bool loss_match = e.what == "loss_match";
    const auto ratio_kind =
        std::find_if(std::begin(kRatioKinds), std::end(kRatioKinds),
                     [&](const RatioKind& kind) { return e.what == kind.what; });
    if (!loss_match && ratio_kind == std::end(kRatioKinds))
      throw std::invalid_argument("unknown training expectation '" + e.what + "'");
    outcome.expectation =
        (loss_match ? "largest |training loss of " + e.variant + " − " + e.over + "| per step"
                    : std::string(ratio_kind->measure) + " of " + e.variant + " / " + e.over) +
        " " + DescribeBound(e);
    const CaseRecord* mine = FindPipeline(cases, e.variant);
    const CaseRecord* theirs = FindPipeline(cases, e.over);
    std::optional<double> value;
    if (mine && theirs && mine->status == "ok" && theirs->status == "ok") {
      if (!loss_match) {
        const auto a = mine->MetricValue(ratio_kind->metric);
        const auto b = theirs->MetricValue(ratio_kind->metric);
        if (a && b && *b > 0) value = *a / *b;
      } else {
        const auto a = curves.find(mine->key()), b = curves.find(theirs->key());
        if (a != curves.end() && b != curves.end()) {
          const size_t common = std::min(a->second.size(), b->second.size());
          double largest = 0;
          for (size_t i = 0; i < common; ++i) {
            largest = std::max(largest, std::abs(a->second[i].loss - b->second[i].loss));
          }
          if (common > 0) value = largest;
          outcome.measured = " over " + std::to_string(common) + " steps";
        }
      }
    }
    if (value) {
      outcome.held = (!e.at_least || *value >= *e.at_least) && (!e.at_most || *value <= *e.at_most);
      outcome.measured = FormatSignificant(*value) + (loss_match ? "" : "×") + outcome.measured;
    } else {
      outcome.measured =
          !mine || !theirs ? "no pipeline '" + (!mine ? e.variant : e.over) + "' in the run"
                           : "no measurement (status " + mine->status + "/" + theirs->status + ")";
    }
    outcomes.push_back(outcome);
  }
  return outcomes;
}

}  // namespace seqbench
