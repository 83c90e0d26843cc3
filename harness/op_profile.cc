// OpProfile (op_profile.h). Self times: per thread, the events sorted by start (a parent
// before the children it encloses), a stack of the open events; each event's duration is
// taken off the self time of the event enclosing it.
#include "harness/op_profile.h"

#include <torch/csrc/autograd/profiler_legacy.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>

namespace seqbench {
namespace {

struct Event {
  std::string name;
  double start_us = 0, duration_us = 0, child_us = 0;
};

// The trace's complete ("X") events, by thread.
std::map<std::string, std::vector<Event>> EventsByThread(const std::string& trace_json) {
  const auto trace = nlohmann::json::parse(trace_json);
  const auto& events = trace.is_array() ? trace : trace.at("traceEvents");
  std::map<std::string, std::vector<Event>> threads;
  for (const auto& event : events) {
    if (event.value("ph", "") != "X") continue;
    threads[event.at("tid").dump()].push_back({event.at("name").get<std::string>(),
                                               event.at("ts").get<double>(),
                                               event.at("dur").get<double>(), 0});
  }
  return threads;
}

// Charges each event's duration to the event enclosing it on its thread.
void ChargeParents(std::vector<Event>& events) {
  std::sort(events.begin(), events.end(), [](const Event& a, const Event& b) {
    return a.start_us != b.start_us ? a.start_us < b.start_us : a.duration_us > b.duration_us;
  });
  std::vector<Event*> open;
  for (Event& event : events) {
    while (!open.empty() && open.back()->start_us + open.back()->duration_us <= event.start_us)
      open.pop_back();
    if (!open.empty()) open.back()->child_us += event.duration_us;
    open.push_back(&event);
  }
}

}  // namespace

OpProfile SummarizeTrace(const std::string& trace_json, int64_t steps) {
  OpProfile profile;
  profile.steps = std::max<int64_t>(steps, 1);
  const double per_step = 1.0 / static_cast<double>(profile.steps);
  std::map<std::string, OpTime> ops;
  try {
    for (auto& [thread, events] : EventsByThread(trace_json)) {
      ChargeParents(events);
      for (const Event& event : events) {
        OpTime& op = ops[event.name];
        op.name = event.name;
        op.calls += per_step;
        op.self_ms += (event.duration_us - event.child_us) * 1e-3 * per_step;
        op.total_ms += event.duration_us * 1e-3 * per_step;
      }
    }
  } catch (const nlohmann::json::exception& error) {
    throw std::runtime_error(std::string("not a profiler trace: ") + error.what());
  }
  for (auto& [name, op] : ops) {
    profile.self_ms += op.self_ms;
    profile.ops.push_back(op);
  }
  std::sort(profile.ops.begin(), profile.ops.end(),
            [](const OpTime& a, const OpTime& b) { return a.self_ms > b.self_ms; });
  return profile;
}

OpProfile ProfileSteps(const std::function<void()>& step, int64_t steps) {
  steps = std::max<int64_t>(steps, 1);
  std::ostringstream trace;
  double wall_ms = 0;
  {
    torch::autograd::profiler::RecordProfile recording(trace);
    const auto start = std::chrono::steady_clock::now();
    for (int64_t i = 0; i < steps; ++i) step();
    wall_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  }  // the trace is written when the recording ends
  OpProfile profile = SummarizeTrace(trace.str(), steps);
  profile.wall_ms = wall_ms / static_cast<double>(steps);
  return profile;
}

}  // namespace seqbench
