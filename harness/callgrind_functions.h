// Which functions a counted step spent its instructions in: callgrind's per-function self
// cost (a function's own instructions, its callees' left out) from one dump's text, as
// torch.utils.benchmark's CallgrindStats.delta() lists them, so that a gate that finds a
// case moved can say where.
//
// The format (valgrind's docs, "Callgrind Format Specification"): `fn=` opens a function's
// cost lines (in the object of the last `ob=`), each a position (one column per `positions:` entry,
// possibly relative: +3, -2, *) followed by the events' counts in `events:` order; a `calls=` line
// makes the next cost line the inclusive cost of that call, which is not the caller's own. Names
// may be compressed ("fn=(12) name" defines 12, "fn=(12)" uses it; fn= and cfn= share one table).
//
// Thread-safety: pure functions.
#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <vector>

#include "results/records.h"

namespace seqbench {

// The first event's (Ir's) self cost of every function of one dump, by name; a name's
// recursion suffix ('2, from --separate-recs) folds into the name, and a function without
// a symbol (a stripped library's "0x...") is named with its object's file name. Empty when the text
// has no cost lines.
std::map<std::string, double> CallgrindSelfCosts(const std::string& dump_text);

// The `limit` costliest of `costs` (ties by name), most first: what a counted case stores.
std::vector<FunctionCost> CostliestFunctions(const std::map<std::string, double>& costs,
                                             size_t limit);

}  // namespace seqbench
