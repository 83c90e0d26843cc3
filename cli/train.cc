// `seqbench train`: runs a training suite's pipelines (or one pipeline described on the
// command line) on real text, logging every step's loss into the results database and
// storing each pipeline's throughput, memory and final losses as a case of the run.
// `seqbench generate`: greedy decoding from a training checkpoint through `stepwise`.
#include <unistd.h>

#include <algorithm>
#include <boost/program_options.hpp>
#include <cctype>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <map>
#include <sstream>

#include "base/files.h"
#include "base/process.h"
#include "base/text.h"
#include "cli/command.h"
#include "harness/child_run.h"
#include "harness/text_data.h"
#include "harness/training/distributed.h"
#include "harness/training/pipeline.h"
#include "harness/training/rank_launch.h"
#include "harness/training/training_run.h"
#include "harness/training/training_suite.h"
#include "harness/training/world_plan.h"
#include "reports/escape/terminal.h"
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

int64_t stop_after_steps = 0;  // tests: stop after this many steps, as if interrupted

// A one-pipeline suite from the command line's flags, as TOML text: parsed like any suite
// file (one validation path), and stored with the run as its provenance. `flags` names the
// flag each line came from, so that an error in the text names the flag the user typed.
struct CommandLineSuiteText {
  std::string toml;
  std::map<int64_t, std::string> flags;  // 1-based line -> "--flag"
};

// `text` as a TOML basic string: quotes and backslashes escaped, control characters as
// \uXXXX (a newline would end the string, and TOML wants them escaped).
std::string TomlQuoted(const std::string& text) {
  std::string out = "\"";
  for (const char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
      char escaped[8];
      std::snprintf(escaped, sizeof(escaped), "\\u%04x", static_cast<unsigned char>(c));
      out += escaped;
      continue;
    }
    out += c;
  }
  return out + "\"";
}

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
  const auto quoted = TomlQuoted;
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
  text("optimizer", "optimizer");
  text("offload", "offload");
  number("learning-rate", "learning_rate");
  number("warmup-steps", "warmup_steps");
  number("clip-norm", "clip_norm");
  number("eval-every", "eval_every");
  number("seed", "seed");
  text("device", "device");
  number("bucket-mb", "bucket_mb");
  text("compression", "compression");
  number("zero", "zero");
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
  // The name is a pipeline's, from a suite file: shown as text.
  ProgressPrinter(const std::string& name, int64_t total)
      : name_(escape::TerminalText(name, false)), total_(total) {}

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

// `--nproc N`: starts N ranks of this same command (without --nproc) on this machine
// (training::LaunchRanks) and says how each that failed ended. Ctrl-C kills every rank
// (the run stays unfinished, for --resume). Returns 0 when every rank exited 0, else the
// first failing rank's exit code (1 for a signal).
int LaunchRanks(const std::vector<std::string>& args, int64_t ranks, double grace_s) {
  training::RankLaunch launch;
  launch.rank.binary = SelfExecutable();
  launch.rank.plugins = AbsolutePluginPaths();  // a pipeline may train a plugin's variant
  launch.rank.command = "train";
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--nproc") {
      ++i;  // and its value
    } else if (args[i].rfind("--nproc=", 0) != 0) {
      launch.rank.user_flags.push_back(args[i]);
    }
  }
  launch.ranks = ranks;
  launch.grace_s = grace_s;
  launch.should_stop = StopRequested;
  launch.port = training::FreeLocalPort();
  std::printf("train: starting %lld ranks on this machine (c10d store at 127.0.0.1:%lld)\n",
              (long long)ranks, (long long)launch.port);
  std::fflush(stdout);
  const std::vector<ChildOutcome> outcomes = training::LaunchRanks(launch);
  for (size_t rank = 0; rank < outcomes.size(); ++rank) {
    const ChildOutcome& outcome = outcomes[rank];
    if (outcome.end == ChildOutcome::End::kExited && outcome.exit_code == 0) continue;
    std::fprintf(stderr, "train: rank %zu %s\n", rank, training::DescribeRankEnd(outcome).c_str());
  }
  return training::LaunchExitStatus(outcomes);
}

}  // namespace

