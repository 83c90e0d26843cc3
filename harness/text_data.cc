#include "harness/text_data.h"

#include <iconv.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace seqbench::text {
namespace {

// The whole file; a missing or empty file is an error.
std::string ReadFile(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) throw DataError(path, "cannot open (does it exist?)");
  std::ostringstream bytes;
  bytes << file.rdbuf();
  if (bytes.str().empty()) throw DataError(path, "is empty");
  return bytes.str();
}

// Converts with iconv; an invalid or incomplete sequence is a DataError at its offset.
std::string Convert(std::string_view input, const char* from, const std::string& source) {
  iconv_t converter = iconv_open("UTF-8", from);
  if (converter == reinterpret_cast<iconv_t>(-1)) {
    throw DataError(source, std::string("this system's iconv cannot convert from ") + from);
  }
  std::string output(input.size() * 4 + 16, '\0');
  char* in = const_cast<char*>(input.data());
  size_t in_left = input.size();
  char* out = output.data();
  size_t out_left = output.size();
  const size_t result = iconv(converter, &in, &in_left, &out, &out_left);
  const int error = errno;
  iconv_close(converter);
  if (result == static_cast<size_t>(-1)) {
    const size_t offset = input.size() - in_left;
    throw DataError(source, std::string(error == EINVAL ? "incomplete " : "invalid ") + from +
                                " sequence at byte " + std::to_string(offset));
  }
  output.resize(output.size() - out_left);
  return output;
}

std::string Trim(std::string_view text) {
  const auto first = text.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos) return "";
  const auto last = text.find_last_not_of(" \t\r\n");
  return std::string(text.substr(first, last - first + 1));
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream stream(text);
  std::string line;
  while (std::getline(stream, line)) lines.push_back(line);
  return lines;
}

std::vector<int64_t> WithEos(std::vector<int64_t> ids) {
  ids.push_back(kEos);
  return ids;
}

void Append(std::vector<int64_t>& ids, std::string_view text, const std::string& source) {
  const auto encoded = Encode(text, source);
  ids.insert(ids.end(), encoded.begin(), encoded.end());
}

Corpus RequireSome(Corpus corpus, const std::string& source) {
  if (corpus.sequences.empty()) throw DataError(source, "holds no text in the expected format");
  return corpus;
}

}  // namespace

void CheckUtf8(std::string_view text, const std::string& source) { Convert(text, "UTF-8", source); }

std::vector<int64_t> Encode(std::string_view text, const std::string& source) {
  CheckUtf8(text, source);
  std::vector<int64_t> ids;
  ids.reserve(text.size());
  for (const unsigned char byte : text) ids.push_back(byte);
  return ids;
}

std::vector<int64_t> EncodeWithSpecialTokens(std::string_view text, const std::string& source) {
  static constexpr std::pair<std::string_view, int64_t> kSpecials[] = {
      {"<pad>", kPad}, {"<en>", kEn}, {"<ja>", kJa}, {"<eos>", kEos}};
  std::vector<int64_t> ids;
  size_t plain_begin = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    for (const auto& [marker, id] : kSpecials) {
      if (text.compare(i, marker.size(), marker) != 0) continue;
      const auto plain = Encode(text.substr(plain_begin, i - plain_begin), source);
      ids.insert(ids.end(), plain.begin(), plain.end());
      ids.push_back(id);
      i += marker.size() - 1;
      plain_begin = i + 1;
      break;
    }
  }
  const auto rest = Encode(text.substr(std::min(plain_begin, text.size())), source);
  ids.insert(ids.end(), rest.begin(), rest.end());
  return ids;
}

std::string Decode(const std::vector<int64_t>& ids) {
  std::string text;
  for (const int64_t id : ids) {
    if (id >= 0 && id < 256) {
      text += static_cast<char>(id);
    } else if (id == kPad) {
      text += "<pad>";
    } else if (id == kEn) {
      text += "<en>";
    } else if (id == kJa) {
      text += "<ja>";
    } else if (id == kEos) {
      text += "<eos>";
    } else {
      text += "<?" + std::to_string(id) + ">";
    }
  }
  return text;
}

