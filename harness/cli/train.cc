// `seqbench train`: runs a training suite's pipelines (or one pipeline described on the
// command line) on real text, logging every step's loss into the results database and
// storing each pipeline's throughput, memory and final losses as a case of the run.
// `seqbench generate`: greedy decoding from a training checkpoint through `stepwise`.
#include <unistd.h>

#include <algorithm>
#include <boost/program_options.hpp>
#include <cctype>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <map>
#include <sstream>

#include "harness/cli/command.h"
#include "harness/cuda_probe.h"
#include "harness/run_header.h"
#include "harness/text_data.h"
#include "harness/training/pipeline.h"
#include "harness/training/training_suite.h"
#include "reports/format.h"
#include "reports/training.h"
#include "variants/core/registry.h"

namespace po = boost::program_options;

namespace seqbench::cli {
namespace {

using training::PipelineSpec;
using training::StepResult;
using training::Trainer;
using training::TrainingSuite;

volatile std::sig_atomic_t stop_requested = 0;
int64_t stop_after_steps = 0;  // tests: stop after this many steps, as if interrupted
void RequestStop(int) { stop_requested = 1; }

// A one-pipeline suite from the command line's flags, as TOML text: parsed like any suite
// file (one validation path), and stored with the run as its provenance. `flags` names the
// flag each line came from, so that an error in the text names the flag the user typed.
struct CommandLineSuiteText {
  std::string toml;
  std::map<int64_t, std::string> flags;  // 1-based line -> "--flag"
};

CommandLineSuiteText CommandLineSuite(const po::variables_map& values) {
  std::ostringstream toml;
  std::map<int64_t, std::string> flags;
  int64_t line = 1;  // the line the next key goes on
  // Text no flag wrote (the header, section tables): its errors name no flag.
  const auto section = [&](const std::string& text) {
    toml << text;
    line += std::count(text.begin(), text.end(), '\n');
  };
  const auto put = [&](const std::string& flag, const std::string& text) {
    flags[line] = "--" + flag;
    section(text);
  };
  const auto quoted = [](const std::string& text) {
    std::string out = "\"";
    for (const char c : text) {
      if (c == '"' || c == '\\') out += '\\';
      if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
        char escaped[8];
        std::snprintf(escaped, sizeof(escaped), "\\u%04x", static_cast<unsigned char>(c));
        out += escaped;  // a newline would end the TOML string; TOML wants them escaped
        continue;
      }
      out += c;
    }
    return out + "\"";
  };
  const auto number = [&](const char* flag, const char* key) {
    if (!values.count(flag)) return;
    // Only a number reaches the suite text: "1\nseed = 3" would be TOML of its own.
    const std::string text = values[flag].as<std::string>();
    char* end = nullptr;
    std::strtod(text.c_str(), &end);
    if (text.empty() || *end != '\0' || std::isspace(static_cast<unsigned char>(text[0]))) {
      throw UsageError(std::string("train: --") + flag + " must be a number, got '" + text + "'");
    }
    put(flag, std::string(key) + " = " + text + "\n");
  };
  const auto text = [&](const char* flag, const char* key) {
    if (values.count(flag)) {
      put(flag, std::string(key) + " = " + quoted(values[flag].as<std::string>()) + "\n");
    }
  };
  section("name = \"train\"\ndescription = " + quoted(CommandLine()) + "\n[data]\n");
  text("corpus", "corpus");
  text("data", "corpus");  // the old spelling
  text("data-path", "path");
  number("max-length", "max_length");
  number("validation-samples", "validation_samples");
  number("max-samples", "max_samples");
  section("[model]\n");
  number("width", "width");
  number("layers", "layers");
  number("heads", "heads");
  section("[[pipelines]]\n");
  put("variant",
      "name = " +
          quoted(values.count("variant") ? values["variant"].as<std::string>() : "batched") + "\n");
  text("variant", "variant");
  number("steps", "steps");
  text("batching", "batching");
  number("batch-size", "batch_size");
  number("token-budget", "token_budget");
  number("workers", "workers");
  number("accumulation", "accumulation");
  text("amp", "amp");
  number("learning-rate", "learning_rate");
  number("warmup-steps", "warmup_steps");
  number("clip-norm", "clip_norm");
  number("eval-every", "eval_every");
  number("seed", "seed");
  text("device", "device");
  if (values.count("loss-scaling")) put("loss-scaling", "loss_scaling = true\n");
  if (values.count("restarts")) put("restarts", "restarts = true\n");
  return {toml.str(), flags};
}

// An error in the command line's suite, told in the command line's terms: the flag, not a
// line of a text the user never wrote.
UsageError CommandLineError(const SuiteError& error, const CommandLineSuiteText& suite) {
  const auto flag = suite.flags.find(error.line());
  if (flag == suite.flags.end()) {
    return UsageError("train: " + error.message());
  }
  return UsageError("train: " + flag->second + ": " + error.message());
}

class ProgressPrinter {
 public:
  ProgressPrinter(std::string name, int64_t total) : name_(std::move(name)), total_(total) {}

