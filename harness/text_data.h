// Real text for training runs, tokenized byte-level: UTF-8 bytes are ids 0..255, and four
// special tokens follow (<pad>, <en>, <ja>, <eos>). Loaders read the formats the seed's
// datasets are published in, and the two corpora Debian ships:
//   fortunes        /usr/share/games/fortunes/*: quotations separated by lines of "%"
//   edict           /usr/share/edict/edict: EUC-JP "漢字 [かな] /gloss/gloss/", turned into
//                   "<en> gloss; gloss <ja> 漢字 <eos>", the seed's prompt format
//   Rotten Tomatoes rt-polarity.pos / rt-polarity.neg: one review a line
//   DailyDialog     dialogues_text.txt: one dialogue a line, utterances ending "__eou__"
// Text must be valid UTF-8 (after EUC-JP conversion for edict); anything else is an error
// that names the file and the byte, never silently skipped.
//
// Thread-safety: pure functions; safe from any thread.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace seqbench::text {

inline constexpr int64_t kPad = 256;
inline constexpr int64_t kEn = 257;
inline constexpr int64_t kJa = 258;
inline constexpr int64_t kEos = 259;
inline constexpr int64_t kVocabularySize = 260;

// A problem with a data file: what() reads "path: message".
class DataError : public std::runtime_error {
 public:
  DataError(const std::string& path, const std::string& message)
      : std::runtime_error(path + ": " + message) {}
};

// Throws DataError (naming `source` and the byte offset) unless `text` is valid UTF-8.
void CheckUtf8(std::string_view text, const std::string& source);

// UTF-8 bytes to ids (validated first). No special tokens are added.
std::vector<int64_t> Encode(std::string_view text, const std::string& source = "text");
// As Encode(), but the markers "<pad>", "<en>", "<ja>" and "<eos>" become their special
// tokens: "<en> I love apple <ja>" -> [kEn, ' ', 'I', ..., ' ', kJa].
std::vector<int64_t> EncodeWithSpecialTokens(std::string_view text,
                                             const std::string& source = "text");
// Ids back to text; special tokens print as "<pad>", "<en>", "<ja>", "<eos>".
std::string Decode(const std::vector<int64_t>& ids);

struct Corpus {
  std::string name;
  std::vector<std::vector<int64_t>> sequences;  // each ends with kEos
};

Corpus LoadFortunes(const std::string& directory);
Corpus LoadEdict(const std::string& path);
Corpus LoadRottenTomatoes(const std::string& directory);
Corpus LoadDailyDialog(const std::string& path);

}  // namespace seqbench::text
