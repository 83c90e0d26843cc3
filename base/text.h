// Text that names things: a content hash that identifies a text across runs and
// machines, a file-name stem derived from a user's name for something (a suite) that
// stays the same however many other names there are, and a number to a few digits.
//
// Thread-safety: pure functions, safe from any thread.
#pragma once

#include <string>

namespace seqbench {

// A 64-bit FNV-1a hash as 16 hex digits: identifies a suite text across runs.
std::string ContentHash(const std::string& text);

// A stem for a file name or a URL fragment naming `name`, the same on every call: `name`
// itself when it is 1-48 characters of [A-Za-z0-9_-], else those characters of it (others
// become '_', at most 32) followed by '-' and the first 8 digits of ContentHash(name), so
// that two names never share a stem in practice and no markup, slash or dot survives.
std::string NameStem(const std::string& name);

// `value` to `digits` significant digits, as printf's %g: "1.3", "0.000123", "nan".
std::string FormatSignificant(double value, int digits = 3);

}  // namespace seqbench