  void Update(const StepResult& step, double elapsed_s, double tokens_per_s,
              std::optional<double> validation, int64_t first_step, bool last) {
    const double eta =
        elapsed_s / std::max<int64_t>(1, step.step - first_step) * (total_ - step.step);
    char line[256];
    std::snprintf(line, sizeof(line), "[%s] step %lld/%lld  loss %.3f%s  %.0f tok/s  ETA %s",
                  name_.c_str(), (long long)step.step, (long long)total_, step.loss,
                  validation ? ("  val " + FormatSignificant(*validation, 4)).c_str() : "",
                  tokens_per_s, FormatEta(eta).c_str());
    if (terminal_) {
      const int width = 20;
      const int filled = static_cast<int>(width * step.step / std::max<int64_t>(1, total_));
      std::fprintf(stderr, "\r%s [%s%s]\033[K", line, std::string(filled, '#').c_str(),
                   std::string(width - filled, '.').c_str());
      if (last) std::fprintf(stderr, "\n");
    } else if (validation || last || step.step % std::max<int64_t>(1, total_ / 10) == 0) {
      std::fprintf(stderr, "%s\n", line);  // logs: evaluations and every tenth of the run
    }
    std::fflush(stderr);
  }

 private:
  std::string name_;
  int64_t total_;
  bool terminal_ = isatty(fileno(stderr)) != 0;
};

}  // namespace