Corpus LoadFortunes(const std::string& directory) {
  if (!std::filesystem::is_directory(directory)) {
    throw DataError(directory,
                    "is not a directory of fortune files (install the fortunes package)");
  }
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(directory)) {
    // Data files have no extension; .dat are strfile indexes, .u8 their UTF-8 twins' links.
    if (entry.is_regular_file() && !entry.path().has_extension()) files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  Corpus corpus{"fortunes", {}};
  for (const auto& file : files) {
    const std::string text = ReadFile(file.string());
    CheckUtf8(text, file.string());
    std::string entry;
    const auto flush = [&] {
      const std::string trimmed = Trim(entry);
      if (!trimmed.empty()) corpus.sequences.push_back(WithEos(Encode(trimmed, file.string())));
      entry.clear();
    };
    for (const std::string& line : Lines(text)) {
      if (Trim(line) == "%") {
        flush();
      } else {
        entry += line + "\n";
      }
    }
    flush();
  }
  return RequireSome(std::move(corpus), directory);
}

Corpus LoadEdict(const std::string& path) {
  const std::string text = Convert(ReadFile(path), "EUC-JP", path);
  Corpus corpus{"edict", {}};
  for (const std::string& line : Lines(text)) {
    // "漢字 [かんじ] /(n) Chinese characters/kanji/"; the file's first line is a header
    // whose headword is "？？？".
    const auto space = line.find(' ');
    const auto first_slash = line.find('/');
    if (space == std::string::npos || first_slash == std::string::npos) continue;
    const std::string headword = line.substr(0, space);
    if (headword.find("？") != std::string::npos) continue;
    std::string glosses;
    std::istringstream parts(line.substr(first_slash + 1));
    std::string gloss;
    while (std::getline(parts, gloss, '/')) {
      // Drop part-of-speech and usage tags such as "(n) " and "(uk) " at the start.
      while (!gloss.empty() && gloss.front() == '(') {
        const auto close = gloss.find(") ");
        if (close == std::string::npos) break;
        gloss = gloss.substr(close + 2);
      }
      gloss = Trim(gloss);
      if (!gloss.empty() && gloss.rfind("EntL", 0) != 0)
        glosses += (glosses.empty() ? "" : "; ") + gloss;
    }
    if (glosses.empty()) continue;
    std::vector<int64_t> ids{kEn};
    Append(ids, " " + glosses + " ", path);
    ids.push_back(kJa);
    Append(ids, " " + headword, path);
    corpus.sequences.push_back(WithEos(std::move(ids)));
  }
  return RequireSome(std::move(corpus), path);
}

Corpus LoadRottenTomatoes(const std::string& directory) {
  Corpus corpus{"rotten_tomatoes", {}};
  for (const char* name : {"rt-polarity.pos", "rt-polarity.neg"}) {
    const std::string path = (std::filesystem::path(directory) / name).string();
    const std::string text = ReadFile(path);
    CheckUtf8(text, path);
    for (const std::string& line : Lines(text)) {
      const std::string review = Trim(line);
      if (!review.empty()) corpus.sequences.push_back(WithEos(Encode(review, path)));
    }
  }
  return RequireSome(std::move(corpus), directory);
}

Corpus LoadDailyDialog(const std::string& path) {
  const std::string text = ReadFile(path);
  CheckUtf8(text, path);
  Corpus corpus{"dailydialog", {}};
  constexpr std::string_view kEndOfUtterance = "__eou__";
  for (const std::string& line : Lines(text)) {
    std::string dialogue;
    size_t start = 0;
    while (true) {
      const auto end = line.find(kEndOfUtterance, start);
      const std::string utterance = Trim(std::string_view(line).substr(
          start, end == std::string::npos ? std::string::npos : end - start));
      if (!utterance.empty()) dialogue += (dialogue.empty() ? "" : "\n") + utterance;
      if (end == std::string::npos) break;
      start = end + kEndOfUtterance.size();
    }
    if (!dialogue.empty()) corpus.sequences.push_back(WithEos(Encode(dialogue, path)));
  }
  return RequireSome(std::move(corpus), path);
}

}  // namespace seqbench::text