namespace {

// Every flag of `seqbench train` as given; `values` says which were.
struct TrainFlags {
  std::string suite_path, db_path, checkpoint, resume, device, label;
  std::vector<std::string> only;
  int64_t save_every = 0, nproc = 0, timeout_s = 60;
  po::variables_map values;
};

// Parses `args` into `f`; false when --help was answered.
bool ParseTrainFlags(const std::vector<std::string>& args, TrainFlags& f) {
  po::options_description options(
      "Usage: seqbench train [SUITE.toml] [OPTIONS]\n\n"
      "Trains on real text and stores every step's loss and each pipeline's throughput,\n"
      "peak memory and final losses in the results database. With a training suite\n"
      "(suites/training.toml), runs its pipelines side by side; without one, runs a single\n"
      "pipeline described by the flags below. Exits 0 when every pipeline finished, 1 when\n"
      "one failed or the run was interrupted (Ctrl-C; what ran is stored), 2 on bad input.\n\n"
      "Data parallelism (c10d, Gloo): --nproc N starts N ranks on this machine; under\n"
      "torchrun (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT set) each process is one rank.\n"
      "A pipeline trains on every rank unless its suite entry sets `ranks`; the batch\n"
      "options describe the global batch, which the ranks split. Rank 0 alone writes the\n"
      "database and checkpoints.\n\n"
      "Options");
  // Numbers are taken as text and parsed with the suite file's rules (one validation path).
  options.add_options()("help,h", "show this help")(
      "db", po::value(&f.db_path)->default_value(kDefaultDatabasePath), "results database")(
      "pipeline", po::value(&f.only)->composing(),
      "with a suite: run only this pipeline (repeatable)")(
      "steps", po::value<std::string>(), "optimizer steps (overrides the suite's)")(
      "device", po::value(&f.device), "cpu or cuda (overrides the suite's)")(
      "checkpoint", po::value(&f.checkpoint), "save the (single) pipeline's state here at the end")(
      "save-every", po::value(&f.save_every), "also save the checkpoint every N steps")(
      "resume", po::value(&f.resume), "load this checkpoint first and continue to --steps")(
      "label", po::value(&f.label), "a free label stored with the run, for selecting it later")(
      "corpus", po::value<std::string>(),
      "fortunes | edict | rotten_tomatoes | daily_dialog | synthetic ([data] corpus); "
      "recall (its distances) from a suite only")(
      "data-path", po::value<std::string>(),
      "corpus location ([data] path; default: the Debian package's); also with a suite")(
      "max-length", po::value<std::string>(), "longest sample in tokens (longer text is split)")(
      "validation-samples", po::value<std::string>(), "held-out samples")(
      "max-samples", po::value<std::string>(), "use at most this many samples")(
      "variant", po::value<std::string>(), "variant key (default batched)")(
      "width", po::value<std::string>(), "model width D")("layers", po::value<std::string>(),
                                                          "model layers L")(
      "heads", po::value<std::string>(), "heads H")("batching", po::value<std::string>(),
                                                    "fixed | bucketed | token_budget | curriculum")(
      "batch-size", po::value<std::string>(), "samples per batch (fixed, bucketed, curriculum)")(
      "token-budget", po::value<std::string>(), "B·T_max per batch (token_budget)")(
      "workers", po::value<std::string>(), "background loader threads")(
      "accumulation", po::value<std::string>(), "micro-batches per optimizer step")(
      "amp", po::value<std::string>(), "fp32 | bf16 | fp16 autocast")(
      "loss-scaling", "dynamic loss scaling (always on with fp16)")(
      "optimizer", po::value<std::string>(),
      "adamw | adamw8bit (moments stored block-wise in 8 bits) | lamb | lars (layer-wise "
      "trust ratios; LARS's momentum and trust_coefficient are suite keys)")(
      "offload", po::value<std::string>(),
      "none | cpu: AdamW's moments and update on the host (CUDA; skipped elsewhere)")(
      "learning-rate", po::value<std::string>(), "peak learning rate")(
      "warmup-steps", po::value<std::string>(), "linear warmup steps")(
      "restarts", "cosine schedule with warm restarts")(
      "clip-norm", po::value<std::string>(), "clip gradients to this global norm (0: off)")(
      "eval-every", po::value<std::string>(), "validation loss every N steps")(
      "seed", po::value<std::string>(), "weights and batch order")(
      "nproc", po::value(&f.nproc), "start this many data-parallel ranks on this machine")(
      "bucket-mb", po::value<std::string>(), "gradient bucket cap in MiB (c10d Reducer; 25)")(
      "compression", po::value<std::string>(), "none | fp16: gradient buckets sent as")(
      "zero", po::value<std::string>(), "0 | 1: ZeRO-1 shards the optimizer state over ranks")(
      "dist-timeout", po::value(&f.timeout_s),
      "seconds a rank waits for its peers before failing (default 60)");
  po::options_description hidden;
  hidden.add_options()("suite", po::value(&f.suite_path))("stop-after-steps",
                                                          po::value(&stop_after_steps))(
      // The old spelling of --corpus, kept for one release.
      "data", po::value<std::string>());
  po::positional_options_description positional;
  positional.add("suite", 1);
  auto values = ParseArguments(args, options, hidden, positional, "train");
  if (!values) return false;
  f.values = std::move(*values);
  if (f.values.count("data") && f.values.count("corpus"))
    throw UsageError("train: --data is the old spelling of --corpus; give one");
  return true;
}

// The training suite: the file's, or one pipeline described by the flags.
TrainingSuite LoadTrainSuite(const TrainFlags& f) {
  static const char* kPipelineFlags[] = {
      "corpus",      "data",          "max-length",   "validation-samples",
      "max-samples", "variant",       "width",        "layers",
      "heads",       "batching",      "batch-size",   "token-budget",
      "workers",     "accumulation",  "amp",          "loss-scaling",
      "optimizer",   "learning-rate", "warmup-steps", "restarts",
      "clip-norm",   "eval-every",    "seed",         "bucket-mb",
      "compression", "offload",       "zero"};
  TrainingSuite suite;
  try {
    if (!f.suite_path.empty()) {
      for (const char* flag : kPipelineFlags) {
        if (f.values.count(flag)) {
          throw UsageError(std::string("train: --") + flag +
                           " describes a pipeline; with a suite file, set it in the suite (or "
                           "drop the suite to train one pipeline from flags)");
        }
      }
      suite = training::LoadTrainingSuiteFile(f.suite_path);
    } else {
      const CommandLineSuiteText text = CommandLineSuite(f.values);
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
  if (!f.suite_path.empty() && f.values.count("data-path")) {
    suite.data.path = f.values.at("data-path").as<std::string>();
  }
  return suite;
}

// The pipelines to train (--pipeline), with --steps and --device applied.
std::vector<PipelineSpec> SelectPipelines(const TrainFlags& f, const TrainingSuite& suite) {
  std::vector<PipelineSpec> pipelines;
  for (PipelineSpec spec : suite.pipelines) {
    if (!f.only.empty() && std::find(f.only.begin(), f.only.end(), spec.name) == f.only.end())
      continue;
    if (f.values.count("steps")) {
      try {
        spec.steps = std::stoll(f.values.at("steps").as<std::string>());
      } catch (const std::exception&) {
        spec.steps = 0;
      }
      if (spec.steps < 1) throw UsageError("train: --steps must be a positive integer");
      spec.timing_warmup = std::min(spec.timing_warmup, spec.steps - 1);
      if (spec.cycle_follows_steps) spec.config.schedule.cycle_steps = spec.DefaultCycleSteps();
    }
    if (f.values.count("device")) {
      if (f.device != "cpu" && f.device != "cuda")
        throw UsageError("train: --device must be cpu or cuda");
      spec.config.device = f.device;
    }
    pipelines.push_back(spec);
  }
  for (const std::string& name : f.only) {
    try {
      suite.Pipeline(name);
    } catch (const std::out_of_range& error) {
      throw UsageError(std::string("train: --pipeline: ") + error.what());
    }
  }
  return pipelines;
}

// The world of the flags and the environment, and the pipelines fitted to it
// (harness/training/world_plan.h); what it refuses is the user's to fix: exit 2.
training::WorldPlan FitToWorld(const TrainFlags& f, std::vector<PipelineSpec>& pipelines) {
  training::WorldRequest request;
  if (f.values.count("nproc")) request.nproc = f.nproc;
  request.timeout_s = f.timeout_s;
  try {
    const training::WorldPlan plan = training::PlanWorld(request);
    training::FitPipelinesToWorld(plan.size, std::chrono::seconds(f.timeout_s), pipelines);
    training::CheckTeachers(pipelines);
    return plan;
  } catch (const training::WorldRefused& refused) {
    throw UsageError("train: " + escape::TerminalText(refused.what()));
  }
}

// --checkpoint, --save-every and --resume: one pipeline, a folder that exists, never the
// database or a link; refused now, not after the last step, when it would be written.
void CheckCheckpointFlags(const TrainFlags& f, const std::vector<PipelineSpec>& pipelines) {
  if ((!f.checkpoint.empty() || !f.resume.empty()) && pipelines.size() != 1) {
    throw UsageError(
        "train: --checkpoint and --resume need exactly one pipeline; pick it with "
        "--pipeline NAME (the suite has " +
        std::to_string(pipelines.size()) + ")");
  }
  if ((!f.checkpoint.empty() || !f.resume.empty()) &&
      pipelines.front().config.data_parallel.zero_stage > 0) {
    throw UsageError("train: --checkpoint and --resume: pipeline '" +
                     escape::TerminalText(pipelines.front().name) +
                     "' has zero = 1, where each rank holds only its share of the optimizer "
                     "state; train it without zero to checkpoint");
  }
  if (f.save_every < 0 || f.save_every > training::kMaxCount)
    throw UsageError("train: --save-every must be between 0 and " +
                     std::to_string(training::kMaxCount) + " steps, got " +
                     std::to_string(f.save_every));
  if (f.save_every > 0 && f.checkpoint.empty())
    throw UsageError("train: --save-every needs --checkpoint");
  if (!f.checkpoint.empty()) {
    // Refused now, not after the last step, when the checkpoint would be written.
    const std::filesystem::path folder = std::filesystem::path(f.checkpoint).parent_path().empty()
                                             ? std::filesystem::path(".")
                                             : std::filesystem::path(f.checkpoint).parent_path();
    if (!std::filesystem::is_directory(folder)) {
      throw UsageError("train: --checkpoint " + f.checkpoint + ": folder " + folder.string() +
                       " does not exist; create it first");
    }
    try {  // neither the results database nor a planted link, checked before any step
      RefuseDatabaseOutput(f.checkpoint, f.db_path, "--checkpoint");
      if (std::filesystem::is_symlink(f.checkpoint) ||
          (std::filesystem::exists(f.checkpoint) &&
           !std::filesystem::is_regular_file(f.checkpoint)))
        throw OutputRefused("--checkpoint " + f.checkpoint +
                            " is a symbolic link or not a regular file; name a file");
    } catch (const OutputRefused& refused) {
      throw UsageError("train: " + std::string(refused.what()));
    }
  }
}

// What --resume continues from, and a note for the user when the schedule's length
// changed (printed by the rank that speaks, once).
struct ResumeCheck {
  training::CheckpointOrigin origin;
  std::string note;
};

// The checkpoint's run, read before the corpus or the database is touched and before any
// rank starts: a file that is not a checkpoint, or one written under another
// configuration, is refused here.
ResumeCheck CheckResume(const TrainFlags& f, const std::vector<PipelineSpec>& pipelines) {
  ResumeCheck check;
  training::CheckpointOrigin& origin = check.origin;
  if (f.resume.empty()) return check;
  try {
    origin = training::ReadCheckpointOrigin(f.resume);
  } catch (const std::exception& error) {
    throw UsageError("train: --resume " + std::string(error.what()));
  }
  // Refused before any run is opened or marked: a resume under other options would
  // otherwise fail inside the pipeline and close the run it meant to continue.
  const std::string ours = training::EffectiveConfig(pipelines.front().config).Fingerprint();
  const training::ResumeMatch match = training::MatchForResume(origin.fingerprint, ours);
  if (match.kind == training::ResumeMatch::kDifferent) {
    throw UsageError("train: --resume " + f.resume +
                     ": written by a different training configuration; it has\n  " +
                     origin.fingerprint + "\nthis command has\n  " + ours);
  }
  if (match.kind == training::ResumeMatch::kScheduleLength) {
    check.note = "--resume " + f.resume + ": the cosine schedule now decays over " +
                 match.resuming_cycle + " steps after warmup (the checkpoint's over " +
                 match.checkpoint_cycle + "); steps after " + std::to_string(origin.step) +
                 " follow the new length";
  }
  return check;
}

// Rank 0 speaks for the run: it alone prints, writes the database and checkpoints. The
// other ranks log the same steps into a database in memory and say only their errors.
struct Voice {
  bool speaks = true;
  std::string rank_prefix;  // "[rank 3] " in a world of several
};

// What one pipeline's run reports to the terminal.
training::PipelineHooks HooksFor(ProgressPrinter& progress, const Voice& voice) {
  training::PipelineHooks hooks;
  hooks.should_stop = [](int64_t steps_taken) {
    return StopRequested() || (stop_after_steps > 0 && steps_taken >= stop_after_steps);
  };
  hooks.on_step = [&progress, speaks = voice.speaks](
                      const StepResult& step, double elapsed_s, double tokens_per_s,
                      std::optional<double> validation, int64_t first_step, bool last) {
    if (speaks) progress.Update(step, elapsed_s, tokens_per_s, validation, first_step, last);
  };
  hooks.on_message = [voice](const std::string& message) {
    if (voice.speaks || message.find("error: ") != std::string::npos) {
      std::fprintf(stderr, "%s%s\n", voice.rank_prefix.c_str(),
                   escape::TerminalText(message).c_str());
    }
  };
  return hooks;
}

// What this process says as its pipelines train: a line as each starts, its progress, and
// why the run stops early.
training::TrainingRunHooks RunHooksFor(std::optional<ProgressPrinter>& progress, const Voice& voice,
                                       size_t pipelines) {
  training::TrainingRunHooks hooks;
  hooks.start_pipeline = [&progress, voice, pipelines](size_t position, const PipelineSpec& spec) {
    std::printf("[%zu/%zu] %s: %s, %lld steps\n", position + 1, pipelines,
                escape::TerminalText(spec.name, false).c_str(),
                escape::TerminalText(spec.Describe(), false).c_str(), (long long)spec.steps);
    std::fflush(stdout);
    progress.emplace(spec.name, spec.steps);
    return HooksFor(*progress, voice);
  };
  hooks.on_stop = [voice](const std::string& message) {
    std::fprintf(stderr, "%strain: %s\n", voice.rank_prefix.c_str(),
                 escape::TerminalText(message).c_str());
  };
  return hooks;
}

// Marks the run, prints the pipelines' tables, and gives the exit status.
int FinishTraining(Store& store, int64_t run_id, const training::TrainingOutcome& outcome) {
  const bool interrupted = outcome.interrupted;
  const std::vector<CaseRecord>& records = outcome.records;
  training::CloseTrainingRun(store, run_id, interrupted);
  if (!records.empty()) std::printf("\n%s\n", RenderTrainingTable(records).c_str());
  if (HasRecallScores(records)) std::printf("%s\n", RenderRecallTable(records).c_str());
  if (HasInferenceComparisons(records)) {
    std::printf("%s\n", RenderInferenceTable(records).c_str());
  }
  std::printf("run %lld %s\n", (long long)run_id,
              interrupted ? "interrupted: the finished pipelines and every logged step are stored"
                          : "complete");
  std::fflush(stdout);
  return interrupted || outcome.failed ? 1 : 0;
}

}  // namespace

int RunTrain(const std::vector<std::string>& args) {
  TrainFlags f;
  if (!ParseTrainFlags(args, f)) return 0;
  const TrainingSuite suite = LoadTrainSuite(f);
  std::vector<PipelineSpec> pipelines = SelectPipelines(f, suite);
  const training::WorldPlan plan = FitToWorld(f, pipelines);
  CheckCheckpointFlags(f, pipelines);
  // A bad --resume is the user's flag: refused before the corpus is read or ranks start.
  const ResumeCheck resume = CheckResume(f, pipelines);
  if (f.nproc > 1) {
    InstallStopHandlers();
    return LaunchRanks(args, f.nproc, /*grace_s=*/f.timeout_s + 10.0);
  }
  std::unique_ptr<training::World> world;
  if (plan.size > 1) {
    try {
      world =
          std::make_unique<training::World>(*plan.environment, std::chrono::seconds(f.timeout_s));
    } catch (const std::exception& error) {
      std::fprintf(stderr, "train: rank %lld: could not join the world: %s\n",
                   (long long)plan.environment->rank, error.what());
      return 1;
    }
  }
  Voice voice;
  voice.speaks = !world || world->rank() == 0;
  voice.rank_prefix = world ? "[rank " + std::to_string(world->rank()) + "] " : "";
  if (!voice.speaks) {
    f.db_path = "";
    f.checkpoint = "";
    if (std::freopen("/dev/null", "w", stdout) == nullptr)
      std::fprintf(stderr, "%scould not silence standard output\n", voice.rank_prefix.c_str());
  }
  if (voice.speaks && !resume.note.empty())
    std::printf("train: %s\n", escape::TerminalText(resume.note).c_str());
  const training::CheckpointOrigin& origin = resume.origin;
  training::TrainingData data;
  try {
    data = training::LoadTrainingData(suite.data, suite.data_seed);
  } catch (const std::exception& error) {
    throw UsageError(
        "train: " + (f.suite_path.empty() ? std::string() : f.suite_path + ": [data]: ") +
        error.what());
  }
  Store store(f.db_path);
  const training::TrainingRunRequest request{
      f.suite_path, CommandLine(), f.label, f.db_path, {f.checkpoint, f.save_every, f.resume, ""}};
  const RunRecord run = training::DescribeTrainingRun(request, suite, data, world.get());
  const training::TrainingRun opened =
      training::OpenTrainingRun(request, store, run, suite, pipelines, data, origin);
  if (!opened.note.empty()) std::printf("train: %s\n", escape::TerminalText(opened.note).c_str());
  if (voice.speaks) {
    for (const auto& warning : run.warnings)
      std::cerr << "seqbench: warning: " << escape::TerminalText(warning) << "\n";
  }
  std::printf("run %lld: training suite %s, %zu pipelines on %s -> %s\n", (long long)opened.id,
              escape::TerminalText(suite.name, false).c_str(), pipelines.size(),
              escape::TerminalText(data.description, false).c_str(),
              escape::TerminalText(f.db_path, false).c_str());
  std::fflush(stdout);
  InstallStopHandlers();
  std::optional<ProgressPrinter> progress;
  const training::TrainingOutcome outcome =
      training::TrainPipelines(request, suite, pipelines, data, store, opened, world.get(),
                               RunHooksFor(progress, voice, pipelines.size()));
  return FinishTraining(store, opened.id, outcome);
}

}  // namespace seqbench::cli