int RunTrain(const std::vector<std::string>& args) {
  std::string suite_path, db_path, checkpoint, resume, device, label;
  std::vector<std::string> only;
  int64_t save_every = 0;
  po::options_description options(
      "Usage: seqbench train [SUITE.toml] [OPTIONS]\n\n"
      "Trains on real text and stores every step's loss and each pipeline's throughput,\n"
      "peak memory and final losses in the results database. With a training suite\n"
      "(suites/training.toml), runs its pipelines side by side; without one, runs a single\n"
      "pipeline described by the flags below. Exits 0 when every pipeline finished, 1 when\n"
      "one failed or the run was interrupted (Ctrl-C; what ran is stored), 2 on bad input.\n\n"
      "Options");
  // Numbers are taken as text and parsed with the suite file's rules (one validation path).
  options.add_options()("help,h", "show this help")(
      "db", po::value(&db_path)->default_value(kDefaultDatabasePath), "results database")(
      "pipeline", po::value(&only)->composing(),
      "with a suite: run only this pipeline (repeatable)")(
      "steps", po::value<std::string>(), "optimizer steps (overrides the suite's)")(
      "device", po::value(&device), "cpu or cuda (overrides the suite's)")(
      "checkpoint", po::value(&checkpoint), "save the (single) pipeline's state here at the end")(
      "save-every", po::value(&save_every), "also save the checkpoint every N steps")(
      "resume", po::value(&resume), "load this checkpoint first and continue to --steps")(
      "label", po::value(&label), "a free label stored with the run, for selecting it later")(
      "corpus", po::value<std::string>(),
      "fortunes | edict | rotten_tomatoes | daily_dialog | synthetic ([data] corpus)")(
      "data-path", po::value<std::string>(),
      "corpus location ([data] path; default: the Debian package's); also with a suite")(
      "max-length", po::value<std::string>(), "longest sample in tokens (longer text is split)")(
      "validation-samples", po::value<std::string>(), "held-out samples")(
      "max-samples", po::value<std::string>(), "use at most this many samples")(
      "variant", po::value<std::string>(), "variant key (default batched)")(
      "width", po::value<std::string>(), "model width D")("layers", po::value<std::string>(),
                                                          "model layers L")(
      "heads", po::value<std::string>(), "heads H")("batching", po::value<std::string>(),
                                                    "fixed | bucketed | token_budget")(
      "batch-size", po::value<std::string>(), "samples per batch (fixed, bucketed)")(
      "token-budget", po::value<std::string>(), "B·T_max per batch (token_budget)")(
      "workers", po::value<std::string>(), "background loader threads")(
      "accumulation", po::value<std::string>(), "micro-batches per optimizer step")(
      "amp", po::value<std::string>(), "fp32 | bf16 | fp16 autocast")(
      "loss-scaling", "dynamic loss scaling (always on with fp16)")(
      "learning-rate", po::value<std::string>(), "peak learning rate (AdamW)")(
      "warmup-steps", po::value<std::string>(), "linear warmup steps")(
      "restarts", "cosine schedule with warm restarts")(
      "clip-norm", po::value<std::string>(), "clip gradients to this global norm (0: off)")(
      "eval-every", po::value<std::string>(), "validation loss every N steps")(
      "seed", po::value<std::string>(), "weights and batch order");
  po::options_description hidden;
  hidden.add_options()("suite", po::value(&suite_path))("stop-after-steps",
                                                        po::value(&stop_after_steps))(
      // The old spelling of --corpus, kept for one release.
      "data", po::value<std::string>());
  po::positional_options_description positional;
  positional.add("suite", 1);
  const auto values = ParseArguments(args, options, hidden, positional, "train");
  if (!values) return 0;

  if (values->count("data") && values->count("corpus"))
    throw UsageError("train: --data is the old spelling of --corpus; give one");
  static const char* kPipelineFlags[] = {
      "corpus",        "data",         "max-length", "validation-samples",
      "max-samples",   "variant",      "width",      "layers",
      "heads",         "batching",     "batch-size", "token-budget",
      "workers",       "accumulation", "amp",        "loss-scaling",
      "learning-rate", "warmup-steps", "restarts",   "clip-norm",
      "eval-every",    "seed"};
  TrainingSuite suite;
  try {
    if (!suite_path.empty()) {
      for (const char* flag : kPipelineFlags) {
        if (values->count(flag)) {
          throw UsageError(std::string("train: --") + flag +
                           " describes a pipeline; with a suite file, set it in the suite (or "
                           "drop the suite to train one pipeline from flags)");
        }
      }
      suite = training::LoadTrainingSuiteFile(suite_path);
    } else {
      const CommandLineSuiteText text = CommandLineSuite(*values);
      try {
        suite = training::ParseTrainingSuite(text.toml, "the command line");
      } catch (const SuiteError& error) {
        throw CommandLineError(error, text);
      }
    }
  } catch (const SuiteError& error) {
    throw UsageError("train: " + std::string(error.what()));
  }
  // Where the corpus lies is the machine's business, not the suite's (ci/gpu/run).
  if (!suite_path.empty() && values->count("data-path")) {
    suite.data.path = values->at("data-path").as<std::string>();
  }
  std::vector<PipelineSpec> pipelines;
  for (PipelineSpec spec : suite.pipelines) {
    if (!only.empty() && std::find(only.begin(), only.end(), spec.name) == only.end()) continue;
    if (values->count("steps")) {
      try {
        spec.steps = std::stoll(values->at("steps").as<std::string>());
      } catch (const std::exception&) {
        spec.steps = 0;
      }
      if (spec.steps < 1) throw UsageError("train: --steps must be a positive integer");
      spec.timing_warmup = std::min(spec.timing_warmup, spec.steps - 1);
      if (spec.cycle_follows_steps) spec.config.schedule.cycle_steps = spec.DefaultCycleSteps();
    }
    if (values->count("device")) {
      if (device != "cpu" && device != "cuda")
        throw UsageError("train: --device must be cpu or cuda");
      spec.config.device = device;
    }
    pipelines.push_back(spec);
  }
  for (const std::string& name : only) {
    try {
      suite.Pipeline(name);
    } catch (const std::out_of_range& error) {
      throw UsageError(std::string("train: --pipeline: ") + error.what());
    }
  }
  if ((!checkpoint.empty() || !resume.empty()) && pipelines.size() != 1) {
    throw UsageError(
        "train: --checkpoint and --resume need exactly one pipeline; pick it with "
        "--pipeline NAME (the suite has " +
        std::to_string(pipelines.size()) + ")");
  }
  if (save_every < 0) throw UsageError("train: --save-every must be at least 0");
  if (save_every > 0 && checkpoint.empty())
    throw UsageError("train: --save-every needs --checkpoint");
  if (!checkpoint.empty()) {
    // Refused now, not after the last step, when the checkpoint would be written.
    const std::filesystem::path folder = std::filesystem::path(checkpoint).parent_path().empty()
                                             ? std::filesystem::path(".")
                                             : std::filesystem::path(checkpoint).parent_path();
    if (!std::filesystem::is_directory(folder)) {
      throw UsageError("train: --checkpoint " + checkpoint + ": folder " + folder.string() +
                       " does not exist; create it first");
    }
  }

  training::TrainingData data;
  try {
    data = training::LoadTrainingData(suite.data, suite.data_seed);
  } catch (const std::exception& error) {
    throw UsageError("train: " + (suite_path.empty() ? std::string() : suite_path + ": [data]: ") +
                     error.what());
  }

  // The run a checkpoint was logged into, read before the database is touched: a file that
  // is not a checkpoint is refused here, not after the data is loaded.
  training::CheckpointOrigin origin;
  if (!resume.empty()) {
    try {
      origin = training::ReadCheckpointOrigin(resume);
    } catch (const std::exception& error) {
      throw UsageError("train: --resume " + std::string(error.what()));
    }
    // Refused before any run is opened or marked: a resume under other options would
    // otherwise fail inside the pipeline and close the run it meant to continue.
    const std::string ours = training::EffectiveConfig(pipelines.front().config).Fingerprint();
    const training::ResumeMatch match = training::MatchForResume(origin.fingerprint, ours);
    if (match.kind == training::ResumeMatch::kDifferent) {
      throw UsageError("train: --resume " + resume +
                       ": written by a different training configuration; it has\n  " +
                       origin.fingerprint + "\nthis command has\n  " + ours);
    }
    if (match.kind == training::ResumeMatch::kScheduleLength) {
      std::printf(
          "train: --resume %s: the cosine schedule now decays over %s steps after warmup (the "
          "checkpoint's over %s); steps after %lld follow the new length\n",
          resume.c_str(), match.resuming_cycle.c_str(), match.checkpoint_cycle.c_str(),
          (long long)origin.step);
    }
  }

  Store store(db_path);
  RunDescription description;
  description.kind = kRunKindTraining;
  description.suite_name = suite.name;
  description.suite_path = suite_path.empty() ? "(command line)" : suite_path;
  description.suite_text = suite.text;
  description.command_line = CommandLine();
  description.seed = suite.data_seed;
  description.baseline = suite.reference;
  description.expectations = suite.expectations;
  description.label = label;
  description.extra_environment = {{"timer",
                                    "steady_clock around each optimizer step, loader waits "
                                    "included (the loss is read back every step)"},
                                   {"data", data.description}};
  // The GPU's facts and library settings, as `run` records them.
  for (const auto& entry : cuda_probe::Environment()) {
    description.extra_environment.push_back(entry);
  }
  const RunRecord run = NewRunRecord(description);
  // A resume continues the checkpoint's run where this database holds it, unfinished and
  // on the same suite and data: one run, one log, and final metrics over all of its steps.
  int64_t run_id = 0;
  bool extending = false;  // a finished pipeline resumed for more steps
  std::string run_uuid = run.uuid;
  if (!origin.run_uuid.empty()) {
    const std::optional<RunRecord> stored = store.FindRunByUuid(origin.run_uuid);
    const std::string key = training::PipelineIdentity(suite, pipelines.front()).Key();
    std::string why_not;
    if (!stored) {
      why_not = "its run is not in " + db_path;
    } else if (stored->kind != kRunKindTraining || stored->suite_name != run.suite_name ||
               stored->Environment("data") != data.description) {
      // The training options themselves are the checkpoint's fingerprint, checked above;
      // the suite text is not compared, since from flags it holds the command line.
      why_not = "run " + std::to_string(stored->run_id) + " trained another suite or data";
    } else if (stored->status == "complete" || store.CaseKeys(stored->run_id).count(key)) {
      // Finished at fewer steps than asked for now, from a checkpoint at its last step:
      // the run is extended, and its pipeline's record replaced when the longer run ends.
      const auto logged = store.TrainingSteps(stored->run_id, key);
      const int64_t last_logged = logged.empty() ? 0 : logged.back().step;
      if (pipelines.front().steps > last_logged && origin.step == last_logged) {
        std::printf("train: extending run %lld from %lld to %lld steps\n",
                    (long long)stored->run_id, (long long)last_logged,
                    (long long)pipelines.front().steps);
        extending = true;
      } else {
        why_not =
            "run " + std::to_string(stored->run_id) + " already finished this pipeline (" +
            std::to_string(last_logged) + " steps" +
            (origin.step == last_logged ? "; ask for more with --steps to extend it)"
                                        : "; only a checkpoint of its last step, not of step " +
                                              std::to_string(origin.step) + ", extends it)");
      }
    }
    if (stored && why_not.empty()) {
      run_id = stored->run_id;
      run_uuid = stored->uuid;
      store.SetRunStatus(run_id, "running", "");
    }
    if (run_id == 0) std::printf("train: a new run, since %s\n", why_not.c_str());
  }
  if (run_id == 0) run_id = store.CreateRun(run);
  for (const auto& warning : run.warnings) std::cerr << "seqbench: warning: " << warning << "\n";
  std::printf("run %lld: training suite %s, %zu pipelines on %s -> %s\n", (long long)run_id,
              suite.name.c_str(), pipelines.size(), data.description.c_str(), db_path.c_str());
  std::fflush(stdout);

  std::signal(SIGINT, RequestStop);
  std::signal(SIGTERM, RequestStop);
  bool interrupted = false, failed = false;
  std::vector<CaseRecord> records;
  for (size_t position = 0; position < pipelines.size() && !interrupted; ++position) {
    const PipelineSpec& spec = pipelines[position];
    std::printf("[%zu/%zu] %s: %s, %lld steps\n", position + 1, pipelines.size(), spec.name.c_str(),
                spec.Describe().c_str(), (long long)spec.steps);
    std::fflush(stdout);
    ProgressPrinter progress(spec.name, spec.steps);
    training::PipelineHooks hooks;
    hooks.should_stop = [](int64_t steps_taken) {
      return stop_requested || (stop_after_steps > 0 && steps_taken >= stop_after_steps);
    };
    hooks.on_step = [&](const StepResult& step, double elapsed_s, double tokens_per_s,
                        std::optional<double> validation, int64_t first_step, bool last) {
      progress.Update(step, elapsed_s, tokens_per_s, validation, first_step, last);
    };
    hooks.on_message = [](const std::string& message) {
      std::fprintf(stderr, "%s\n", message.c_str());
    };
    training::PipelineOutcome outcome =
        training::RunPipeline(suite, spec, data, store, run_id, static_cast<int64_t>(position),
                              {checkpoint, save_every, resume, run_uuid}, hooks);
    interrupted = outcome.interrupted;
    if (interrupted) break;  // its steps are stored; its case is not: it did not finish
    if (extending) {
      store.ReplaceCase(run_id, outcome.record);
    } else {
      store.AddCase(run_id, outcome.record);
    }
    failed = failed || outcome.record.status != kStatusOk;
    records.push_back(std::move(outcome.record));
  }
  RecordRunEnd(store, run_id);
  store.SetRunStatus(run_id, interrupted ? "interrupted" : "complete", interrupted ? "" : UtcNow());
  if (!records.empty()) std::printf("\n%s\n", RenderTrainingTable(records).c_str());
  std::printf("run %lld %s\n", (long long)run_id,
              interrupted ? "interrupted: the finished pipelines and every logged step are stored"
                          : "complete");
  return interrupted || failed ? 1 : 0;
}

}  // namespace seqbench::cli
